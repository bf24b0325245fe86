"""Many clients, one machine: the command line beside an ``omnigent serve`` that holds
the default store. The store's lock names the server and its address, and the server
leaves its own user a runner token beside it (``0600``): ``run`` runs its turn on that
server with its work here (a runner in the command), the record commands ask the server
(found in the lock, or ``--server URL``), ``approve``/``deny`` answer a session waiting
on it, ``tail`` follows one, and ``sessions delete`` goes through it. A server that left
no token (or one others could read) is named and refused, as before."""

from __future__ import annotations

import gc
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
import yaml

from omnigent.cli import main
from omnigent.client import open_acp_process
from omnigent.stores import LockHolder, local_runner_token, store_holder

from .acp_schema import AcpSchema
from .acp_stdio_raw import INITIALIZE, RawStdio, request
from .http_helpers import HTTPX_GENERATORS

pytestmark = HTTPX_GENERATORS

TIMEOUT = 60
WRITER = {
    "name": "writer",
    "executor": {
        "config": {
            "harness": "scripted",
            "script": [
                {"call": "sys_os_write", "args": {"path": "note.txt", "content": "hi"}},
                {"say": "wrote it"},
            ],
        }
    },
    "policies": [{"name": "ask_w", "type": "ask_tools", "tools": ["sys_os_write"]}],
}
HELLO = {
    "name": "hello",
    "executor": {"config": {"harness": "scripted", "script": [{"say": "hi"}]}},
}
SHELL = {
    "name": "shell-here",
    "executor": {
        "config": {
            "harness": "scripted",
            "script": [
                {"call": "sys_os_shell", "args": {"command": "pwd > where.txt"}},
                {"say": "wrote where.txt"},
            ],
        }
    },
}


