"""Sub-agents through the library: the tools, dispatch and its refusals, children."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import trio

import omnigent
from omnigent.harnesses.base import HarnessEnv, TurnContext, TurnRequest
from omnigent.harnesses.registry import ModelRule
from omnigent.testing import RecordingHarness, probe

from .conftest import wait_quiet
from .subagent_helpers import (
    Driver,
    call,
    handle,
    inbox_lines,
    lead,
    refused,
    say,
    wait_lines,
    worker,
)

CLAUDE = ModelRule("Claude models", ("*claude*",))
GPT = ModelRule("OpenAI models", ("gpt-*", "*codex*"))

EVERY_AGENT = [
    "sys_call_async",
    "sys_read_inbox",
    "sys_cancel_async",
    "sys_session_list",
    "sys_session_get_history",
    "sys_session_get_info",
    "sys_agent_get",
    "sys_agent_list",
    "sys_agent_download",
    "sys_cancel_task",
]
DISPATCH = ["sys_session_send", "sys_session_close", "sys_list_models"]
ORCHESTRATION = {*EVERY_AGENT, *DISPATCH, "sys_session_create", "sys_session_share"}


async def start(rt: omnigent.Runtime, spec: dict[str, Any], driver: Driver) -> str:
    rt.register_harness("driver", driver.factory)
    agent = await rt.create_agent(spec)
    return (await rt.create_session(agent.id)).id


async def children(rt: omnigent.Runtime, parent: str) -> list[omnigent.SessionSnapshot]:
    return list((await rt.list_sessions(parent_session_id=parent)).data)


@pytest.mark.parametrize(
    ("extra", "offered"),
    [
        # The discovery and async tools come with every agent (the original's).
        ({}, EVERY_AGENT),
        ({"tools": {"agents": ["w"]}}, [*EVERY_AGENT, *DISPATCH]),
        ({"tools": {"agents": []}, "spawn": True}, [*EVERY_AGENT, *DISPATCH, "sys_session_create"]),
        # async_enabled: false takes the three async tools away, nothing else.
        (
            {"async_enabled": False},
            [
                t
                for t in EVERY_AGENT
                if t.startswith("sys_session")
                or t.startswith("sys_agent")
                or t == "sys_cancel_task"
            ],
        ),
        (
            {"async_enabled": False, "tools": {"agents": ["w"]}},
            [*EVERY_AGENT[3:], *DISPATCH, "sys_read_inbox"],
        ),
        ({"agent_session_sharing": "non-public"}, [*EVERY_AGENT, "sys_session_share"]),
    ],
)
async def test_orchestration_tools_are_offered_per_spec(
    rt: omnigent.Runtime, extra: dict[str, Any], offered: list[str]
) -> None:
    driver = Driver()
    spec = {**lead([worker("w")], grant=[]), **extra}
    session = await start(rt, spec, driver)
    await trio_turn(rt, session)
    names = [t.name for t in driver.requests[0].tools]
    assert {n for n in names if n in ORCHESTRATION} == set(offered)
    assert len(names) == len(set(names))
    if "sys_session_send" in offered and extra.get("tools", {}).get("agents"):
        send = next(t for t in driver.requests[0].tools if t.name == "sys_session_send")
        assert send.parameters["properties"]["agent"]["enum"] == ["w"]


async def trio_turn(rt: omnigent.Runtime, session: str, text: str = "go") -> None:
    """Send a message and wait for the turn it starts to end."""
    with trio.fail_after(10):
        async with rt.subscribe(session) as events:
            await rt.send_message(session, text)
            async for event in events:
                if event.type == "session.status" and event.status in ("idle", "failed"):
                    return


async def test_named_send_creates_a_child_then_continues_it(rt: omnigent.Runtime) -> None:
    driver = Driver()
    spec = lead([worker("researcher", turns=[[{"say": "first answer"}], [{"say": "second"}]])])
    parent = await start(rt, spec, driver)
    args = {"agent": "researcher", "title": "auth", "args": "look into auth"}
    driver.then(call(driver, "sys_session_send", args))
    await trio_turn(rt, parent)
    first = handle(driver.outputs[0])
    child = first["task_id"]
    assert first == {
        "task_id": child,
        "kind": "sub_agent",
        "agent": "researcher",
        "title": "auth",
        "conversation_id": child,
        "status": "launching",
        "message": (
            f"[System: sub-agent researcher title 'auth' launching as task {child}. Result "
            "will appear in your inbox; call sys_read_inbox to check or sys_cancel_task to "
            "interrupt it.]"
        ),
    }
    lines = await wait_lines(rt, parent, 1)
    assert lines == [(child, "completed", "researcher:auth returned: first answer")]
    snapshot = await rt.get_session(child)
    assert snapshot.title == "researcher:auth"
    assert snapshot.parent_session_id == parent and snapshot.root_session_id == parent
    assert snapshot.agent_name == "researcher" and snapshot.harness == "scripted"
    # The same (agent, title) continues the same session, which sees its history.
    driver.then(call(driver, "sys_session_send", {**args, "args": {"input": "and now?"}}))
    await trio_turn(rt, parent)
    assert handle(driver.outputs[1])["task_id"] == child
    lines = await wait_lines(rt, parent, 2)
    assert lines[1] == (child, "completed", "researcher:auth returned: second")
    texts = [getattr(i, "role", None) for i in (await rt.list_items(child)).data]
    assert texts == ["user", "assistant", "user", "assistant"]
    assert len(await children(rt, parent)) == 1
    await wait_quiet(rt)
    assert rt.statistics()["sub_agent_work"] == 0


async def test_a_title_is_assigned_when_none_is_given(rt: omnigent.Runtime) -> None:
    driver = Driver()
    parent = await start(rt, lead([worker("w", [{"say": "x"}])]), driver)
    send = {"agent": "w", "args": "one"}
    driver.then(call(driver, "sys_session_send", send, "sys_session_send", send))
    await trio_turn(rt, parent)
    assert [handle(o)["title"] for o in driver.outputs] == ["w-1", "w-2"]
    await wait_lines(rt, parent, 2)


def model_args(model: Any) -> dict[str, Any]:
    return {"agent": "w", "title": "t", "args": {"input": "hi", "model": model}}


@pytest.mark.parametrize(
    ("args", "expect"),
    [
        (
            {"session_id": "conv_x", "agent": "w", "args": "hi"},
            "sys_session_send received both 'session_id' and 'agent'/'title'",
        ),
        ({"title": "t", "args": "hi"}, "sys_session_send needs 'agent'"),
        ({"args": "hi"}, "sys_session_send needs 'agent'"),
        ({"agent": "nobody", "title": "t", "args": "hi"}, "sub-agent 'nobody' not found"),
        ({"agent": "hidden", "title": "t", "args": "hi"}, "sub-agent 'hidden' not found"),
        ({"agent": "w", "title": "t", "args": "  "}, "sys_session_send needs a non-empty"),
        ({"agent": "w", "title": "t"}, "invalid arguments for sys_session_send: 'args'"),
        (model_args("gpt-4o; rm -rf /"), "sys_session_send: 'model' 'gpt-4o; rm -rf /'"),
        (model_args("$(id)"), "sys_session_send: 'model' '$(id)' is not a model id"),
        (model_args("   "), "sys_session_send: 'model' must not be blank"),
        (model_args(7), "sys_session_send: 'model' must be a string, got a number"),
        (model_args("--help"), "sys_session_send: 'model' '--help' is not a model id"),
        (
            {"session_id": "conv_x", "args": {"input": "hi", "model": "gpt-4o"}},
            "sys_session_send 'model' applies only when a sub-agent session is first",
        ),
        (
            {"agent": "w", "title": "t", "args": {"input": "hi", "effort": "max"}},
            "invalid arguments for sys_session_send: unknown key 'effort' in 'args'",
        ),
        (
            {"agent": "w", "title": "a:closed:b", "args": "hi"},
            "invalid arguments for sys_session_send: 'title' must not contain",
        ),
    ],
)
async def test_bad_sends_fail_loud_and_change_nothing(
    rt: omnigent.Runtime, args: dict[str, Any], expect: str
) -> None:
    driver = Driver()
    spec = lead([worker("w", [{"say": "x"}]), worker("hidden")], grant=["w"])
    parent = await start(rt, spec, driver)
    driver.then(call(driver, "sys_session_send", args))
    await trio_turn(rt, parent)
    assert refused(driver.outputs[0]).startswith(expect), driver.outputs[0]
    assert await children(rt, parent) == []
    assert await probe(rt).store.list_work(open_only=False) == []


class ClaudeOnly(RecordingHarness):
    """A single-vendor harness double that records the model it was given."""

    def factory(self, env: HarnessEnv) -> Any:
        self.env_models.append(env.config.model)
        return super().factory(env)

    def __init__(self) -> None:
        super().__init__()
        self.env_models: list[str | None] = []


@pytest.mark.parametrize(
    ("harness", "model", "expect"),
    [
        ("claudeish", "gpt-5", "harness 'claudeish' only runs Claude models"),
        ("claudeish", "mystery-7b", "harness 'claudeish' only runs Claude models"),
        ("gptish", "claude-sonnet-4-6", "harness 'gptish' only runs OpenAI models"),
        ("scripted", "gpt-5", "harness 'scripted' cannot apply a model chosen at dispatch"),
        ("absent", None, "can't start on this machine: the 'absent' CLI is not on PATH"),
    ],
)
async def test_the_child_harness_is_checked_before_any_child_exists(
    rt: omnigent.Runtime, harness: str, model: str | None, expect: str
) -> None:
    recorder = ClaudeOnly()
    rt.register_harness("claudeish", recorder.factory, models=CLAUDE)
    rt.register_harness("gptish", recorder.factory, models=GPT)
    rt.register_harness(
        "absent",
        recorder.factory,
        requires=lambda: "the 'absent' CLI is not on PATH; pip install 'omnigent[absent]'",
    )
    driver = Driver()
    parent = await start(rt, lead([worker("w", harness=harness)]), driver)
    args: Any = "hi" if model is None else {"input": "hi", "model": model}
    driver.then(call(driver, "sys_session_send", {"agent": "w", "title": "t", "args": args}))
    await trio_turn(rt, parent)
    assert expect in refused(driver.outputs[0]), driver.outputs
    assert await children(rt, parent) == []
    assert recorder.created == 0


@pytest.mark.parametrize(
    ("config", "asked", "runs"),
    [
        # A gateway whose ids carry a prefix: a canonical id is localised for it.
        (
            "providers: [{name: gw, kind: gateway, model_prefix: databricks-, "
            "harnesses: [claudeish]}]",
            "claude-sonnet-4-6",
            "databricks-claude-sonnet-4-6",
        ),
        # A vendor key: a gateway id is stripped.
        (
            "providers: [{name: a, kind: key, family: anthropic, harnesses: [claudeish]}]",
            "databricks-claude-sonnet-4-6",
            "claude-sonnet-4-6",
        ),
        # A vendor-prefixed id passes through, and so does any id with no provider.
        (
            "providers: [{name: gw, kind: gateway, model_prefix: databricks-, "
            "harnesses: [claudeish]}]",
            "anthropic/claude-sonnet-4-6",
            "anthropic/claude-sonnet-4-6",
        ),
        ("", "databricks-claude-sonnet-4-6", "databricks-claude-sonnet-4-6"),
    ],
)
async def test_the_model_is_localised_and_reaches_the_harness_that_runs(
    rt: omnigent.Runtime, omnigent_home: Path, config: str, asked: str, runs: str
) -> None:
    (omnigent_home / "config.yaml").write_text(config)
    recorder = ClaudeOnly()
    rt.register_harness("claudeish", recorder.factory, models=CLAUDE)
    driver = Driver()
    parent = await start(rt, lead([worker("w", harness="claudeish")]), driver)
    args = {"agent": "w", "title": "t", "args": {"input": "hi", "model": asked}}
    driver.then(call(driver, "sys_session_send", args))
    await trio_turn(rt, parent)
    child = handle(driver.outputs[0])["task_id"]
    await wait_lines(rt, parent, 1)
    assert (await rt.get_session(child)).model_override == runs
    assert recorder.env_models == [runs]
    assert [r.model for r in recorder.requests] == [runs]


async def test_by_id_send_reaches_only_direct_open_children(rt: omnigent.Runtime) -> None:
    driver = Driver()
    spec = lead([worker("w", [{"say": "ok"}])], spawn=True)
    parent = await start(rt, spec, driver)
    other = await rt.create_agent(worker("loner", [{"say": "mine"}]))
    stranger = (await rt.create_session(other.id)).id
    driver.then(
        call(
            driver,
            "sys_session_create",
            {"agent_id": "loner", "title": "helper"},
            "sys_session_send",
            {"session_id": stranger, "args": "hi"},
            "sys_session_send",
            {"session_id": "conv_nope", "args": "hi"},
        )
    )
    await trio_turn(rt, parent)
    created = json.loads(driver.outputs[0])
    assert created["kind"] == "sub_agent" and created["status"] == "created"
    assert created["agent_name"] == "loner" and created["title"] == "helper"
    assert json.loads(driver.outputs[1]) == {
        "error": "session_out_of_tree",
        "conversation_id": stranger,
        "message": (
            "target is not a direct child of the calling session; sys_session_send by "
            "session_id is child-only."
        ),
    }
    assert json.loads(driver.outputs[2]) == {
        "error": "session_not_found",
        "conversation_id": "conv_nope",
    }
    kid = created["conversation_id"]
    driver.then(call(driver, "sys_session_send", {"session_id": kid, "args": "work"}))
    await trio_turn(rt, parent)
    sent = handle(driver.outputs[3])
    assert sent["task_id"] == kid and sent["agent"] == "loner" and sent["title"] == "helper"
    lines = await wait_lines(rt, parent, 1)
    assert lines == [(kid, "completed", "loner:helper returned: mine")]
    assert (await rt.list_items(stranger)).data == ()


async def test_a_busy_child_refuses_a_second_send(rt: omnigent.Runtime) -> None:
    driver = Driver()
    parent = await start(rt, lead([worker("w", [{"sleep": 30}, {"say": "late"}])]), driver)
    send = {"agent": "w", "title": "t", "args": "go"}
    driver.then(call(driver, "sys_session_send", send, "sys_session_send", send))
    await trio_turn(rt, parent)
    assert refused(driver.outputs[1]).startswith("sub-agent 'w' title 't' already has a launching")
    assert len(await children(rt, parent)) == 1
    await rt.stop_session(parent)
    await wait_quiet(rt)


async def test_session_create_refusals(rt: omnigent.Runtime, tmp_path: Path) -> None:
    workdir = tmp_path / "work"
    workdir.mkdir()
    (workdir / "helper.yaml").write_text(
        "name: helper\nexecutor: {config: {harness: scripted, script: [{say: from file}]}}\n"
    )
    (workdir / "broken.yaml").write_text("name: Not A Name\n")
    outside = tmp_path / "outside.yaml"
    outside.write_text("name: outside\n")
    (workdir / "link.yaml").symlink_to(outside)
    driver = Driver()
    spec = lead([], spawn=True, os_env={"cwd": str(workdir)})
    parent = await start(rt, spec, driver)
    cases = [
        {"agent_id": "x", "config_path": "helper.yaml"},
        {},
        {"agent_id": "agent_missing"},
        {"config_path": "missing.yaml"},
        {"config_path": "../outside.yaml"},
        {"config_path": "link.yaml"},
        {"config_path": "broken.yaml"},
        {"config_path": "helper.yaml", "model": "a b"},
        {"config_path": "helper.yaml", "message": "go", "title": "h"},
    ]
    steps: list[Any] = []
    for args in cases:
        steps += ["sys_session_create", args]
    driver.then(call(driver, *steps))
    await trio_turn(rt, parent)
    out = [json.loads(o) for o in driver.outputs]
    assert out[0] == {
        "error": (
            "sys_session_create requires exactly one of 'agent_id' (existing agent) or "
            "'config_path' (new agent from a local config)"
        )
    }
    assert out[1] == out[0]
    assert out[2] == {"error": "agent_not_found", "agent_id": "agent_missing"}
    assert out[3] == {"error": "config_not_found", "config_path": "missing.yaml"}
    escapes = {"error": "sys_session_create config_path escapes the working directory"}
    assert out[4] == escapes and out[5] == escapes
    assert refused(driver.outputs[6]).startswith("'broken.yaml' is not a valid agent spec")
    assert refused(driver.outputs[7]).startswith("sys_session_create: 'model' 'a b' is not a")
    made = out[8]
    assert made["status"] == "launching" and made["task_id"] == made["conversation_id"]
    assert [c.id for c in await children(rt, parent)] == [made["conversation_id"]]
    lines = await wait_lines(rt, parent, 1)
    assert lines == [(made["task_id"], "completed", "helper:h returned: from file")]


async def test_model_override_reaches_a_loop_like_harness_through_its_config(
    rt: omnigent.Runtime,
) -> None:
    seen: list[tuple[str | None, str | None]] = []

    class Probe:
        def __init__(self, env: HarnessEnv) -> None:
            self._model = env.config.model

        async def run_turn(self, request: TurnRequest, ctx: TurnContext) -> None:
            seen.append((self._model, request.model))

        async def aclose(self) -> None:
            return None

    rt.register_harness("probe", Probe)
    driver = Driver()
    spec = lead([worker("w", harness="probe", model="spec-model")])
    parent = await start(rt, spec, driver)
    send = {"agent": "w", "title": "t", "args": {"input": "hi", "model": "asked-model"}}
    driver.then(call(driver, "sys_session_send", send))
    await trio_turn(rt, parent)
    await wait_lines(rt, parent, 1)
    assert seen == [("asked-model", "asked-model")]


async def test_the_wake_up_turn_reads_the_result(rt: omnigent.Runtime) -> None:
    driver = Driver()
    parent = await start(rt, lead([worker("w", [{"say": "42"}])]), driver)
    driver.then(call(driver, "sys_session_send", {"agent": "w", "title": "q", "args": "?"}))
    driver.then(say("thanks"))
    await trio_turn(rt, parent)
    await wait_lines(rt, parent, 1)
    assert "[System: sub-agent task" in driver.inputs[1] and "returned: 42]" in driver.inputs[1]
    await wait_quiet(rt)
    assert (await rt.get_session(parent)).status == "idle"
    assert await inbox_lines(rt, parent) != []


async def test_a_child_works_where_its_parent_works(rt: omnigent.Runtime, tmp_path: Path) -> None:
    driver = Driver()
    child_spec = worker("w", [{"call": "sys_os_shell", "args": {"command": "pwd"}}])
    spec = lead([child_spec], os_env={"cwd": str(tmp_path)})
    parent = await start(rt, spec, driver)
    driver.then(call(driver, "sys_session_send", {"agent": "w", "title": "t", "args": "where?"}))
    await trio_turn(rt, parent)
    child = handle(driver.outputs[0])["task_id"]
    await wait_lines(rt, parent, 1)
    here = await trio.to_thread.run_sync(os.path.realpath, tmp_path)
    assert (await rt.get_session(child)).cwd == here
    output = (await rt.list_items(child)).data[-1]
    assert json.loads(output.output)["stdout"].strip() == here  # type: ignore[union-attr]


async def test_overrides_reach_the_harness_that_runs(rt: omnigent.Runtime) -> None:
    seen: list[tuple[str, str | None]] = []

    def probe(env: HarnessEnv) -> Any:
        seen.append((env.harness_name, env.config.model))
        return RecordingHarness().factory(env)

    rt.register_harness("probe", probe)
    agent = await rt.create_agent(worker("w", model="spec-model"))
    session = await rt.create_session(
        agent.id, harness_override="probe", model_override="override-model"
    )
    await trio_turn(rt, session.id)
    assert seen == [("probe", "override-model")]


async def test_a_spec_file_naming_anothers_agent_is_access_denied(
    rt: omnigent.Runtime, tmp_path: Path
) -> None:
    await rt.create_agent(worker("taken"), owner="alice")
    (tmp_path / "taken.yaml").write_text("name: taken\n")
    driver = Driver()
    parent = await start(rt, lead([], spawn=True, os_env={"cwd": str(tmp_path)}), driver)
    driver.then(call(driver, "sys_session_create", {"config_path": "taken.yaml"}))
    await trio_turn(rt, parent)
    assert json.loads(driver.outputs[0]) == {"error": "access_denied", "config_path": "taken.yaml"}
    assert await children(rt, parent) == []


EXAMPLES = Path(__file__).parent.parent / "examples"


async def test_the_example_orchestrators(rt: omnigent.Runtime) -> None:
    loop = await rt.create_agent(omnigent.AgentSpec.load(EXAMPLES / "orchestrator.yaml"))
    assert loop.name == "orchestrator" and loop.harness == "loop"
    spec = omnigent.AgentSpec.load(EXAMPLES / "orchestrator-scripted.yaml")
    session = (await rt.create_session((await rt.create_agent(spec)).id)).id
    await trio_turn(rt, session)
    lines = await wait_lines(rt, session, 3)
    assert sorted(rest for _, _, rest in lines) == [
        "counter:apples returned: There are 3.",
        "counter:pears returned: There are 3.",
        "slow:report returned: The report is done.",
    ]
    await wait_quiet(rt)
    rows = [await rt.child_summary(c.id) for c in await children(rt, session)]
    assert {(r.tool, r.session_name, r.current_task_status) for r in rows} == {
        ("counter", "apples", "completed"),
        ("counter", "pears", "completed"),
        ("slow", "report", "completed"),
    }


async def test_concurrent_sends_make_no_twin_children(rt: omnigent.Runtime) -> None:
    driver = Driver()
    parent = await start(rt, lead([worker("w", [{"sleep": 0.2}, {"say": "once"}])]), driver)
    send = {"agent": "w", "title": "t", "args": "go"}

    async def both(ctx: Any) -> None:
        async with trio.open_nursery() as nursery:
            for _ in range(3):
                nursery.start_soon(lambda: _keep(ctx))

    async def _keep(ctx: Any) -> None:
        driver.outputs.append(await ctx.call_tool("sys_session_send", send))

    driver.then(both)
    await trio_turn(rt, parent)
    answers = [json.loads(o) for o in driver.outputs]
    handles = [a for a in answers if "error" not in a]
    refusals = [refused(o) for o in driver.outputs if "error" in json.loads(o)]
    assert len(handles) == 1 and len(refusals) == 2, driver.outputs
    assert all("already has a launching or running turn" in o for o in refusals)
    assert len(await children(rt, parent)) == 1
    assert len(await wait_lines(rt, parent, 1)) == 1


@pytest.mark.parametrize(
    ("harness", "model", "expect"),
    [
        ("claude-code", "gpt-5", "harness 'claude-code' only runs Claude models"),
        ("claude-native", "llama-3", "harness 'claude-native' only runs Claude models"),
        ("codex", "claude-sonnet-4-6", "harness 'codex' only runs GPT models"),
        ("codex-native", "kimi-k2", "harness 'codex-native' only runs GPT models"),
        ("claude-code", None, "harness 'claude-code' needs the Claude Code CLI"),
        ("claude-sdk", None, "harness 'claude-sdk' needs the Claude Code CLI"),
        ("codex", None, "harness 'codex' needs the Codex CLI"),
        (
            "pi",
            None,
            "harness 'pi' needs the pi CLI, which is not installed: "
            "npm install -g @mariozechner/pi-coding-agent",
        ),
    ],
)
async def test_the_native_harnesses_guard_their_dispatches(
    rt: omnigent.Runtime,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    harness: str,
    model: str | None,
    expect: str,
) -> None:
    # The CLIs: "installed" (any executable will do, nothing is started) or not there.
    cli = "/bin/true" if model is not None else str(tmp_path / "missing")
    monkeypatch.setenv("OMNIGENT_CLAUDE_CLI", cli)
    monkeypatch.setenv("OMNIGENT_CODEX_CLI", cli)
    monkeypatch.setenv("PATH", str(tmp_path))  # no pi on it
    driver = Driver()
    parent = await start(rt, lead([worker("w", harness=harness)]), driver)
    args: Any = "hi" if model is None else {"input": "hi", "model": model}
    driver.then(call(driver, "sys_session_send", {"agent": "w", "title": "t", "args": args}))
    await trio_turn(rt, parent)
    assert expect in refused(driver.outputs[0]), driver.outputs
    assert await children(rt, parent) == []


async def test_a_sub_agents_session_keeps_its_parents_version(rt: omnigent.Runtime) -> None:
    """A session without ``harness_override`` follows its agent to a new version, but a
    sub-agent's session is pinned to the version its parent dispatched it from."""
    driver = Driver()
    v1 = lead([worker("w", turns=[[{"say": "v1 first"}], [{"say": "v1 again"}]])])
    parent = await start(rt, v1, driver)
    send = {"agent": "w", "title": "t", "args": "go"}
    driver.then(call(driver, "sys_session_send", send))
    await trio_turn(rt, parent)
    child = handle(driver.outputs[0])["task_id"]
    assert await wait_lines(rt, parent, 1) == [(child, "completed", "w:t returned: v1 first")]
    await wait_quiet(rt)
    v2 = lead([worker("w", turns=[[{"say": "v2 first"}], [{"say": "v2 again"}]])])
    assert (await rt.create_agent(v2)).version == 2
    driver.then(call(driver, "sys_session_send", send))
    await trio_turn(rt, parent)  # the parent follows its agent: version 2 …
    assert handle(driver.outputs[1])["task_id"] == child
    lines = await wait_lines(rt, parent, 2)
    assert lines[-1] == (child, "completed", "w:t returned: v1 again")  # … its child not
    assert (await probe(rt).store.get_session(parent)).agent_version == 2  # type: ignore[union-attr]
    assert (await probe(rt).store.get_session(child)).agent_version == 1  # type: ignore[union-attr]
