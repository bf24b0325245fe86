"""Runners with several servers on one PostgreSQL database: a runner connected to any
server serves its sessions, whichever server a message reaches."""

from __future__ import annotations

import json
from pathlib import Path

import trio

from omnigent.client import OmnigentClient
from omnigent.model import OutputTextDelta

from ..cluster_helpers import message_body, open_serve_process
from ..reliability.serve_rig import Watch, terminal_count, write_agents
from .rig import TOKEN, open_runners
from .test_turns import scripted


async def test_a_message_posted_to_another_server_reaches_the_runner(
    pg_url: str, tmp_path: Path
) -> None:
    write_agents(
        tmp_path / "server",
        [scripted("remote", [{"call": "sys_os_shell", "args": {"command": "pwd"}}, {"say": "ok"}])],
    )
    agents = tmp_path / "server" / "agents"
    extra = ["--runner-token", TOKEN, "--lease-ttl", "3"]
    with trio.fail_after(90):
        async with (
            open_serve_process(pg_url, "a", tmp_path, agents=agents, extra=extra) as a,
            open_serve_process(pg_url, "b", tmp_path, agents=agents, extra=extra) as b,
            open_runners() as runners,
            OmnigentClient(b.url) as on_b,
        ):
            runner = await runners.start(tmp_path / "laptop", a.url, "laptop")
            # b knows the runner is connected (to a), once a has published its new link
            # in the store (a moment after the runner hears it is connected).
            while not (await b.client.get("/v1/runners/laptop/status")).json()["online"]:
                await trio.sleep(0.05)
            listed = (await b.client.get("/v1/runners")).json()["data"]
            assert [(r["runner_id"], r["online"]) for r in listed] == [("laptop", True)]
            # A second runner of that name, at b, is refused: a has it.
            twin = await runners.start(tmp_path / "twin", b.url, "laptop", wait=False)
            assert await twin.exit_code() == 1
            assert any("connected to server 'a'" in line for line in twin.lines), twin.lines
            # A session made at b, sent a message at b: its turn runs on a, with the runner.
            session = await on_b.create_session(agent_name="remote", runner_id="laptop")
            async with trio.open_nursery() as nursery:
                watch = Watch(on_b, session.id)
                await nursery.start(watch.run)
                posted = await b.post(f"/v1/sessions/{session.id}/events", message_body("go"))
                assert posted.status_code == 202, posted.text
                await watch.wait_for(lambda ev: terminal_count(ev) == 1, "the end of the turn")
                items = await on_b.list_items(session.id)
                nursery.cancel_scope.cancel()
            assert watch.events[-1].status == "idle"  # type: ignore[attr-defined]
            text = "".join(e.delta for e in watch.events if isinstance(e, OutputTextDelta))
            assert text == "ok"
            shell = json.loads(next(i for i in items if i.type == "function_call_output").output)  # type: ignore[union-attr]
            assert shell["stdout"].strip() == str(runner.workspace.resolve())