class Server:
    def __init__(self, home: Path, process: subprocess.Popen[str], url: str) -> None:
        self.home = home
        self.process = process
        self.url = url
        self.http = httpx.Client(base_url=url, timeout=10)

    def session(self, agent: str) -> str:
        created = self.http.post("/v1/sessions", json={"agent_name": agent})
        sid: str = created.json()["id"]
        return sid

    def send(self, sid: str, text: str) -> None:
        body = {"type": "message", "data": {"content": [{"type": "input_text", "text": text}]}}
        assert self.http.post(f"/v1/sessions/{sid}/events", json=body).status_code == 202

    def wait_status(self, sid: str, *statuses: str) -> dict[str, Any]:
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            snapshot: dict[str, Any] = self.http.get(f"/v1/sessions/{sid}").json()
            if snapshot["status"] in statuses and not (
                "waiting" in statuses and not snapshot["pending_elicitations"]
            ):
                return snapshot
            time.sleep(0.05)
        raise AssertionError(f"{sid} never reached {statuses}")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    home = tmp_path_factory.mktemp("served-home")
    agents = home / "agents"
    agents.mkdir()
    for spec in (WRITER, HELLO):
        (agents / f"{spec['name']}.yaml").write_text(yaml.safe_dump(spec))
    env = {**os.environ, "OMNIGENT_HOME": str(home)}
    env.pop("OMNIGENT_DB", None)
    process = subprocess.Popen(
        [sys.executable, "-m", "omnigent", "serve", "--port", "0", "--agents", str(agents)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
        cwd=home,
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    assert line.startswith("omnigent serving on "), line
    served = Server(home, process, line.split(" on ", 1)[1].strip())
    try:
        yield served
    finally:
        served.http.close()
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=15)
        finally:
            if process.returncode is None:
                process.kill()
                process.wait()
            process.stdout.close()
        # A server that stopped takes its runner token with it.
        assert process.returncode == 0
        assert not (home / "omnigent.db.runner-token").exists()


@pytest.fixture(autouse=True)
def collected() -> Iterator[None]:
    """Finalize here what httpx leaves behind when an SSE read stops early (its
    connection pool's byte-stream generator, which only the garbage collector closes),
    so its warning is filtered in this test, not raised in whichever runs next."""
    yield
    gc.collect()


@pytest.fixture(autouse=True)
def home(server: Server, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every command here works on the default store, which the server holds."""
    monkeypatch.delenv("OMNIGENT_DB", raising=False)
    monkeypatch.setenv("OMNIGENT_HOME", str(server.home))
    return server.home


def test_the_lock_names_the_server_and_its_address(server: Server) -> None:
    holder = store_holder(f"sqlite:///{server.home / 'omnigent.db'}")
    assert holder == LockHolder(
        server.process.pid, os.uname().nodename, "omnigent serve", server.url
    )
    assert holder.describe() == (
        f"pid {server.process.pid} on {os.uname().nodename} (omnigent serve at {server.url})"
    )
    assert store_holder(f"sqlite:///{server.home / 'other.db'}") is None


def run_here(server: Server, project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "OMNIGENT_HOME": str(server.home)}
    env.pop("OMNIGENT_DB", None)
    env.pop("OMNIGENT_RUNNER_TOKEN", None)
    return subprocess.run(
        [sys.executable, "-m", "omnigent", *args],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )


def test_the_server_leaves_its_user_a_private_runner_token(server: Server) -> None:
    token_file = server.home / "omnigent.db.runner-token"
    assert token_file.stat().st_mode & 0o777 == 0o600
    token = local_runner_token(f"sqlite:///{server.home / 'omnigent.db'}")
    assert token is not None and len(token) >= 32
    assert token not in (server.home / "omnigent.db.lock").read_text()  # no secret there
    # Another machine's runner is still refused as by a server without --runner-token.
    refused = subprocess.run(
        [sys.executable, "-m", "omnigent", "runner", "--server", server.url, "--token", "guess"],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert refused.returncode == 1
    assert "this server accepts no runners: start it with --runner-token" in refused.stderr


def test_run_beside_the_server_runs_there_its_work_here(server: Server, tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    spec = project / "shell.yaml"
    spec.write_text(yaml.safe_dump(SHELL))
    done = run_here(server, project, "-v", "run", str(spec), "where are you?", "--yes")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "wrote where.txt\n"
    assert f"held by the server at {server.url}: the turn runs there" in done.stderr
    assert (project / "where.txt").read_text() == f"{project}\n"  # here, not in the server
    sid = done.stderr.rsplit("--session ", 1)[1].split(")")[0]
    snapshot = server.http.get(f"/v1/sessions/{sid}").json()
    assert snapshot["status"] == "idle"
    assert snapshot["runner_id"].startswith("run-")
    # The session is the server's: the record commands see it, live.
    listed = run_here(server, project, "sessions", "list", "--json")
    assert sid in [s["id"] for s in json.loads(listed.stdout)["data"]]
    # Continued from the same directory, on the same runner name.
    spec.write_text(yaml.safe_dump({**SHELL, "executor": HELLO["executor"]}))
    again = run_here(server, project, "run", str(spec), "again", "--session", sid)
    assert again.returncode == 0, again.stderr
    assert again.stdout == "hi\n"
    # A spec the server does not take from a client says why, and the way out.
    spec.write_text(yaml.safe_dump({**HELLO, "name": "tooled", "tools": {"python": ["m:f"]}}))
    refused = run_here(server, project, "run", str(spec), "x")
    assert refused.returncode == 2
    assert "not an allowed Python tool" in refused.stderr
    assert f"the server at {server.url} holds the store" in refused.stderr
    assert "--db FILE" in refused.stderr


def test_a_server_that_left_no_token_is_named_and_refused(
    server: Server, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / "hello.yaml"
    spec.write_text(yaml.safe_dump(HELLO))
    token_file = server.home / "omnigent.db.runner-token"
    token_file.chmod(0o644)  # readable by others: no secret, not used
    try:
        assert main(["run", str(spec), "hi"]) == 2
    finally:
        token_file.chmod(0o600)
    error = capsys.readouterr().err
    assert error.startswith(
        f"Error: the store sqlite:///{server.home / 'omnigent.db'} is held by the omnigent "
        f"server at {server.url} (pid {server.process.pid} on "
    ), error
    assert "--db FILE" in error
    # A store of its own: fine.
    assert main(["run", str(spec), "hi", "--db", f"sqlite:///{tmp_path / 'own.db'}"]) == 0


def test_records_are_read_through_the_server(
    server: Server, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sid = server.session("hello")
    server.send(sid, "hello there")
    server.wait_status(sid, "idle")
    assert main(["-v", "sessions", "list", "--json"]) == 0
    captured = capsys.readouterr()
    assert sid in [s["id"] for s in json.loads(captured.out)["data"]]
    assert f"held by the server at {server.url}: asking it" in captured.err
    assert main(["sessions", "show", sid]) == 0
    assert capsys.readouterr().out.splitlines()[1:] == ["user: hello there", "assistant: hi"]
    assert main(["agents", "show", "writer"]) == 0
    assert "ask_w" in capsys.readouterr().out
    # --server names it outright (here beside a store of another machine's, unused).
    other = f"sqlite:///{tmp_path / 'empty.db'}"
    assert main(["sessions", "show", sid, "--server", server.url, "--db", other]) == 0
    assert "assistant: hi" in capsys.readouterr().out
    assert main(["agents", "list", "--server", "http://127.0.0.1:9"]) == 1
    assert capsys.readouterr().err == "Error: no omnigent server answers at http://127.0.0.1:9\n"


def test_approve_and_deny_answer_a_waiting_session(
    server: Server, capsys: pytest.CaptureFixture[str]
) -> None:
    sid = server.session("writer")
    server.send(sid, "write")
    waiting = server.wait_status(sid, "waiting")
    [request] = waiting["pending_elicitations"]
    assert main(["sessions", "show", sid]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == (
        f"? ask_w: approve sys_os_write?  (omnigent approve {sid} "
        f"{request['elicitation_id']}, or deny)"
    )
    assert main(["approve", sid]) == 0
    assert capsys.readouterr().out == (
        f"approved {request['elicitation_id']}: ask_w: approve sys_os_write?\n"
    )
    server.wait_status(sid, "idle")
    items = server.http.get(f"/v1/sessions/{sid}/items").json()["data"]
    assert '"created": true' in items[2]["output"]
    assert main(["approve", sid]) == 2
    assert capsys.readouterr().err == f"Error: nothing is pending on session {sid}\n"
    server.send(sid, "again")
    asked = server.wait_status(sid, "waiting")["pending_elicitations"][0]["elicitation_id"]
    assert main(["deny", sid, asked]) == 0
    assert capsys.readouterr().out.startswith(f"declined {asked}: ")
    server.wait_status(sid, "idle")
    items = server.http.get(f"/v1/sessions/{sid}/items").json()["data"]
    assert items[-2]["output"].startswith("Error: denied by policy ask_w")


def test_approve_needs_a_server(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = f"sqlite:///{tmp_path / 'nobody.db'}"
    assert main(["approve", "conv_x", "--db", db]) == 2
    assert capsys.readouterr().err == (
        f"Error: no omnigent server holds the store {db}, and nothing runs its sessions: "
        "name a server with --server URL\n"
    )


def test_tail_follows_a_session_on_the_server(server: Server) -> None:
    sid = server.session("hello")
    env = {**os.environ, "OMNIGENT_HOME": str(server.home)}
    tail = subprocess.Popen(
        [sys.executable, "-m", "omnigent", "sessions", "tail", sid],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert tail.stdout is not None and tail.stderr is not None
    try:
        assert tail.stderr.readline() == (
            f"following {sid} on the server at {server.url} (Ctrl-C stops)\n"
        )
        server.send(sid, "hello")
        assert tail.stderr.readline() == "· running\n"
        assert tail.stdout.readline() == "hi\n"
        assert tail.stderr.readline() == "· idle\n"
    finally:
        tail.send_signal(signal.SIGINT)
        code = tail.wait(timeout=TIMEOUT)
        tail.stdout.close()
        tail.stderr.close()
    assert code == 130


def test_delete_goes_through_the_server(server: Server, capsys: pytest.CaptureFixture[str]) -> None:
    sid = server.session("hello")
    assert main(["sessions", "delete", sid]) == 0
    assert capsys.readouterr().out == (
        f"deleted {sid} (and its sub-sessions) from the server at {server.url}\n"
    )
    assert server.http.get(f"/v1/sessions/{sid}").status_code == 404


async def test_two_editors_and_a_terminal_share_sessions_live(
    server: Server, tmp_path: Path
) -> None:
    """Two ``omnigent stdio`` processes (two editors on one project) and an ``omnigent
    run`` beside the server: the editors relay to it, the work runs in the project (by
    the runners in their processes), and each sees the others' sessions and turns."""
    project = tmp_path / "project"
    project.mkdir()
    spec = project / "shell.yaml"
    spec.write_text(yaml.safe_dump(SHELL))
    env = {**os.environ, "OMNIGENT_HOME": str(server.home)}
    env.pop("OMNIGENT_DB", None)
    env.pop("OMNIGENT_RUNNER_TOKEN", None)
    command = [sys.executable, "-m", "omnigent", "stdio", "--agent", str(spec)]
    answers_seen_by_a: list[str] = []
    b_answered = trio.Event()

    def on_update(session_id: str, update: dict[str, Any]) -> None:
        if update.get("sessionUpdate") == "agent_message_chunk":
            answers_seen_by_a.append(update["content"]["text"])
            if len(answers_seen_by_a) == 2:  # its own turn's, then B's
                b_answered.set()

    with trio.fail_after(TIMEOUT):
        async with open_acp_process(command, cwd=str(project), env=env, on_update=on_update) as a:
            await a.initialize()
            sid = await a.new_session(str(project))
            done = await a.prompt(sid, "where are you?")
            assert done.stop_reason == "end_turn"
            assert done.text == "wrote where.txt"
            # The work ran here, by editor A's runner, not in the server's directory.
            assert (project / "where.txt").read_text() == f"{project}\n"
            snapshot = server.http.get(f"/v1/sessions/{sid}").json()
            assert snapshot["runner_id"].startswith("run-")
            assert snapshot["cwd"] == str(project)
            async with open_acp_process(command, cwd=str(project), env=env) as b:
                await b.initialize()
                listed = await b.list_sessions(str(project))
                assert sid in [s["sessionId"] for s in listed["sessions"]]
                replayed = await b.load_session(sid, str(project))
                assert any(u.get("sessionUpdate") == "agent_message_chunk" for u in replayed)
                # B prompts A's session: A sees the turn live.
                (project / "where.txt").unlink()
                await b.prompt(sid, "again from b")
                await b_answered.wait()
                assert answers_seen_by_a == ["wrote where.txt", "wrote where.txt"]
                assert (project / "where.txt").exists()
                # The terminal, meanwhile: the session's history through the server,
                # and a turn of its own in the same directory (a third runner name).
                shown = await trio.run_process(
                    [sys.executable, "-m", "omnigent", "sessions", "show", sid],
                    env=env,
                    capture_stdout=True,
                    capture_stderr=True,
                )
                assert "user: again from b" in shown.stdout.decode()
                ran = await trio.run_process(
                    [sys.executable, "-m", "omnigent", "run", str(spec), "hi", "--yes"],
                    cwd=project,
                    env=env,
                    capture_stdout=True,
                    capture_stderr=True,
                    check=False,
                )
                assert ran.returncode == 0, ran.stderr.decode()
                assert ran.stdout.decode() == "wrote where.txt\n"
            runners = server.http.get("/v1/runners").json()["data"]
            online = sorted(r["runner_id"] for r in runners if r["online"])
            assert online == [snapshot["runner_id"]]  # B and the run said goodbye
        runners = server.http.get("/v1/runners").json()["data"]
        assert not [r for r in runners if r["online"]]  # and so did A, on closing stdin


async def test_the_relay_ends_as_stdio_does(server: Server, tmp_path: Path) -> None:
    """stdin closes with a prompt in flight: the prompt answers ``cancelled`` (its turn
    ends so on the server), every message relayed is valid ACP, and the process exits 0."""
    project = tmp_path / "project"
    project.mkdir()
    spec = project / "slow.yaml"
    slow = {"name": "slow-relay", "executor": {"config": {"harness": "scripted"}}}
    slow["executor"]["config"]["script"] = [{"say": "waiting"}, {"sleep": 600}]  # type: ignore[index]
    spec.write_text(yaml.safe_dump(slow))
    env = {**os.environ, "OMNIGENT_HOME": str(server.home)}
    env.pop("OMNIGENT_DB", None)
    with trio.fail_after(TIMEOUT), (tmp_path / "stderr.log").open("wb") as errors:
        process = await trio.lowlevel.open_process(
            [sys.executable, "-m", "omnigent", "stdio", "--agent", str(spec)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=errors,
            env=env,
            cwd=project,
        )
        try:
            editor = RawStdio(process, AcpSchema())
            await editor.send(
                INITIALIZE, request(1, "session/new", {"cwd": str(project), "mcpServers": []})
            )
            sid = (await editor.answer(1))["result"]["sessionId"]
            await editor.send(
                request(
                    2,
                    "session/prompt",
                    {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]},
                )
            )
            while True:
                update = await editor.until("session/update")
                if update["params"]["update"].get("sessionUpdate") == "agent_message_chunk":
                    break
            await editor.close_stdin()
            assert (await editor.answer(2))["result"]["stopReason"] == "cancelled"
            await editor.read_to_end()
            assert await editor.wait() == 0
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
    assert server.http.get(f"/v1/sessions/{sid}").json()["status"] == "cancelled"


def test_chat_beside_the_server_talks_there(server: Server, tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    spec = project / "hello.yaml"
    spec.write_text(yaml.safe_dump({**HELLO, "name": "hello-chat"}))
    env = {**os.environ, "OMNIGENT_HOME": str(server.home)}
    env.pop("OMNIGENT_DB", None)
    env.pop("OMNIGENT_RUNNER_TOKEN", None)
    done = subprocess.run(
        [sys.executable, "-m", "omnigent", "chat", str(spec)],
        input="one\ntwo\n",
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "hi\nhi\n"
    sid = done.stderr.rsplit("--session ", 1)[1].split(")")[0]
    items = server.http.get(f"/v1/sessions/{sid}/items").json()["data"]
    said = [(i["role"], i["content"][0]["text"]) for i in items if i["type"] == "message"]
    assert said == [("user", "one"), ("assistant", "hi"), ("user", "two"), ("assistant", "hi")]
    assert server.http.get(f"/v1/sessions/{sid}").json()["runner_id"].startswith("run-")
