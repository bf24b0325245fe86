"""Regression tests for the runtime-side defects of issue 22 (the core's reshape).

Each test fails on the code before its fix: 3 (a cancelled send answered after a
restart), 5 (one actor building several tool sets), 6 (spec caches that grew with
client input).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

import omnigent
from omnigent.core import elicitation_params
from omnigent.testing import RecordingHarness, probe, scripted_agent

from .conftest import wait_quiet


async def test_a_send_cancelled_as_its_write_returns_is_not_answered_after_a_restart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Defect 3: the message was stored, then the send was cancelled before the actor
    had it; nothing answered it until the next start, which did."""
    db = f"sqlite:///{tmp_path / 'omnigent.db'}"
    recorder = RecordingHarness()
    with trio.fail_after(20):
        async with omnigent.open_runtime(db, harnesses={"rec": recorder.factory}) as rt:
            agent = await rt.create_agent(scripted_agent("rec", harness="rec"))
            session = (await rt.create_session(agent.id)).id
            store = probe(rt).store
            original = store.put_items
            scope = trio.CancelScope()

            async def write_then_cancel(session_id: str, items: Any, **options: Any) -> None:
                # What a write cancelled while it runs does: the row is written, and
                # the caller sees Cancelled as the call returns.
                await original(session_id, items, **options)
                scope.cancel()
                await trio.lowlevel.checkpoint()

            monkeypatch.setattr(store, "put_items", write_then_cancel)
            with scope:
                await rt.send_message(session, "never mind")
            monkeypatch.undo()
            assert scope.cancelled_caught
            assert await store.pending_items() == []
            assert (await rt.list_items(session)).data == ()
        assert recorder.requests == []
        async with omnigent.open_runtime(db, harnesses={"rec": recorder.factory}) as rt:
            await wait_quiet(rt)
            assert recorder.requests == []  # the next start answers nothing
            assert (await rt.list_items(session)).data == ()


async def test_concurrent_callers_share_one_tool_set(
    rt: omnigent.Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Defect 5: the actor checked, awaited, then assigned its tools, so three callers
    at once built three tool sets (and a stop terminated only the last one's shells)."""
    from omnigent.core.tools.session import SessionTools

    built: list[str] = []
    original = SessionTools.__init__

    def counting(self: SessionTools, **kwargs: Any) -> None:
        built.append(kwargs["session_id"])
        original(self, **kwargs)

    monkeypatch.setattr(SessionTools, "__init__", counting)
    agent = await rt.create_agent(scripted_agent(script=[{"say": "x"}]))
    session = (await rt.create_session(agent.id)).id
    # An elicitation the session holds keeps one actor alive, and builds no tools.
    await rt.hold_elicitation(session, elicitation_params("wait", "mcp_elicitation"))
    found: list[tuple[Any, ...]] = []

    async def list_tools() -> None:
        found.append(await rt.session_tools(session))

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            for _ in range(3):
                nursery.start_soon(list_tools)
    assert len(found) == 3 and found[0] == found[1] == found[2]
    assert built == [session]


async def test_the_spec_caches_are_bounded_by_recent_use(tmp_path: Path) -> None:
    """Defect 6: every agent version a client registered stayed parsed in memory, and
    so did one policy engine per version: both grew with client input, for ever."""
    from omnigent.core.runtime import MAX_CACHED_ENGINES, MAX_CACHED_SPECS, AgentSpecs
    from omnigent.core.tools import PolicyAllowlist, ToolPlace
    from omnigent.core.work import BlockingCalls
    from omnigent.harnesses.registry import HarnessRegistry
    from omnigent.stores import open_store

    assert MAX_CACHED_SPECS <= 4096 and MAX_CACHED_ENGINES <= 4096
    with trio.fail_after(20):
        async with open_store(None) as store:
            specs = AgentSpecs(
                store=store,
                harnesses=HarnessRegistry(),
                place=ToolPlace(workspace=tmp_path, home=tmp_path),
                threads=BlockingCalls(),
                default_policies=(),
                policy_allowlist=PolicyAllowlist(load_entry_points=False),
                max_specs=3,
                max_engines=2,
            )
            rows = [
                await store.put_agent_version(f"a{i}", scripted_agent(f"a{i}"), "local")
                for i in range(8)
            ]
            for row in rows:
                assert (await specs.agent_spec(row.id, row.version)).name == row.name
            assert specs.statistics()["specs"] == 3
            # An evicted version is read again from the store when it is needed.
            assert (await specs.agent_spec(rows[0].id, rows[0].version)).name == "a0"
            assert specs.statistics()["specs"] == 3
            sessions = []
            for i, row in enumerate(rows):
                session = await _session_row(store, row.id, row.version, f"conv_{i}")
                sessions.append(session)
                _, spec = await specs.session_spec(session.id)
                specs.policy_engine(session, spec)
            assert specs.statistics()["engines"] == 2
            # The most recently used engine is kept: the same one is served again.
            last, spec = await specs.session_spec(sessions[-1].id)
            assert specs.policy_engine(last, spec) is specs.policy_engine(last, spec)


async def _session_row(store: Any, agent_id: str, version: int, session_id: str) -> Any:
    from .test_store import session_row

    row = session_row(session_id, agent_id=agent_id, agent_version=version, owner="local")
    await store.insert_session(row, [])
    return row


async def test_standing_answers_are_bounded_and_refused_past_the_bound(
    rt: omnigent.Runtime,
) -> None:
    """Defect 6 (kin): every tool name a client gave a standing answer for stayed in
    memory, without bound; now one past the bound is refused, never dropped."""
    from omnigent.core.asking import MAX_STANDING_PER_SESSION
    from omnigent.errors import Conflict

    agent = await rt.create_agent(scripted_agent(script=[{"say": "x"}]))
    session = (await rt.create_session(agent.id)).id
    with trio.fail_after(10):
        for index in range(MAX_STANDING_PER_SESSION):
            await rt.remember_answer(session, f"tool_{index}", "accept")
        await rt.remember_answer(session, "tool_0", "decline")  # a change is no new entry
        with pytest.raises(Conflict):
            await rt.remember_answer(session, "one_more", "accept")
        await rt.remember_answer(session, "tool_1", None)  # withdrawn: room for one
        await rt.remember_answer(session, "one_more", "accept")
        other = (await rt.create_session(agent.id)).id
        await rt.remember_answer(other, "tool_0", "accept")  # the bound is per session
