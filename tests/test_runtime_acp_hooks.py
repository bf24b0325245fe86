"""Core calls the ACP transport needs: access levels, session working directories,
standing answers to approvals, and tools a connection provides."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
import trio

import omnigent
from omnigent.errors import InvalidInput, SessionNotFound
from omnigent.model import ElicitationRequest, OutputItemDone
from omnigent.testing import run_turn, scripted_agent

from .conftest import statuses, wait_quiet


async def test_access_level_reports_owner_grant_and_stranger(rt: omnigent.Runtime) -> None:
    agent = await rt.create_agent(scripted_agent(), owner="alice")
    session = await rt.create_session(agent.id, owner="alice")
    assert await rt.access_level(session.id, "alice") == 3
    assert await rt.access_level(session.id, "bob") == 0
    await rt.grant(session.id, "bob", 2)
    assert await rt.access_level(session.id, "bob") == 2
    with pytest.raises(SessionNotFound):
        await rt.access_level("conv_missing", "alice")


async def test_session_cwd_is_kept_listed_and_where_the_os_tools_act(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "notes.txt").write_text("from the project\n")
    db = f"sqlite:///{tmp_path / 'cwd.db'}"
    spec = scripted_agent("reader", [{"call": "sys_os_read", "args": {"path": "notes.txt"}}])
    async with omnigent.open_runtime(db) as rt:
        agent = await rt.create_agent(spec)
        inside = await rt.create_session(agent.id, cwd=str(project))
        elsewhere = await rt.create_session(agent.id, cwd="/somewhere/else")
        child = await rt.create_session(agent.id, parent_session_id=inside.id)
        assert (inside.cwd, child.cwd) == (str(project), str(project))
        events = await run_turn(rt, inside.id)
        outputs = [e.item for e in events if isinstance(e, OutputItemDone)]
        assert "from the project" in outputs[-1].output  # type: ignore[union-attr]
        page = await rt.list_sessions(cwd=str(project))
        assert {s.id for s in page.data} == {inside.id, child.id}
        assert [s.id for s in (await rt.list_sessions(cwd="/somewhere/else")).data] == [
            elsewhere.id
        ]
        snapshot = await rt.get_session(inside.id)
        assert snapshot.updated_at >= snapshot.created_at
        assert snapshot.updated_at > inside.updated_at  # the turn's events count
    async with omnigent.open_runtime(db) as rt:  # kept across a restart
        assert (await rt.get_session(inside.id)).cwd == str(project)
        # A directory that does not exist is never created: the tool says so.
        events = await run_turn(rt, elsewhere.id)
        output = [e.item for e in events if isinstance(e, OutputItemDone)][-1]
        assert output.output.startswith("Error:")  # type: ignore[union-attr]
    assert not await trio.Path("/somewhere/else").exists()


@pytest.mark.parametrize("cwd", ["relative/dir", "", 7, "/nul\x00byte", "/" + "x" * 5000])
async def test_a_bad_cwd_is_refused_at_cwd(rt: omnigent.Runtime, cwd: Any) -> None:
    agent = await rt.create_agent(scripted_agent())
    with pytest.raises(InvalidInput) as caught:
        await rt.create_session(agent.id, cwd=cwd)
    assert caught.value.details[0].loc == "cwd"
    assert (await rt.list_sessions()).data == ()


async def test_a_version_1_database_gains_cwd_and_updated_at(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    async with omnigent.open_runtime(f"sqlite:///{path}") as rt:
        agent = await rt.create_agent(scripted_agent())
        old = await rt.create_session(agent.id)
    with sqlite3.connect(path) as conn:  # back to how version 1 left it
        conn.execute("DROP INDEX sessions_runner")  # migration 8
        conn.execute("ALTER TABLE sessions DROP COLUMN runner_id")
        conn.execute("DROP TABLE session_usage")  # migration 7
        conn.execute("DROP TABLE subagent_work")  # migration 4
        conn.execute("ALTER TABLE sessions DROP COLUMN sub_agent")
        conn.execute("DROP INDEX sessions_cwd")
        conn.execute("ALTER TABLE sessions DROP COLUMN cwd")
        conn.execute("ALTER TABLE sessions DROP COLUMN updated_at")
        conn.execute("DROP TABLE harness_state")  # migration 3
        conn.execute("ALTER TABLE items DROP COLUMN taken_by")  # migration 6
        conn.execute("DROP INDEX items_pending")  # migration 5
        conn.execute("ALTER TABLE items DROP COLUMN pending")
        conn.execute("DROP TABLE running_tasks")
        conn.execute("DROP TABLE process_groups")
        conn.execute("PRAGMA user_version = 1")
    async with omnigent.open_runtime(f"sqlite:///{path}") as rt:
        snapshot = await rt.get_session(old.id)
        assert (snapshot.cwd, snapshot.updated_at) == (None, old.created_at)


def _asking_spec(name: str = "asker") -> dict[str, Any]:
    spec = scripted_agent(name, [{"call": "sys_os_read", "args": {"path": "missing.txt"}}])
    spec["policies"] = [{"name": "ask_read", "type": "ask_tools", "tools": ["sys_os_read"]}]
    return spec


async def _first_request(rt: omnigent.Runtime, session_id: str) -> ElicitationRequest:
    async with rt.subscribe(session_id, after=0) as events:
        async for event in events:
            if isinstance(event, ElicitationRequest):
                return event
    raise AssertionError("no elicitation")


async def test_a_standing_answer_answers_that_tool_without_asking(rt: omnigent.Runtime) -> None:
    agent = await rt.create_agent(_asking_spec())
    session = await rt.create_session(agent.id)
    other = await rt.create_session(agent.id)
    with trio.fail_after(5):
        await rt.send_message(session.id, "go")
        first = await _first_request(rt, session.id)
        # Answering "always" also answers the elicitation that is waiting.
        assert await rt.remember_answer(session.id, "sys_os_read", "accept") == 1
        await wait_quiet(rt)
        events = await run_turn(rt, session.id)  # the next turn asks nobody
    assert not any(isinstance(e, ElicitationRequest) for e in events)
    assert statuses(events) == ["running", "idle"]
    outputs = [e.item for e in events if isinstance(e, OutputItemDone)]
    assert "no such file" in outputs[-1].output  # type: ignore[union-attr]  # it ran
    assert first.params.tool_name == "sys_os_read"
    # Another session, or another phase, still asks.
    with trio.fail_after(5):
        await rt.send_message(other.id, "go")
        asked = await _first_request(rt, other.id)
        assert await rt.resolve_elicitation(other.id, asked.elicitation_id, "decline")
        await wait_quiet(rt)


async def test_a_standing_decline_denies_and_none_forgets(rt: omnigent.Runtime) -> None:
    agent = await rt.create_agent(_asking_spec())
    session = await rt.create_session(agent.id)
    assert await rt.remember_answer(session.id, "sys_os_read", "decline") == 0
    with trio.fail_after(5):
        events = await run_turn(rt, session.id)
    outputs = [e.item for e in events if isinstance(e, OutputItemDone)]
    assert outputs[-1].output.startswith("Error: denied by policy ask_read")  # type: ignore[union-attr]
    await rt.remember_answer(session.id, "sys_os_read", None)
    with trio.fail_after(5):
        await rt.send_message(session.id, "again")
        asked = await _first_request(rt, session.id)
        await rt.resolve_elicitation(session.id, asked.elicitation_id, "cancel")
        await wait_quiet(rt)


async def test_a_standing_answer_never_answers_a_question(rt: omnigent.Runtime) -> None:
    """Regression: "always allow" on AskUserQuestion accepted later ones unanswered."""
    agent = await rt.create_agent(_asking_spec())
    session = await rt.create_session(agent.id)
    params = omnigent.core.elicitation_params(
        "Which?",
        "ask_user_question",
        tool_name="AskUserQuestion",
        ask_user_question={"questions": [{"question": "Which?"}]},
    )
    await rt.remember_answer(session.id, "AskUserQuestion", "accept", phase="ask_user_question")
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery, rt.subscribe(session.id) as events:
            answers: list[omnigent.Resolution] = []

            async def ask() -> None:
                answers.append(await rt.elicit(session.id, params))

            nursery.start_soon(ask)
            asked = await _next_request(events)
            assert await rt.resolve_elicitation(
                session.id, asked.elicitation_id, "accept", {"Which?": "this"}
            )
    assert [(a.action, a.content) for a in answers] == [("accept", {"Which?": "this"})]


async def _next_request(events: Any) -> ElicitationRequest:
    async for event in events:
        if isinstance(event, ElicitationRequest):
            return event
    raise AssertionError("no elicitation")


async def test_remember_answer_refuses_bad_input(rt: omnigent.Runtime) -> None:
    agent = await rt.create_agent(_asking_spec())
    session = await rt.create_session(agent.id)
    with pytest.raises(InvalidInput):
        await rt.remember_answer(session.id, "sys_os_read", "cancel")
    with pytest.raises(InvalidInput):
        await rt.remember_answer(session.id, "", "accept")
    with pytest.raises(SessionNotFound):
        await rt.remember_answer("conv_missing", "sys_os_read", "accept")


async def test_a_provided_tool_runs_instead_of_the_builtin_while_open(
    rt: omnigent.Runtime,
) -> None:
    spec = scripted_agent("fs", [{"call": "sys_os_read", "args": {"path": "buffer.py"}}])
    agent = await rt.create_agent(spec)
    session = await rt.create_session(agent.id)
    calls: list[dict[str, Any]] = []

    async def editor_read(args: dict[str, Any]) -> str:
        calls.append(args)
        return '{"content": "unsaved text"}'

    async def broken(args: dict[str, Any]) -> str:
        raise ConnectionError("the editor went away")

    with trio.fail_after(5):
        async with rt.open_client_tools(session.id, {"sys_os_read": editor_read}):
            events = await run_turn(rt, session.id)
            assert [e.item for e in events if isinstance(e, OutputItemDone)][-1].output == (  # type: ignore[union-attr]
                '{"content": "unsaved text"}'
            )
            async with rt.open_client_tools(session.id, {"sys_os_read": broken}):
                events = await run_turn(rt, session.id)
                output = [e.item for e in events if isinstance(e, OutputItemDone)][-1]
                assert output.output == (  # type: ignore[union-attr]
                    "Error: sys_os_read failed in the client: the editor went away"
                )
            events = await run_turn(rt, session.id)  # the outer provider is back
            assert calls == [{"path": "buffer.py"}, {"path": "buffer.py"}]
        events = await run_turn(rt, session.id)  # and then the built-in
    output = [e.item for e in events if isinstance(e, OutputItemDone)][-1]
    assert "no such file" in output.output  # type: ignore[union-attr]
    assert len(calls) == 2


async def test_policies_still_decide_before_a_provided_tool(rt: omnigent.Runtime) -> None:
    spec = scripted_agent("fs", [{"call": "sys_os_read", "args": {"path": "x"}}])
    spec["policies"] = [{"name": "no_read", "type": "deny_tools", "tools": ["sys_os_read"]}]
    agent = await rt.create_agent(spec)
    session = await rt.create_session(agent.id)
    called = trio.Event()

    async def editor_read(args: dict[str, Any]) -> str:
        called.set()
        return "read"

    with trio.fail_after(5):
        async with rt.open_client_tools(session.id, {"sys_os_read": editor_read}):
            events = await run_turn(rt, session.id)
    output = [e.item for e in events if isinstance(e, OutputItemDone)][-1]
    assert output.output.startswith("Error: denied by policy no_read")  # type: ignore[union-attr]
    assert not called.is_set()
    with pytest.raises(SessionNotFound):
        async with rt.open_client_tools("conv_missing", {"sys_os_read": editor_read}):
            pass
