"""What omnigent keeps on disk is its user's alone; a deleted session's workspace can go.

Found by the third attack probe (issue 23, defect 6, and minor): ``$OMNIGENT_HOME`` was
created ``0755``, ``omnigent.db`` ``0644`` and the workspaces ``0755`` — another local
user read an ``api_key`` from the database and a file from a workspace. Now omnigent
creates its own directories ``0700`` and files ``0600`` whatever the umask, ``serve``
runs with umask ``077`` (so what its tools write is private too), and ``serve`` and
``stdio`` warn at start about an existing one that is wider. Workspaces were never
deleted with their session: ``serve --purge-workspaces`` (off by default),
``delete_session(purge_workspace=True)`` and ``omnigent sessions delete --purge`` do.
"""

from __future__ import annotations

import os
import socket
import stat
import subprocess
import sys
from pathlib import Path

import trio

import omnigent
from omnigent.testing import run_turn

from .serve_helpers import open_serve, run_cli, scripted

WRITE = [{"call": "sys_os_write", "args": {"path": "notes.txt", "content": "private"}}]


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


async def test_the_server_keeps_its_files_private(tmp_path: Path) -> None:
    old = os.umask(0o022)  # what most users run with
    try:
        with trio.fail_after(60):
            async with open_serve(tmp_path, make_home=False) as served:
                agent = await served.agent(scripted("writer", WRITE))
                session = await served.session(agent_id=agent)
                content = [{"type": "input_text", "text": "go"}]
                body = {"type": "message", "data": {"role": "user", "content": content}}
                async with served.client.stream(
                    "POST", f"/v1/sessions/{session}/events?stream=true", json=body
                ) as stream:
                    async for _ in stream.aiter_lines():
                        pass
                home = served.home
                workspace = home / "workspaces" / session / "workspace"
                assert (workspace / "notes.txt").read_text() == "private"
                modes = {
                    "home": mode(home),
                    "db": mode(home / "omnigent.db"),
                    "wal": mode(home / "omnigent.db-wal"),
                    "lock": mode(home / "omnigent.db.lock"),
                    "workspaces": mode(home / "workspaces"),
                    "session": mode(workspace.parent),
                    "workspace": mode(workspace),
                    "file": mode(workspace / "notes.txt"),
                }
    finally:
        os.umask(old)
    assert modes == {
        "home": 0o700,
        "db": 0o600,
        "wal": 0o600,
        "lock": 0o600,
        "workspaces": 0o700,
        "session": 0o700,
        "workspace": 0o700,
        "file": 0o600,
    }


async def test_an_existing_wide_home_is_warned_about(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o755)
    os.chmod(home, 0o755)
    (home / "omnigent.db").touch(mode=0o644)
    os.chmod(home / "omnigent.db", 0o644)
    env = {**os.environ, "OMNIGENT_HOME": str(home)}
    with socket.socket() as busy:  # serve warns, then fails to listen: exit 2
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with trio.fail_after(30):
            done = await trio.run_process(
                [sys.executable, "-m", "omnigent", "serve", "--port", str(port)],
                env=env,
                capture_stdout=True,
                capture_stderr=True,
                check=False,
            )
    stderr = done.stderr.decode()
    assert done.returncode == 2, stderr
    assert f"{home} is readable by other users (mode 755)" in stderr, stderr
    assert "omnigent.db is readable by other users (mode 644)" in stderr, stderr
    # Existing files are the user's to change: warned about, not changed.
    assert mode(home) == 0o755


async def test_stdio_warns_too(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    os.chmod(home, 0o750)
    spec = tmp_path / "agent.yaml"
    spec.write_text("name: a\nexecutor: {type: omnigent, config: {harness: scripted}}\n")
    env = {**os.environ, "OMNIGENT_HOME": str(home)}
    with trio.fail_after(30):
        done = await trio.run_process(
            [sys.executable, "-m", "omnigent", "stdio", "--agent", str(spec)],
            env=env,
            stdin=subprocess.DEVNULL,
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    assert f"{home} is readable by other users (mode 750)" in done.stderr.decode()


async def test_workspaces_go_with_their_session_only_when_asked(tmp_path: Path) -> None:
    boss = scripted("boss", WRITE)
    with trio.fail_after(30):
        async with omnigent.open_runtime(home=tmp_path) as rt:
            agent = await rt.create_agent(boss)
            kept = await rt.create_session(agent.id)
            purged = await rt.create_session(agent.id)
            for session in (kept, purged):
                await run_turn(rt, session.id)
                assert (tmp_path / "workspaces" / session.id / "workspace" / "notes.txt").exists()
            await rt.delete_session(kept.id)
            await rt.delete_session(purged.id, purge_workspace=True)
        assert (tmp_path / "workspaces" / kept.id).exists()
        assert not (tmp_path / "workspaces" / purged.id).exists()
        async with omnigent.open_runtime(home=tmp_path, purge_workspaces=True) as rt:
            agent = await rt.create_agent(boss)
            session = await rt.create_session(agent.id)
            await run_turn(rt, session.id)
            await rt.delete_session(session.id)
        assert not (tmp_path / "workspaces" / session.id).exists()


async def test_sessions_delete_purge_on_the_command_line(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'o.db'}"
    home = tmp_path / "home"
    async with omnigent.open_runtime(db, home=home) as rt:
        agent = await rt.create_agent(scripted("boss", WRITE))
        session = await rt.create_session(agent.id)
        await run_turn(rt, session.id)
    env_home = {"OMNIGENT_HOME": str(home)}
    purge = ["--purge", "--db", db]
    with trio.fail_after(30):
        done = await trio.run_process(
            [sys.executable, "-m", "omnigent", "sessions", "delete", session.id, *purge],
            env={**os.environ, **env_home},
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    assert done.returncode == 0, done.stderr
    assert not (home / "workspaces" / session.id).exists()
    listed = await run_cli("sessions", "list", "--db", db)
    assert session.id not in listed.stdout.decode()
