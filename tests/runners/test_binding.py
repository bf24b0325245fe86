"""Binding a session to a runner, in process: the name is checked, children inherit it,
snapshots and both stores keep it, and the orchestration tools look each runner up once."""

from __future__ import annotations

import json
from typing import Any

import pytest
import trio

import omnigent
from omnigent.errors import InvalidInput
from omnigent.harnesses.base import Harness, HarnessEnv
from omnigent.model import FunctionCallOutputItem
from omnigent.testing import run_turn, scripted_agent


class Links:
    """A runner hub double: ``a`` is connected; counts the lookups of its links.

    Its sessions' turns never reach a runner: only the scripted orchestrator below runs,
    on the server (it is bound to none).
    """

    version = 0

    def __init__(self) -> None:
        self.lookups = 0

    def linked(self) -> dict[str, float]:
        self.lookups += 1
        return {"a": 1.0}

    async def wait_changed(self, since: int) -> None:
        await trio.sleep_forever()

    def drop(self, runner_id: str, reason: str) -> None:
        raise AssertionError("nothing is dropped with one server")

    def harness(self, runner_id: str, env: HarnessEnv, agent_id: str) -> Harness:
        raise AssertionError("no turn runs on a runner here")

    def workplace(
        self, runner_id: str, session_id: str, spec: Any, agent_id: str | None = None
    ) -> Any:
        raise AssertionError("no tool runs on a runner here")


async def test_sessions_bound_to_runners_and_their_rows(db_url: str) -> None:
    links = Links()
    lister = scripted_agent("lister", [{"call": "sys_session_list", "args": {}}])
    lister["spawn"] = True
    with trio.fail_after(30):
        async with omnigent.open_runtime(db_url, runners=links) as rt:  # type: ignore[arg-type]
            bot = await rt.create_agent(scripted_agent("bot", [{"say": "hi"}]))
            with pytest.raises(InvalidInput) as bad:
                await rt.create_session(bot.id, runner_id="no spaces")
            assert bad.value.details[0].loc == "runner_id"
            first = await rt.create_session(bot.id, runner_id="a")
            assert first.runner_id == "a"
            child = await rt.create_session(bot.id, parent_session_id=first.id)
            assert child.runner_id == "a"  # inherited
            second = await rt.create_session(bot.id, runner_id="b")
            assert (await rt.get_session(child.id)).runner_id == "a"
            counts = await rt.runner_session_counts()
            assert counts == {"a": 2, "b": 1}
            agent = await rt.create_agent(lister)
            orchestrator = await rt.create_session(agent.id)
            before = links.lookups
            await run_turn(rt, orchestrator.id, "list")
            # One lookup for the three rows' two runners (on PostgreSQL, of the store's
            # runner_links instead, which this server's links were copied to).
            assert links.lookups - before == (1 if db_url.startswith("sqlite") else 0)
            page = await rt.list_items(orchestrator.id)
            output = next(i for i in page.data if isinstance(i, FunctionCallOutputItem))
            rows = {r["session_id"]: r for r in json.loads(output.output)["sessions"]}
            # Whole rows, as the original's: the runner's name and whether it is connected.
            assert rows == {
                first.id: _row(first.id, "a", True),
                child.id: {**_row(child.id, "a", True), "parent_session_id": first.id},
                second.id: _row(second.id, "b", False),
                orchestrator.id: {
                    **_row(orchestrator.id, None, None),
                    "agent_name": "lister",
                    "status": "running",  # it was listing
                },
            }
            # sys_session_get_info of a session on a connected runner, and on one that
            # is not: the whole answer.
            info = await rt.create_agent(
                scripted_agent(
                    "informer",
                    [
                        {"call": "sys_session_get_info", "args": {"session_id": first.id}},
                        {"call": "sys_session_get_info", "args": {"session_id": second.id}},
                    ],
                )
            )
            informer = await rt.create_session(info.id)
            await run_turn(rt, informer.id, "look")
            outputs = [
                json.loads(i.output)
                for i in (await rt.list_items(informer.id)).data
                if isinstance(i, FunctionCallOutputItem)
            ]
            assert outputs == [
                await _info(rt, first.id, "a", True),
                await _info(rt, second.id, "b", False),
            ]


def _row(session_id: str, runner: str | None, online: bool | None) -> dict[str, Any]:
    """A ``sys_session_list`` row of a top-level ``bot`` session that has not run."""
    return {
        "session_id": session_id,
        "agent_name": "bot",
        "title": None,
        "status": "idle",
        "runner_id": runner,
        "runner_online": online,
        "parent_session_id": None,
    }


async def _info(rt: omnigent.Runtime, session_id: str, runner: str, online: bool) -> dict[str, Any]:
    """The whole ``sys_session_get_info`` answer for a ``bot`` session on ``runner``."""
    snapshot = await rt.get_session(session_id)
    return {
        "session_id": session_id,
        "status": "idle",
        "last_activity_at": snapshot.updated_at,
        "title": None,
        "agent_id": snapshot.agent_id,
        "agent_name": "bot",
        "runner_id": runner,
        "runner_online": online,
        "parent_session_id": None,
        "sub_agent_name": None,
        "model": None,
        "workspace": None,
        "pending_elicitations": [],
        "pending_elicitation_count": 0,
    }
