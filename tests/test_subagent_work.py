"""Sub-agent work: exactly-once delivery, final answers, cancellation, stop and delete."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio

import omnigent
from omnigent.core.work import Dispatch, SubAgents, TurnOutcome
from omnigent.model import ChildSessionUpdated, TurnStatus
from omnigent.stores import WorkRow
from omnigent.testing import probe

from .conftest import all_tasks, wait_quiet
from .subagent_helpers import Driver, call, handle, inbox_lines, lead, wait_lines, worker
from .test_background import pid_gone, wait_gone
from .test_subagents import children, start, trio_turn


async def test_a_fan_out_of_twenty_is_delivered_exactly_once(rt: omnigent.Runtime) -> None:
    driver = Driver()
    spec = lead([worker("w", [{"sleep": 0.01}, {"say": "done"}])])
    parent = await start(rt, spec, driver)
    steps: list[Any] = []
    for n in range(20):
        steps += ["sys_session_send", {"agent": "w", "title": f"part-{n}", "args": f"part {n}"}]
    driver.then(call(driver, *steps))
    await trio_turn(rt, parent)
    tasks = {handle(o)["task_id"] for o in driver.outputs}
    assert len(tasks) == 20
    lines = await wait_lines(rt, parent, 20)
    await wait_quiet(rt)
    lines = await inbox_lines(rt, parent)
    assert sorted(t for t, _, _ in lines) == sorted(tasks)
    assert {(s, r.split(" returned: ")[1]) for _, s, r in lines} == {("completed", "done")}
    rows = await probe(rt).store.list_work(parent_session_id=parent, open_only=False)
    assert len(rows) == 20 and {r.status for r in rows} == {"completed"}
    assert await probe(rt).store.inbox_count(parent) == 0
    assert rt.statistics()["sub_agent_work"] == 0


async def test_a_continuation_turn_delivers_only_after_the_last_turn(rt: omnigent.Runtime) -> None:
    driver = Driver()
    turns = [[{"sleep": 0.3}, {"say": "first turn"}], [{"say": "the final answer"}]]
    parent = await start(rt, lead([worker("w", turns=turns)]), driver)
    driver.then(call(driver, "sys_session_send", {"agent": "w", "title": "t", "args": "go"}))
    await trio_turn(rt, parent)
    child = handle(driver.outputs[0])["task_id"]
    with trio.fail_after(5):
        while not (await rt.get_session(child)).busy:
            await trio.sleep(0.01)
    # Someone else messages the child mid-turn: it runs a continuation turn.
    assert (await rt.send_message(child, "one more thing")).status == "buffered"
    lines = await wait_lines(rt, parent, 1)
    await wait_quiet(rt)
    assert await inbox_lines(rt, parent) == lines
    assert lines == [(child, "completed", "w:t returned: the final answer")]
    assert (await probe(rt).store.list_work(child_session_id=child, open_only=False))[0].status == (
        "completed"
    )


@pytest.mark.parametrize(
    ("script", "status", "rest"),
    [
        ([{"say": "   "}], "completed", "w:t produced no output"),
        ([], "completed", "w:t produced no output"),
        ([{"fail": "disk full"}], "failed", "w:t error: disk full"),
    ],
)
async def test_outcomes_render_as_inbox_lines(
    rt: omnigent.Runtime, script: list[Any], status: str, rest: str
) -> None:
    driver = Driver()
    parent = await start(rt, lead([worker("w", script)]), driver)
    driver.then(call(driver, "sys_session_send", {"agent": "w", "title": "t", "args": "go"}))
    await trio_turn(rt, parent)
    child = handle(driver.outputs[0])["task_id"]
    assert await wait_lines(rt, parent, 1) == [(child, status, rest)]
    # As its parent sees it: idle → completed, failed → failed.
    summary = await rt.child_summary(child)
    session_status = {"completed": "idle", "failed": "failed"}[status]
    assert (summary.status, summary.current_task_status) == (session_status, status)


async def test_the_final_answer_comes_after_the_childs_own_background_work(
    rt: omnigent.Runtime, tmp_path: Path
) -> None:
    child_spec = worker(
        "w",
        turns=[
            [
                {
                    "call": "sys_call_async",
                    "args": {"tool": "sys_os_shell", "args": {"command": "sleep 0.2"}},
                },
                {"say": "started it"},
            ],
            [{"say": "all finished"}],
        ],
    )
    child_spec["async_enabled"] = True
    child_spec["os_env"] = {"cwd": str(tmp_path)}
    driver = Driver()
    parent = await start(rt, lead([child_spec]), driver)
    driver.then(call(driver, "sys_session_send", {"agent": "w", "title": "t", "args": "go"}))
    await trio_turn(rt, parent)
    child = handle(driver.outputs[0])["task_id"]
    assert await wait_lines(rt, parent, 1) == [(child, "completed", "w:t returned: all finished")]


async def slow_child(rt: omnigent.Runtime, driver: Driver, **extra: Any) -> tuple[str, str]:
    parent = await start(rt, lead([worker("w", [{"sleep": 60}, {"say": "late"}])], **extra), driver)
    driver.then(call(driver, "sys_session_send", {"agent": "w", "title": "t", "args": "go"}))
    await trio_turn(rt, parent)
    child = handle(driver.outputs[0])["task_id"]
    with trio.fail_after(5):
        while not (await rt.get_session(child)).busy:
            await trio.sleep(0.01)
    return parent, child


async def test_cancel_task_stops_the_child_and_delivers_one_cancelled_item(
    rt: omnigent.Runtime,
) -> None:
    driver = Driver()
    parent, child = await slow_child(rt, driver)
    driver.then(call(driver, "sys_cancel_task", {"task_id": child}))
    driver.then(None)  # the wake-up turn
    await trio_turn(rt, parent)
    # Answered at once: the child was asked to stop; its inbox line says when it did.
    assert json.loads(driver.outputs[1]) == {
        "cancel_requested": True,
        "cancel_confirmed": False,
        "task_id": child,
        "status": "running",
        "message": (
            "Cancel requested; cancellation has not been confirmed yet. Use sys_read_inbox "
            "to observe terminal status."
        ),
    }
    lines = await wait_lines(rt, parent, 1)
    assert lines == [(child, "cancelled", "w:t")]
    assert (await rt.get_session(child)).status == "cancelled"
    await wait_quiet(rt)
    # Cancelling again answers from the record; nothing is delivered twice.
    driver.then(
        call(driver, "sys_cancel_task", {"task_id": child}, "sys_cancel_task", {"task_id": "nope"})
    )
    await trio_turn(rt, parent)
    assert json.loads(driver.outputs[2]) == {
        "cancelled": True,
        "task_id": child,
        "status": "cancelled",
    }
    assert json.loads(driver.outputs[3]) == {
        "error": "task_not_found",
        "task_id": "nope",
        "hint": (
            "sys_cancel_task stops a task of this session: a sub-agent task "
            "(sys_session_send's task_id) or a background task (sys_call_async's handle_id)."
        ),
    }
    await wait_quiet(rt)
    assert await inbox_lines(rt, parent) == lines
    assert rt.statistics() == {
        "active_sessions": 0,
        "tasks": 0,
        "subscribers": 0,
        "elicitations": 0,
        "sub_agent_work": 0,
    }


async def test_cancel_after_completion_reports_the_completion(rt: omnigent.Runtime) -> None:
    driver = Driver()
    parent = await start(rt, lead([worker("w", [{"say": "done"}])]), driver)
    driver.then(call(driver, "sys_session_send", {"agent": "w", "title": "t", "args": "go"}))
    await trio_turn(rt, parent)
    child = handle(driver.outputs[0])["task_id"]
    await wait_lines(rt, parent, 1)
    driver.then(call(driver, "sys_cancel_task", {"task_id": child}))
    await trio_turn(rt, parent)
    assert json.loads(driver.outputs[1]) == {
        "cancelled": False,
        "task_id": child,
        "status": "completed",
    }


async def test_a_late_completion_after_a_cancel_is_dropped() -> None:
    row = WorkRow("subagent_1", "conv_p", "conv_c", "w", "t", "item_1", "running", None, 0.0)
    dispatch = Dispatch(row)
    dispatch.taken = True
    dispatch.settle("cancelled", "")
    dispatch.settle("completed", "too late")
    assert dispatch.result == ("cancelled", "")


async def test_an_old_dispatchs_cleanup_never_removes_a_newer_one(rt: omnigent.Runtime) -> None:
    subagents = SubAgents(probe(rt).store, probe(rt).bus)
    old = Dispatch(WorkRow("subagent_old", "p", "c", "w", "t", "item_o", "launching", None, 0.0))
    new = Dispatch(WorkRow("subagent_new", "p", "c", "w", "t", "item_n", "launching", None, 1.0))
    subagents.watch(old)
    subagents.forget(old)
    subagents.watch(new)
    subagents.forget(old)  # a late cleanup of the old dispatch
    assert subagents.open_for("c") is new
    subagents.messages_taken(["item_o"], "resp_1")
    assert not new.taken
    subagents.messages_taken(["item_n"], "resp_2")
    subagents.session_settled("c", TurnOutcome(TurnStatus.COMPLETED, None, "answer"))
    assert new.result == ("completed", "answer")


async def test_the_store_finishes_a_dispatch_once(rt: omnigent.Runtime) -> None:
    agent = await rt.create_agent(worker("w"))
    parent = (await rt.create_session(agent.id)).id
    child = (await rt.create_session(agent.id, parent_session_id=parent)).id
    row = WorkRow("subagent_x", parent, child, "w", "t", "item_x", "launching", None, 0.0)
    store = probe(rt).store
    await store.insert_work(row)
    assert await store.start_work("subagent_x") is True
    assert await store.start_work("subagent_x") is False
    assert await store.finish_work("subagent_x", "completed", "a", "inbox_1", "{}") == 1
    assert await store.finish_work("subagent_x", "cancelled", "", "inbox_2", "{}") is None
    assert [r.status for r in await store.list_work(open_only=False)] == ["completed"]
    assert await store.list_work() == []
    assert await store.inbox_count(parent) == 1


async def test_stopping_a_parent_while_five_children_run_leaves_no_task_and_no_process(
    rt: omnigent.Runtime, tmp_path: Path
) -> None:
    before = all_tasks()
    shell = "echo $$ > pids/$$.pid; exec sleep 1000"
    child_spec = worker("w", [{"call": "sys_os_shell", "args": {"command": shell, "timeout": 600}}])
    child_spec["os_env"] = {"cwd": str(tmp_path)}
    (tmp_path / "pids").mkdir()
    driver = Driver()
    parent = await start(rt, lead([child_spec]), driver)
    steps: list[Any] = []
    for n in range(5):
        steps += ["sys_session_send", {"agent": "w", "title": f"t{n}", "args": "go"}]
    driver.then(call(driver, *steps))
    await trio_turn(rt, parent)
    with trio.fail_after(10):
        while len(list((tmp_path / "pids").iterdir())) < 5:
            await trio.sleep(0.02)
    pids = [int(p.read_text()) for p in (tmp_path / "pids").iterdir()]
    assert not any(pid_gone(p) for p in pids)
    await rt.stop_session(parent)
    await wait_gone(*pids)
    await wait_quiet(rt)
    assert all_tasks() <= before  # none new (the runtime's cgroup probe may have ended)
    assert rt.statistics()["sub_agent_work"] == 0
    kids = await children(rt, parent)
    assert {k.status for k in kids} == {"cancelled"}
    rows = await probe(rt).store.list_work(parent_session_id=parent, open_only=False)
    assert {r.status for r in rows} == {"cancelled"} and len(rows) == 5
    # Delivered, but the stopped parent is not woken by them.
    assert await probe(rt).store.inbox_count(parent) == 5
    assert (await rt.get_session(parent)).status == "idle"


async def test_deleting_a_parent_cancels_its_childrens_work(rt: omnigent.Runtime) -> None:
    driver = Driver()
    parent, child = await slow_child(rt, driver)
    await rt.delete_session(parent)
    await wait_quiet(rt)
    with pytest.raises(omnigent.SessionNotFound):
        await rt.get_session(child)
    assert await probe(rt).store.list_work(open_only=False) == []
    assert rt.statistics()["sub_agent_work"] == 0


async def test_cancelling_a_middle_child_stops_the_grandchild(rt: omnigent.Runtime) -> None:
    grandchild = worker("leaf", [{"sleep": 60}])
    middle = {
        **worker(
            "mid",
            turns=[
                [
                    {
                        "call": "sys_session_send",
                        "args": {"agent": "leaf", "title": "x", "args": "go"},
                    }
                ],
                [{"say": "leaf came back"}],
            ],
        ),
        "sub_agents": [grandchild],
        "tools": {"agents": ["leaf"]},
    }
    driver = Driver()
    parent = await start(rt, lead([middle]), driver)
    driver.then(call(driver, "sys_session_send", {"agent": "mid", "title": "m", "args": "go"}))
    await trio_turn(rt, parent)
    mid = handle(driver.outputs[0])["task_id"]
    with trio.fail_after(5):
        while not (leaves := await children(rt, mid)) or not leaves[0].busy:
            await trio.sleep(0.01)
    leaf = leaves[0]
    assert leaf.title == "leaf:x" and leaf.agent_name == "leaf"
    driver.then(call(driver, "sys_cancel_task", {"task_id": mid}))
    await trio_turn(rt, parent)
    assert json.loads(driver.outputs[1])["cancel_requested"] is True
    await wait_quiet(rt)
    assert (await rt.get_session(leaf.id)).status == "cancelled"
    mid_rows = await probe(rt).store.list_work(parent_session_id=mid, open_only=False)
    assert [r.status for r in mid_rows] == ["cancelled"]


def policy_on_results(event: dict[str, Any]) -> dict[str, Any]:
    """A function policy: judges delayed sub-agent results by what they say."""
    data = event["data"]
    if event["type"] == "tool_result" and data["name"] == "sys_session_send":
        if "secret" in data["result"]:
            return {"result": "DENY", "reason": "it leaks a secret"}
        if "rewrite" in data["result"]:
            return {"result": "ALLOW", "data": "rewritten by policy"}
    return {"result": "ALLOW"}


@pytest.mark.parametrize(
    ("answer", "shown"),
    [
        ("the secret is 42", "w:t returned: [Result suppressed by policy: it leaks a secret]"),
        ("please rewrite me", "w:t returned: rewritten by policy"),
        ("plain", "w:t returned: plain"),
    ],
)
async def test_delayed_results_pass_the_parents_result_policies(answer: str, shown: str) -> None:
    policy = {"name": "vet", "type": "function", "function": f"{__name__}:policy_on_results"}
    driver = Driver()
    async with omnigent.open_runtime(policy_modules=[__name__]) as rt:
        spec = lead([worker("w", [{"say": answer}])], policies=[policy])
        parent = await start(rt, spec, driver)
        driver.then(call(driver, "sys_session_send", {"agent": "w", "title": "t", "args": "go"}))
        await trio_turn(rt, parent)
        child = handle(driver.outputs[0])["task_id"]
        assert await wait_lines(rt, parent, 1) == [(child, "completed", shown)]
    # The handle itself passed the same policies untouched.
    assert handle(driver.outputs[0])["status"] == "launching"


async def test_a_failing_policy_hides_the_result_and_keeps_it_for_the_next_read(
    rt: omnigent.Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    from omnigent.core.tools import _policies

    broken = {"on": True}
    original = _policies.PolicyEngine.evaluate

    async def flaky(self: Any, event: Any) -> Any:
        if broken["on"] and event.tool_name == "sys_session_send":
            raise RuntimeError("policy service unavailable")
        return await original(self, event)

    monkeypatch.setattr(_policies.PolicyEngine, "evaluate", flaky)
    driver = Driver()
    parent = await start(rt, lead([worker("w", [{"say": "the answer"}])]), driver)
    broken["on"] = False
    send = call(driver, "sys_session_send", {"agent": "w", "title": "t", "args": "go"})

    async def send_then_break(ctx: Any) -> None:
        await send(ctx)
        broken["on"] = True  # the policies are down when the wake-up reads the inbox

    async def mend(ctx: Any) -> None:
        broken["on"] = False

    driver.then(send_then_break, mend, call(driver, "sys_read_inbox"))
    await trio_turn(rt, parent)
    child = handle(driver.outputs[0])["task_id"]
    lines = await wait_lines(rt, parent, 1)
    assert lines == [
        (
            child,
            "completed",
            "w:t returned: [Result suppressed by policy: policy evaluation failed]",
        )
    ]
    await wait_quiet(rt)
    assert await probe(rt).store.inbox_count(parent) == 1
    # The next read, with the policies back, shows the real result.
    await trio_turn(rt, parent, "read it")
    assert driver.outputs[-1] == (
        f"[System: sub-agent task {child} completed — w:t returned: the answer]"
    )
    assert await probe(rt).store.inbox_count(parent) == 0


async def test_a_shutdown_leaves_unsettled_work_for_the_next_start(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'o.db'}"
    driver = Driver()
    async with omnigent.open_runtime(db) as rt:
        parent, child = await slow_child(rt, driver)
    assert rt.statistics()["sub_agent_work"] == 0
    driver.then(None)
    async with omnigent.open_runtime(db, harnesses={"driver": driver.factory}) as rt:
        lines = await wait_lines(rt, parent, 1)
        assert lines == [
            (
                child,
                "failed",
                "w:t error: interrupted by a restart before the sub-agent finished; send it again",
            )
        ]


async def test_a_restart_between_completion_and_read_loses_nothing(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'o.db'}"
    driver = Driver()
    spec = lead([worker("w", [{"say": "kept across the restart"}])])
    async with omnigent.open_runtime(db) as rt:
        parent = await start(rt, spec, driver)

        async def dispatch_then_wait(ctx: Any) -> None:
            driver.outputs.append(
                await ctx.call_tool("sys_session_send", {"agent": "w", "title": "t", "args": "go"})
            )
            await trio.sleep_forever()  # busy: the result waits in the inbox

        driver.then(dispatch_then_wait)
        async with rt.subscribe(parent) as events:
            await rt.send_message(parent, "go")
            with trio.fail_after(10):
                async for event in events:
                    if event.type == "session.inbox.updated" and event.count == 1:
                        break
    child = handle(driver.outputs[0])["task_id"]
    # The parent's turn was cut short with the result unread: the next start wakes it
    # with the result, as the live runtime would have once that turn ended (issue 17).
    async with omnigent.open_runtime(db, harnesses={"driver": driver.factory}) as rt:
        lines = await wait_lines(rt, parent, 1)
    assert lines == [(child, "completed", "w:t returned: kept across the restart")]


async def test_a_crash_after_the_child_finished_delivers_its_answer(tmp_path: Path) -> None:
    """An entry left open by a process that died (no finally ran) is settled at start.

    The crash is staged in the store: a running entry whose child is idle, with an
    answer, and another whose child never took its message.
    """
    db = f"sqlite:///{tmp_path / 'o.db'}"
    driver = Driver()
    async with omnigent.open_runtime(db) as rt:
        rt.register_harness("driver", driver.factory)
        parent = (await rt.create_session((await rt.create_agent(lead([]))).id)).id
        helper = await rt.create_agent(worker("w", [{"say": "finished before the crash"}]))
        done = (await rt.create_session(helper.id, parent_session_id=parent)).id
        await trio_turn(rt, done)
        never = (await rt.create_session(helper.id, parent_session_id=parent)).id
        await probe(rt).store.insert_work(
            WorkRow("subagent_d", parent, done, "w", "a", None, "launching", None, 0.0)
        )
        await probe(rt).store.start_work("subagent_d")
        await probe(rt).store.insert_work(
            WorkRow("subagent_n", parent, never, "w", "b", None, "launching", None, 1.0)
        )
        await wait_quiet(rt)
    driver.then(None)
    async with omnigent.open_runtime(db, harnesses={"driver": driver.factory}) as rt:
        lines = await wait_lines(rt, parent, 2)
        assert await probe(rt).store.list_work() == []
    assert sorted(lines) == sorted(
        [
            (done, "completed", "w:a returned: finished before the crash"),
            (
                never,
                "failed",
                "w:b error: interrupted by a restart before the sub-agent finished; send it again",
            ),
        ]
    )


async def test_a_version_3_database_gains_sub_agent_work(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "old.db"
    async with omnigent.open_runtime(f"sqlite:///{path}") as rt:
        old = await rt.create_session((await rt.create_agent(worker("w"))).id)
    with sqlite3.connect(path) as conn:  # back to how version 3 left it
        conn.execute("DROP INDEX sessions_runner")  # migration 8
        conn.execute("ALTER TABLE sessions DROP COLUMN runner_id")
        conn.execute("DROP TABLE session_usage")  # migration 7
        conn.execute("DROP TABLE subagent_work")
        conn.execute("ALTER TABLE sessions DROP COLUMN sub_agent")
        conn.execute("ALTER TABLE items DROP COLUMN taken_by")  # migration 6
        conn.execute("DROP INDEX items_pending")  # and without migration 5
        conn.execute("ALTER TABLE items DROP COLUMN pending")
        conn.execute("DROP TABLE running_tasks")
        conn.execute("DROP TABLE process_groups")
        conn.execute("PRAGMA user_version = 3")
    async with omnigent.open_runtime(f"sqlite:///{path}") as rt:
        assert (await probe(rt).store.get_session(old.id)).sub_agent is None  # type: ignore[union-attr]
        assert await probe(rt).store.list_work(open_only=False) == []
        driver = Driver()
        parent = await start(rt, lead([worker("w", [{"say": "migrated"}])]), driver)
        driver.then(call(driver, "sys_session_send", {"agent": "w", "title": "t", "args": "go"}))
        await trio_turn(rt, parent)
        assert (await wait_lines(rt, parent, 1))[0][2] == "w:t returned: migrated"


CRASHING = """
import sys, trio, omnigent
from pathlib import Path

