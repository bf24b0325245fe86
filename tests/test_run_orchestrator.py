"""Orchestrators from the terminal: ``omnigent run`` waits until the session is settled
(no running child, no pending wake-up, no background task), shows each child's progress
on a line of its own, and ends with the orchestrator's final answer; ``sessions list``
shows top-level sessions unless ``--all`` or ``--tree``.

Before: ``run`` ended as soon as the first turn did, cancelling the children and
recording the orchestrator ``cancelled``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import trio
import yaml

import omnigent
from omnigent.cli import main
from omnigent.cli._render import ChildProgress
from omnigent.model import ChildSessionSummary

from .http_helpers import open_server

REPO = Path(__file__).resolve().parent.parent
ORCHESTRATOR = REPO / "examples" / "orchestrator-scripted.yaml"
TIMEOUT = 60


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("OMNIGENT_DB", raising=False)
    monkeypatch.setenv("OMNIGENT_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def test_run_waits_for_the_children_and_ends_with_the_final_answer(tmp_path: Path) -> None:
    env = {**os.environ, "OMNIGENT_HOME": str(tmp_path / "home")}
    done = subprocess.run(
        [sys.executable, "-m", "omnigent", "run", str(ORCHESTRATOR), "go"],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout.splitlines()
    assert out[0] == "Dispatched three tasks; their answers will arrive in my inbox."
    assert out[-1] == "A result came in (it is in my history, just above)."
    # Not a terminal: a line each time a child's state changes.
    for line in (
        "  counter:apples  completed  There are 3.",
        "  counter:pears  completed  There are 3.",
        "  slow:report  completed  The report is done.",
    ):
        assert line in done.stderr.splitlines(), done.stderr
    assert "\x1b[" not in done.stderr
    listed = subprocess.run(
        [sys.executable, "-m", "omnigent", "sessions", "list", "--all", "--json"],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env=env,
        check=True,
    )
    statuses = {s["title"]: s["status"] for s in json.loads(listed.stdout)["data"]}
    assert statuses == {
        "go": "idle",
        "counter:apples": "idle",
        "counter:pears": "idle",
        "slow:report": "idle",
    }


def test_sessions_list_shows_top_level_sessions_unless_all_or_tree(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["run", str(ORCHESTRATOR), "go"]) == 0
    capsys.readouterr()
    assert main(["sessions", "list"]) == 0
    [line] = capsys.readouterr().out.splitlines()
    assert "  orchestrator-scripted  idle  go  " in line
    assert main(["sessions", "list", "--all"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 4
    assert main(["sessions", "list", "--tree"]) == 0
    tree = capsys.readouterr().out.splitlines()
    assert tree[0].startswith("conv_") and " orchestrator-scripted " in tree[0]
    assert sorted(line.split()[4] for line in tree[1:]) == [
        "counter:apples",
        "counter:pears",
        "slow:report",
    ]
    assert all(line.startswith("└ conv_") for line in tree[1:])
    assert main(["sessions", "list", "--tree", "--all"]) == 2


def test_ctrl_c_while_children_work_stops_them_all(tmp_path: Path) -> None:
    spec = yaml.safe_load(ORCHESTRATOR.read_text())
    spec["sub_agents"][1]["executor"]["config"]["script"][0] = {"sleep": 60}
    path = tmp_path / "orchestrator.yaml"
    path.write_text(yaml.safe_dump(spec))
    env = {**os.environ, "OMNIGENT_HOME": str(tmp_path / "home")}
    with subprocess.Popen(
        [sys.executable, "-m", "omnigent", "run", str(path), "go"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    ) as process:
        assert process.stdout is not None and process.stderr is not None
        # The first turn has ended once its text is out; the slow child still works.
        assert process.stdout.readline().startswith("Dispatched three tasks")
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=TIMEOUT) == 130
        assert "Interrupted." in process.stderr.read()
    listed = subprocess.run(
        [sys.executable, "-m", "omnigent", "sessions", "list", "--all", "--json"],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env=env,
        check=True,
    )
    statuses = {s["title"]: s["status"] for s in json.loads(listed.stdout)["data"]}
    assert statuses["slow:report"] == "cancelled"
    assert all(status in ("idle", "cancelled") for status in statuses.values())


SLEEP = {"command": "sleep 0.3"}


async def test_wait_settled_waits_for_children_and_background_tasks() -> None:
    background = {
        "name": "bg",
        "async_enabled": True,
        "executor": {
            "config": {
                "harness": "scripted",
                "turns": [
                    [
                        {
                            "call": "sys_call_async",
                            "args": {"tool": "sys_os_shell", "args": {"command": "sleep 0.3"}},
                        }
                    ],
                    [{"say": "the task is done"}],
                ],
            }
        },
    }
    with trio.fail_after(30):
        async with omnigent.open_runtime() as rt:
            orchestrator = await rt.create_agent(omnigent.AgentSpec.load(ORCHESTRATOR))
            session = await rt.create_session(orchestrator.id)
            await rt.wait_settled(session.id)  # nothing to do yet: at once
            async with rt.open_turn_stream(session.id, "go") as (_, events):
                async for _event in events:
                    pass
            await rt.wait_settled(session.id)
            assert rt.statistics()["sub_agent_work"] == 0
            children = (await rt.list_sessions(parent_session_id=session.id)).data
            assert sorted(c.status for c in children) == ["idle"] * 3
            items = await rt.list_items(session.id)
            assert items.data[-1].content[0].text.startswith("A result came in")  # type: ignore[union-attr]
            agent = await rt.create_agent(background)
            session = await rt.create_session(agent.id)
            async with rt.open_turn_stream(session.id, "go") as (_, events):
                async for _event in events:
                    pass
            await rt.wait_settled(session.id)
            last = (await rt.list_items(session.id, order="desc", limit=1)).data[0]
            assert last.content[0].text == "the task is done"  # type: ignore[union-attr]
            with pytest.raises(omnigent.SessionNotFound):
                await rt.wait_settled("conv_missing")


async def test_top_level_over_http_and_the_client() -> None:
    with trio.fail_after(30):
        async with open_server() as server:
            orchestrator = await server.runtime.create_agent(omnigent.AgentSpec.load(ORCHESTRATOR))
            session = await server.runtime.create_session(orchestrator.id)
            async with server.runtime.open_turn_stream(session.id, "go") as (_, events):
                async for _event in events:
                    pass
            await server.runtime.wait_settled(session.id)
            top = (await server.client.get("/v1/sessions?top_level=true")).json()["data"]
            assert [s["id"] for s in top] == [session.id]
            every = (await server.client.get("/v1/sessions")).json()["data"]
            assert len(every) == 4
            bad = await server.client.get("/v1/sessions?top_level=maybe")
            assert bad.status_code == 422
            from omnigent.client import OmnigentClient

            async with OmnigentClient(server.url) as client:
                sessions, _ = await client.list_sessions(top_level=True)
                assert [s.id for s in sessions] == [session.id]


def child(id_: str, status: str | None, preview: str | None = None) -> ChildSessionSummary:
    return ChildSessionSummary(
        id=id_,
        title=f"counter:{id_}",
        agent="counter",
        session_name=id_,
        status="idle",
        busy=False,
        current_task_status=status,
        preview=preview,
    )


def test_child_progress_redraws_in_place_on_a_terminal() -> None:
    live = ChildProgress(live=True)
    text = lambda chunks: "".join(c.text for c in chunks)  # noqa: E731
    assert text(live.update(child("a", None))) == "\x1b[2K  counter:a  starting\n"
    assert text(live.update(child("a", None))) == ""  # nothing changed
    assert text(live.update(child("b", "in_progress"))) == (
        "\x1b[1F\x1b[2K  counter:a  starting\n\x1b[2K  counter:b  in_progress\n"
    )
    assert text(live.update(child("a", "completed", "There are 3."))) == (
        "\x1b[2F\x1b[2K  counter:a  completed  There are 3.\n\x1b[2K  counter:b  in_progress\n"
    )
    live.leave()  # something was printed below: the block is drawn afresh
    assert text(live.update(child("b", "completed"))).startswith("\x1b[2K  counter:a")
    plain = ChildProgress(live=False)
    assert text(plain.update(child("a", "in_progress"))) == "  counter:a  in_progress\n"
    assert text(plain.update(child("a", "in_progress", "half way"))) == ""  # same state
    assert text(plain.update(child("a", "completed", "done"))) == "  counter:a  completed  done\n"
