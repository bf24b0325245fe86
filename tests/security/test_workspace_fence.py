"""One workspace fence for every door: a client's session works inside the server's
workspace, however it asks.

Found by the third attack probe (issue 23, defect 1): over ``GET /v1/ws``,
``session/new {"cwd": "/"}`` put the file tools anywhere — an authenticated user read
``/etc`` and the database and overwrote the operator's ``--agents`` and ``--policies``
files, with the shell denied — while the same directory in an HTTP spec was ``422``.
Now a directory a client names (the ``cwd`` of ``session/new``, ``session/load``,
``session/resume`` and ``session/fork``) must be
inside the server's workspace (the directory ``serve`` runs in) or a ``serve
--workspace-root DIR``, judged on its real path, and neither inside nor around
``$OMNIGENT_HOME``; over ``omnigent stdio`` the editor is the operator and is not
fenced.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
import trio

from omnigent.client import RpcError, open_acp_process, open_acp_websocket

from .serve_helpers import ALICE, IDENTITY, open_serve, scripted

READ_PASSWD = [{"call": "sys_os_read", "args": {"path": "/etc/passwd"}}]


async def test_a_websocket_client_names_no_directory_outside_the_workspace(
    tmp_path: Path,
) -> None:
    root = tmp_path / "projects"
    (root / "alice").mkdir(parents=True)
    (root / "escape").symlink_to("/")
    # The second root holds $OMNIGENT_HOME: that part of it stays out of reach.
    options = ("--auth", "header", "--workspace-root", str(root), "--workspace-root", str(tmp_path))
    with trio.fail_after(60):
        async with open_serve(tmp_path, *options) as served:
            async with served.as_user(ALICE) as alice:
                agent = await served.agent(scripted("default", READ_PASSWD), alice)
            refused = {
                "/": "outside the server's workspace",
                "/etc": "outside the server's workspace",
                str(tmp_path): "holds omnigent's own directory",
                str(served.home / "workspaces"): "holds omnigent's own directory",
                str(root / "escape"): "outside the server's workspace",
                str(root / "escape" / "etc"): "outside the server's workspace",
                str(root / ".." / "home"): "holds omnigent's own directory",
                str(root / ".." / ".." / "x"): "outside the server's workspace",
            }
            async with open_acp_websocket(served.url, headers={IDENTITY: ALICE}) as client:
                for cwd, why in refused.items():
                    with pytest.raises(RpcError) as caught:
                        await client.call("session/new", {"cwd": cwd, "mcpServers": []})
                    assert caught.value.code == -32602, (cwd, caught.value)
                    assert why in caught.value.message, (cwd, caught.value.message)
                made = await client.call(
                    "session/new", {"cwd": str(root / "alice"), "mcpServers": []}
                )
                session = made["sessionId"]
                # Every request that names a directory for a session meets the fence:
                # load, resume and fork too (a fork would be a new session working there).
                for method in ("session/load", "session/resume", "session/fork"):
                    for cwd in ("/", str(root / "escape"), str(served.home / "workspaces")):
                        params = {"sessionId": session, "cwd": cwd, "mcpServers": []}
                        with pytest.raises(RpcError) as caught:
                            await client.call(method, params)
                        assert caught.value.code == -32602, (method, cwd, caught.value)
            async with served.as_user(ALICE) as alice:
                sessions = await alice.get("/v1/sessions")
            assert [s["id"] for s in sessions.json()["data"]] == [session], agent


async def test_a_directory_swapped_for_a_link_is_refused_when_used(tmp_path: Path) -> None:
    import omnigent

    root = tmp_path / "projects"
    work = root / "alice"
    work.mkdir(parents=True)
    spec = scripted("reader", [{"call": "sys_os_read", "args": {"path": "passwd"}}])
    with trio.fail_after(30):
        async with omnigent.open_runtime(home=tmp_path / "home", workspace_roots=[root]) as rt:
            agent = await rt.create_agent(spec)
            session = await rt.create_session(agent.id, cwd=str(work))
            work.rmdir()
            work.symlink_to("/etc")
            async with rt.subscribe(session.id) as events:
                await rt.send_message(session.id, "go")
                outputs = []
                async for event in events:
                    if event.type == "response.output_item.done":
                        item = event.to_dict()["item"]
                        if item["type"] == "function_call_output":
                            outputs.append(item["output"])
                    if event.type == "session.status" and event.status in ("idle", "failed"):
                        break
    assert len(outputs) == 1 and outputs[0].startswith("Error: the working directory is refused")
    assert "root:" not in outputs[0]


async def test_the_editor_over_stdio_is_the_operator(tmp_path: Path) -> None:
    spec = tmp_path / "agent.yaml"
    spec.write_text(json.dumps(scripted("a", READ_PASSWD)))
    env = {**os.environ, "OMNIGENT_HOME": str(tmp_path / "home")}
    command = [sys.executable, "-m", "omnigent", "stdio", "--agent", str(spec)]
    with trio.fail_after(30):
        async with open_acp_process(command, env=env) as client:
            made = await client.call("session/new", {"cwd": "/", "mcpServers": []})
            assert made["sessionId"].startswith("conv_")