SPEC = {
    "name": "lead",
    "executor": {"type": "omnigent", "config": {"harness": "scripted", "turns": [
        [{"call": "sys_session_send", "args": {"agent": "w", "title": "t", "args": "go"}}],
        [{"say": "woken"}],
    ]}},
    "sub_agents": [{"name": "w", "executor": {"config": {"harness": "scripted",
                                                        "script": [{"sleep": 600}]}}}],
    "tools": {"agents": ["w"]},
}

async def main(db, marker):
    async with omnigent.open_runtime(db) as rt:
        session = await rt.create_session((await rt.create_agent(SPEC)).id)
        await rt.send_message(session.id, "go")
        while True:
            kids = (await rt.list_sessions(parent_session_id=session.id)).data
            if kids and kids[0].busy:
                break
            await trio.sleep(0.02)
        Path(marker).write_text(session.id + " " + kids[0].id)
        await trio.sleep_forever()

trio.run(main, sys.argv[1], sys.argv[2])
"""


async def test_a_kill_9_mid_work_is_delivered_as_interrupted_and_wakes_the_parent(
    tmp_path: Path,
) -> None:
    import signal
    import sys

    db = f"sqlite:///{tmp_path / 'o.db'}"
    marker = tmp_path / "ready"
    process = await trio.lowlevel.open_process([sys.executable, "-c", CRASHING, db, str(marker)])
    try:
        with trio.fail_after(30):
            while not marker.exists():
                await trio.sleep(0.05)
    finally:
        process.send_signal(signal.SIGKILL)
        with trio.CancelScope(shield=True):
            await process.wait()
    parent, child = marker.read_text().split()
    async with omnigent.open_runtime(db) as rt:
        lines = await wait_lines(rt, parent, 1)
        assert lines == [
            (
                child,
                "failed",
                "w:t error: interrupted by a restart before the sub-agent finished; send it again",
            )
        ]
        await wait_quiet(rt)
        assert (await rt.get_session(child)).status == "failed"
        assert await probe(rt).store.list_work() == []


async def test_deleting_a_working_child_delivers_cancelled_to_its_parent(
    rt: omnigent.Runtime,
) -> None:
    driver = Driver()
    parent, child = await slow_child(rt, driver)
    driver.then(None)  # the wake-up
    await rt.delete_session(child)
    lines = await wait_lines(rt, parent, 1)
    assert lines == [(child, "cancelled", "w:t")]
    await wait_quiet(rt)
    assert await probe(rt).store.list_work() == []


async def test_a_native_child_that_is_slow_to_stop_gets_a_best_effort_answer(
    rt: omnigent.Runtime,
) -> None:
    from omnigent.harnesses.base import TurnContext, TurnRequest

    released = trio.Event()

    class Stubborn:
        """A harness that can only be asked to stop: it finishes its step first."""

        def __init__(self, env: Any) -> None:
            pass

        async def run_turn(self, request: TurnRequest, ctx: TurnContext) -> None:
            with trio.CancelScope(shield=True):
                await released.wait()
                async with ctx.open_message() as message:
                    await message.write("finished anyway")

        async def aclose(self) -> None:
            return None

    rt.register_harness("stubborn", Stubborn, native=True)
    driver = Driver()
    parent = await start(rt, lead([worker("w", harness="stubborn")]), driver)
    driver.then(call(driver, "sys_session_send", {"agent": "w", "title": "t", "args": "go"}))
    await trio_turn(rt, parent)
    child = handle(driver.outputs[0])["task_id"]
    with trio.fail_after(5):
        while not (await rt.get_session(child)).busy:
            await trio.sleep(0.01)
    driver.then(call(driver, "sys_cancel_task", {"task_id": child}))
    await trio_turn(rt, parent)
    # A native agent is answered at once, as best effort: it stops at its next step.
    assert json.loads(driver.outputs[1]) == {
        "cancel_requested": True,
        "cancel_confirmed": False,
        "best_effort": True,
        "task_id": child,
        "status": "running",
        "message": (
            "Stop requested; a native agent stops at its next step, so it may still finish "
            "the step it is in. Its result is recorded as cancelled (a late answer is "
            "dropped): use sys_read_inbox to observe terminal status."
        ),
    }
    released.set()  # it finishes its step and stops; the answer it wrote is dropped
    lines = await wait_lines(rt, parent, 1)
    await wait_quiet(rt)
    assert await inbox_lines(rt, parent) == lines
    assert lines == [(child, "cancelled", "w:t")]


async def test_the_parent_hears_launching_then_in_progress_then_completed(
    rt: omnigent.Runtime,
) -> None:
    driver = Driver()
    parent = await start(rt, lead([worker("w", [{"say": "done"}])]), driver)
    driver.then(call(driver, "sys_session_send", {"agent": "w", "title": "t", "args": "go"}))
    await trio_turn(rt, parent)
    child = handle(driver.outputs[0])["task_id"]
    await wait_lines(rt, parent, 1)
    await wait_quiet(rt)
    updates = []
    with trio.fail_after(10):
        async with rt.subscribe(parent, after=0) as events:
            # Until the update that says how it ended: the parent's stored last event,
            # read meanwhile, may come before it (a busy machine's writer still holds
            # it), and stopping there missed it.
            async for event in events:
                if isinstance(event, ChildSessionUpdated) and event.child.id == child:
                    updates.append(event.to_dict()["child"])
                    if updates[-1]["current_task_status"] == "completed":
                        break
    # Created (before its first turn), then the send: launching, not busy — before the
    # child can start on it — then its turn, then how it ended.
    assert updates[1] == {
        "id": child,
        "title": "w:t",
        "agent": "w",
        "session_name": "t",
        "status": "idle",
        "busy": False,
        "current_task_status": "launching",
        "tool": "w",
        "preview": None,
        "labels": {},
    }
    steps = [(u["busy"], u["current_task_status"]) for u in updates]
    assert steps[:3] == [(False, None), (False, "launching"), (True, "in_progress")]
    assert steps[-1] == (False, "completed")
    assert updates[-1]["preview"] == "done" and updates[-1]["status"] == "idle"


async def test_a_dispatch_waiting_for_its_child_is_launching_and_cancels_as_launching(
    rt: omnigent.Runtime,
) -> None:
    busybody = await rt.create_agent(worker("busy", [{"sleep": 30}]))
    driver = Driver()
    parent = await start(rt, lead([], spawn=True), driver)
    driver.then(call(driver, "sys_session_create", {"agent_id": busybody.id, "title": "b"}))
    await trio_turn(rt, parent)
    child = json.loads(driver.outputs[0])["conversation_id"]
    assert (await rt.child_summary(child)).current_task_status is None  # never ran
    await rt.send_message(child, "keep busy")  # someone else keeps it working
    with trio.fail_after(5):
        while not (await rt.get_session(child)).busy:
            await trio.sleep(0.01)
    seen: list[Any] = []

    async def send_look_cancel(ctx: Any) -> None:
        send = {"session_id": child, "args": "work"}
        driver.outputs.append(await ctx.call_tool("sys_session_send", send))
        seen.append(await rt.child_summary(child))  # what GET …/child_sessions shows
        driver.outputs.append(await ctx.call_tool("sys_cancel_task", {"task_id": child}))

    driver.then(send_look_cancel)
    driver.then(None)  # the wake-up with the cancelled line
    with trio.fail_after(10):
        async with rt.subscribe(parent) as events:
            await rt.send_message(parent, "go")
            updates = []
            async for event in events:
                if isinstance(event, ChildSessionUpdated):
                    updates.append(event.child)
                if event.type == "session.status" and event.status == "idle":
                    break
    # Its other turn runs, but the work sent to it has not started: launching, not busy.
    assert (seen[0].current_task_status, seen[0].busy) == ("launching", True)
    assert ("launching", False) in [(u.current_task_status, u.busy) for u in updates]
    assert json.loads(driver.outputs[2]) == {
        "cancel_requested": True,
        "cancel_confirmed": False,
        "task_id": child,
        "status": "launching",
        "message": (
            "Cancel requested; cancellation has not been confirmed yet. Use sys_read_inbox "
            "to observe terminal status."
        ),
    }
    lines = await wait_lines(rt, parent, 1)
    assert lines == [(child, "cancelled", "busy:b")]
    await wait_quiet(rt)


def test_a_shutdown_that_reaches_the_child_first_leaves_the_dispatch_open() -> None:
    """A shutdown stops the child too, and its cancelled turn may settle the dispatch
    before the parent's watcher sees the runtime closing: that dispatch is left open
    for the next start, as an unsettled one (it flaked: one run in three delivered
    ``cancelled``). Only a cancel the parent asked for is delivered at shutdown."""
    from omnigent.core.work._subagents import _cut_short

    row = WorkRow("subagent_1", "conv_p", "conv_c", "w", "t", "item_1", "running", None, 0.0)
    assert _cut_short(Dispatch(row))
    by_shutdown = Dispatch(row)
    by_shutdown.taken = True
    by_shutdown.settle(TurnStatus.CANCELLED, "")  # its child's turn, cut by the shutdown
    assert _cut_short(by_shutdown)
    asked = Dispatch(row)
    SubAgents(None, None).cancel(asked)  # type: ignore[arg-type]
    assert not _cut_short(asked)
    answered = Dispatch(row)
    answered.settle(TurnStatus.COMPLETED, "done")
    assert not _cut_short(answered)
