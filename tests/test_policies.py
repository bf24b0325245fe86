"""The policy engine: tool and function policies, combination, fail-closed, the wire."""

from __future__ import annotations

import importlib
import logging
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio

from omnigent.core.tools._policies import (
    PHASE_TOOL_CALL,
    PHASE_TOOL_RESULT,
    PolicyEngine,
    PolicyEvent,
    Verdict,
    load_function,
    parse_policy_event,
)
from omnigent.errors import ErrorDetail, InternalError, InvalidInput
from omnigent.spec import PolicySpec

HERE = __name__  # "tests.test_policies": function policies below are referenced by it
SECRET = "s3cr3t-output"


def call(tool: str = "sys_os_shell", tool_input: dict[str, Any] | None = None) -> PolicyEvent:
    return PolicyEvent(PHASE_TOOL_CALL, {"tool_name": tool, "tool_input": tool_input or {}})


def result(tool: str = "sys_os_shell", output: Any = SECRET) -> PolicyEvent:
    return PolicyEvent(
        PHASE_TOOL_RESULT, {"tool_name": tool, "tool_input": {}, "tool_output": output}
    )


def tools(name: str, type_: Any, *patterns: str, reason: str | None = None) -> PolicySpec:
    return PolicySpec(name=name, type=type_, tools=patterns, reason=reason)


def fn(name: str, attr: str) -> PolicySpec:
    return PolicySpec(name=name, type="function", function=f"{HERE}:{attr}")


async def decide(*policies: PolicySpec, event: PolicyEvent | None = None) -> Verdict:
    return await PolicyEngine(policies).evaluate(event or call())


# -- function policies, referenced as tests.test_policies:<name> ----------------------


def allow(event: dict[str, Any]) -> dict[str, Any]:
    return {"result": "ALLOW", "reason": "fine"}


def deny(event: dict[str, Any]) -> dict[str, Any]:
    return {"result": "DENY", "reason": "no"}


def ask(event: dict[str, Any]) -> dict[str, Any]:
    return {"result": "ASK", "reason": "sure?"}


async def async_deny_shell(event: dict[str, Any]) -> dict[str, Any]:
    await trio.lowlevel.checkpoint()
    if event["data"]["name"] == "sys_os_shell":
        return {"result": "POLICY_ACTION_DENY", "reason": "no shell"}
    return {"result": "POLICY_ACTION_UNSPECIFIED"}


def no_opinion(event: dict[str, Any]) -> None:
    return None


def unspecified(event: dict[str, Any]) -> dict[str, Any]:
    return {"result": "policy_action_unspecified"}


def lowercase_allow(event: dict[str, Any]) -> dict[str, Any]:
    return {"result": "allow"}


def redact(event: dict[str, Any]) -> dict[str, Any]:
    if event["type"] != "tool_result":
        return {"result": "UNSPECIFIED"}
    return {"result": "ALLOW", "data": event["data"]["result"].replace("s3cr3t", "***")}


def shout(event: dict[str, Any]) -> dict[str, Any]:
    if event["type"] != "tool_result":
        return {"result": "UNSPECIFIED"}
    return {"result": "ALLOW", "reason": "louder", "data": event["data"]["result"].upper()}


def structured(event: dict[str, Any]) -> dict[str, Any]:
    return {"result": "ALLOW", "data": {"lines": 3}}


def echo(event: dict[str, Any]) -> dict[str, Any]:
    reason = f"{sorted(event)} {event['type']} {event['context']}"
    event["data"]["name"] = "mutated"  # must not leak into the caller's event
    return {"result": "ALLOW", "reason": reason}


def which_thread(event: dict[str, Any]) -> dict[str, Any]:
    return {"result": "ALLOW", "reason": threading.current_thread().name}


def raises(event: dict[str, Any]) -> dict[str, Any]:
    raise RuntimeError(f"boom on {event['data'].get('result', 'call')}")


async def async_raises(event: dict[str, Any]) -> dict[str, Any]:
    raise ValueError("async boom")


def returns_list(event: dict[str, Any]) -> Any:
    return ["ALLOW"]


def returns_no_result(event: dict[str, Any]) -> Any:
    return {"reason": "forgot"}


def returns_extra_key(event: dict[str, Any]) -> Any:
    return {"result": "ALLOW", "reasons": "typo"}


def returns_bad_reason(event: dict[str, Any]) -> Any:
    return {"result": "ALLOW", "reason": 7}


def returns_unserialisable(event: dict[str, Any]) -> Any:
    return {"result": "ALLOW", "data": object()}


def returns_unknown(event: dict[str, Any]) -> Any:
    return {"result": "MAYBE"}


NOT_CALLABLE = 42


class Holder:
    @staticmethod
    def check(event: dict[str, Any]) -> dict[str, Any]:
        return {"result": "ALLOW", "reason": "from a class"}


class AsyncCallable:
    async def __call__(self, event: dict[str, Any]) -> dict[str, Any]:
        await trio.lowlevel.checkpoint()
        return {"result": "DENY", "reason": "async object"}


def test_function_policies_are_importable_by_reference() -> None:
    assert HERE == "tests.test_policies"
    assert importlib.import_module(HERE) is sys.modules[__name__]


# -- tool policies --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("type_", "reason", "expected"),
    [
        ("deny_tools", None, Verdict("DENY", "p", "tool sys_os_shell is denied")),
        ("deny_tools", "not here", Verdict("DENY", "p", "not here")),
        ("ask_tools", None, Verdict("ASK", "p", "approve sys_os_shell?")),
        ("ask_tools", "Approve shell", Verdict("ASK", "p", "Approve shell")),
        ("allow_tools", None, Verdict("ALLOW", "p")),
    ],
)
async def test_tool_policies_at_call_phase(type_: Any, reason: Any, expected: Verdict) -> None:
    assert await decide(tools("p", type_, "sys_os_shell", reason=reason)) == expected


@pytest.mark.parametrize("type_", ["deny_tools", "ask_tools", "allow_tools"])
async def test_tool_policies_do_not_apply_at_result_phase(type_: Any) -> None:
    verdict = await decide(tools("p", type_, "*"), event=result())
    assert verdict == Verdict("UNSPECIFIED")


@pytest.mark.parametrize(
    ("pattern", "tool", "matches"),
    [
        ("*", "anything", True),
        ("sys_os_*", "sys_os_shell", True),
        ("sys_os_*", "sys_fs_read", False),
        ("mcp__fs__*", "mcp__fs__read", True),
        ("mcp__fs__*", "mcp__docs__read", False),
        ("sys_os_?hell", "sys_os_shell", True),
        ("SYS_OS_*", "sys_os_shell", False),  # case-sensitive
        ("sys_os_shell", "sys_os_shell_x", False),  # whole-name match
    ],
)
async def test_tool_patterns(pattern: str, tool: str, matches: bool) -> None:
    verdict = await decide(tools("p", "deny_tools", pattern), event=call(tool))
    assert verdict.action == ("DENY" if matches else "UNSPECIFIED")


async def test_any_listed_pattern_matches() -> None:
    policy = tools("p", "deny_tools", "sys_fs_*", "sys_os_delete")
    assert (await decide(policy, event=call("sys_os_delete"))).action == "DENY"
    assert (await decide(policy, event=call("sys_os_shell"))).action == "UNSPECIFIED"


async def test_no_policies_is_unspecified() -> None:
    assert await decide() == Verdict("UNSPECIFIED")
    assert await decide(event=result()) == Verdict("UNSPECIFIED")


# -- combination ----------------------------------------------------------------------


async def test_first_deny_wins_and_stops_evaluation() -> None:
    seen: list[str] = []

    def resolve(ref: str) -> Callable[[dict[str, Any]], Any]:
        seen.append(ref)
        return allow

    engine = PolicyEngine(
        [
            tools("asker", "ask_tools", "*"),
            tools("first", "deny_tools", "*"),
            tools("second", "deny_tools", "*"),
            PolicySpec(name="late", type="function", function="never.reached:fn"),
        ],
        resolve_function=resolve,
    )
    assert await engine.evaluate(call()) == Verdict("DENY", "first", "tool sys_os_shell is denied")
    assert seen == []


async def test_ask_beats_allow_and_the_first_ask_decides() -> None:
    verdict = await decide(
        tools("ok", "allow_tools", "*"),
        tools("ask1", "ask_tools", "*", reason="one"),
        tools("ask2", "ask_tools", "*", reason="two"),
    )
    assert verdict == Verdict("ASK", "ask1", "one")


async def test_allow_when_anyone_allows_and_the_first_allow_decides() -> None:
    verdict = await decide(
        fn("quiet", "unspecified"),
        tools("a1", "allow_tools", "sys_*"),
        tools("a2", "allow_tools", "*"),
    )
    assert verdict == Verdict("ALLOW", "a1")


async def test_defaults_run_after_agent_policies() -> None:
    engine = PolicyEngine(
        [tools("agent_ask", "ask_tools", "*")],
        defaults=[tools("server_deny", "deny_tools", "sys_os_*")],
    )
    assert (await engine.evaluate(call())).policy_name == "server_deny"
    assert (await engine.evaluate(call("sys_fs_read"))).policy_name == "agent_ask"
    assert [p.name for p in engine.policies] == ["agent_ask", "server_deny"]

    agent_first = PolicyEngine(
        [tools("agent_deny", "deny_tools", "*")],
        defaults=[tools("server_deny", "deny_tools", "*")],
    )
    assert (await agent_first.evaluate(call())).policy_name == "agent_deny"


async def test_a_later_deny_overrides_an_earlier_allow() -> None:
    verdict = await decide(tools("ok", "allow_tools", "*"), fn("fn", "async_deny_shell"))
    assert verdict == Verdict("DENY", "fn", "no shell")


# -- function policies ----------------------------------------------------------------


@pytest.mark.parametrize("event", [call(), result()], ids=["call", "result"])
@pytest.mark.parametrize(
    ("attr", "action"),
    [
        ("allow", "ALLOW"),
        ("deny", "DENY"),
        ("ask", "ASK"),
        ("async_deny_shell", "DENY"),
        ("no_opinion", "DENY"),
        ("unspecified", "UNSPECIFIED"),
        ("lowercase_allow", "ALLOW"),
        ("Holder.check", "ALLOW"),
    ],
)
async def test_function_policies_at_both_phases(attr: str, action: str, event: PolicyEvent) -> None:
    assert (await decide(fn("f", attr), event=event)).action == action


async def test_async_function_policy_passes_on_other_tools() -> None:
    assert await decide(fn("f", "async_deny_shell"), event=call("sys_fs_read")) == Verdict(
        "UNSPECIFIED"
    )


async def test_async_callable_object() -> None:
    engine = PolicyEngine([fn("f", "obj")], resolve_function=lambda ref: AsyncCallable())
    assert await engine.evaluate(call()) == Verdict("DENY", "f", "async object")


async def test_function_gets_a_private_plain_dict() -> None:
    event = PolicyEvent(
        PHASE_TOOL_CALL, {"tool_name": "t", "tool_input": {}}, context={"user": "ann"}
    )
    verdict = await decide(fn("f", "echo"), event=event)
    assert verdict.reason == "['context', 'data', 'request_data', 'type'] tool_call " + str(
        {"user": "ann"}
    )
    assert event.data["tool_name"] == "t"


async def test_sync_function_runs_in_a_worker_thread() -> None:
    verdict = await decide(fn("f", "which_thread"))
    assert verdict.reason != threading.main_thread().name


async def test_functions_are_resolved_once_per_engine() -> None:
    seen: list[str] = []

    def resolve(ref: str) -> Callable[[dict[str, Any]], Any]:
        seen.append(ref)
        if ref == "bad:ref":
            raise InvalidInput("nope")
        return allow

    engine = PolicyEngine(
        [
            PolicySpec(name="a", type="function", function="good:ref"),
            PolicySpec(name="b", type="function", function="good:ref"),
        ],
        defaults=[PolicySpec(name="c", type="function", function="bad:ref")],
        resolve_function=resolve,
    )
    for _ in range(3):
        assert (await engine.evaluate(call())).action == "DENY"
    assert seen == ["good:ref", "bad:ref"]


# -- the result phase -----------------------------------------------------------------


async def test_allow_with_data_replaces_the_output() -> None:
    verdict = await decide(fn("redact", "redact"), event=result())
    assert verdict == Verdict("ALLOW", "redact", None, "***-output")


async def test_replacements_chain_and_the_last_one_decides() -> None:
    verdict = await decide(
        tools("ok", "allow_tools", "*"),
        fn("redact", "redact"),
        fn("shout", "shout"),
        event=result(),
    )
    assert verdict == Verdict("ALLOW", "shout", "louder", "***-OUTPUT")


async def test_non_string_data_is_left_for_the_caller_to_encode() -> None:
    verdict = await decide(fn("f", "structured"), event=result())
    assert verdict.data == {"lines": 3}
    assert verdict.wire() == {"result": "POLICY_ACTION_ALLOW", "data": {"lines": 3}}


async def test_deny_at_result_phase_withholds_the_output() -> None:
    verdict = await decide(fn("redact", "redact"), fn("nope", "deny"), event=result())
    assert verdict == Verdict("DENY", "nope", "no", "[result withheld by policy nope]")


async def test_ask_at_result_phase_carries_the_replacement() -> None:
    verdict = await decide(fn("redact", "redact"), fn("q", "ask"), event=result())
    assert verdict == Verdict("ASK", "q", "sure?", "***-output")
    assert verdict.resolve(True, result()) == Verdict("ALLOW", "q", "sure?", "***-output")


# -- fail closed ----------------------------------------------------------------------

FAILURES = [
    ("raises", "RuntimeError", "boom on call"),
    ("async_raises", "ValueError", "async boom"),
    ("returns_list", "invalid answer", "returned list, expected a mapping with a 'result'"),
    ("no_opinion", "invalid answer", "returned NoneType, expected a mapping"),
    ("returns_no_result", "invalid answer", "answer has no 'result'"),
    ("returns_extra_key", "invalid answer", "unknown keys ['reasons']"),
    ("returns_bad_reason", "invalid answer", "reason must be a string, got int"),
    ("returns_unserialisable", "invalid answer", "data is not JSON-serialisable"),
    ("returns_unknown", "invalid answer", "unknown result 'MAYBE'"),
    ("NOT_CALLABLE", "cannot load the function", "int is not callable"),
    ("does_not_exist", "cannot load the function", "has no 'does_not_exist'"),
]


@pytest.mark.parametrize(("attr", "error_type", "message"), FAILURES)
async def test_failure_at_call_phase_denies(attr: str, error_type: str, message: str) -> None:
    verdict = await decide(tools("ok", "allow_tools", "*"), fn("f", attr))
    assert verdict.action == "DENY"
    assert verdict.policy_name == "f"
    assert verdict.reason is not None
    assert verdict.reason.startswith("policy f failed: ")
    assert message in verdict.reason
    assert verdict.data is None


@pytest.mark.parametrize(("attr", "error_type", "message"), FAILURES)
async def test_failure_at_result_phase_suppresses_the_output(
    attr: str, error_type: str, message: str
) -> None:
    verdict = await decide(fn("f", attr), event=result())
    assert verdict == Verdict(
        "DENY", "f", f"policy f failed: {error_type}", "[result withheld: policy f failed]"
    )
    assert SECRET not in repr(verdict)


async def test_failures_are_logged_with_the_traceback(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.ERROR, logger="omnigent.core.tools"):
        await decide(fn("f", "raises"))
    (record,) = caplog.records
    assert "policy 'f' failed" in record.getMessage()
    assert record.exc_info is not None
    assert isinstance(record.exc_info[1], RuntimeError)


@pytest.mark.parametrize("event", [call(), result()], ids=["call", "result"])
async def test_bad_reference_fails_closed_at_evaluation(event: PolicyEvent) -> None:
    engine = PolicyEngine([PolicySpec(name="gone", type="function", function="no_such_mod:fn")])
    verdict = await engine.evaluate(event)  # constructing the engine did not raise
    assert verdict.action == "DENY"
    if event.type == PHASE_TOOL_CALL:
        assert verdict.reason is not None
        assert "policy gone failed: cannot load 'no_such_mod:fn'" in verdict.reason
    else:
        assert verdict.data == "[result withheld: policy gone failed]"


async def test_a_resolver_returning_a_non_callable_fails_closed() -> None:
    engine = PolicyEngine([fn("f", "x")], resolve_function=lambda ref: 3)  # type: ignore[arg-type,return-value]
    verdict = await engine.evaluate(call())
    assert verdict.action == "DENY"
    assert engine.check() == [
        ErrorDetail(
            "policies[0].function", "'tests.test_policies:x' resolved to a int, not a callable"
        )
    ]


async def test_cancellation_propagates_through_a_function_policy() -> None:
    started = trio.Event()

    async def forever(event: dict[str, Any]) -> dict[str, Any]:
        started.set()
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    engine = PolicyEngine([fn("slow", "x")], resolve_function=lambda ref: forever)
    with trio.fail_after(5):
        with trio.CancelScope() as scope:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(engine.evaluate, call())
                await started.wait()
                scope.cancel()
    assert scope.cancelled_caught


# -- check and load_function ----------------------------------------------------------


def test_check_reports_every_unloadable_reference() -> None:
    engine = PolicyEngine(
        [fn("ok", "allow"), tools("t", "deny_tools", "*"), fn("gone", "missing_attr")],
        defaults=[PolicySpec(name="d", type="function", function="no_such_mod.sub:fn")],
    )
    problems = engine.check()
    assert [p.loc for p in problems] == ["policies[2].function", "defaults[0].function"]
    assert "has no 'missing_attr'" in problems[0].msg
    assert "no_such_mod" in problems[1].msg
    assert PolicyEngine([fn("ok", "allow")]).check() == []


def test_load_function_forms() -> None:
    assert load_function(f"{HERE}:allow") is allow
    assert load_function(f"{HERE}.allow") is allow
    assert load_function(f"{HERE}:Holder.check") is Holder.check
    assert load_function(f"{HERE}.Holder.check") is Holder.check
    assert load_function("os.path:join") is importlib.import_module("os.path").join


@pytest.mark.parametrize(
    ("ref", "message"),
    [
        ("no_such_mod:fn", "No module named 'no_such_mod'"),
        ("no_such_mod.sub.fn", "no module named 'no_such_mod'"),
        (f"{HERE}:nope", "tests.test_policies has no 'nope'"),
        (f"{HERE}.nope", "has no 'nope'"),
        (f"{HERE}:NOT_CALLABLE", "int is not callable"),
        ("plainname", "bad function reference"),
        ("pkg:", "bad function reference"),
        (":attr", "bad function reference"),
        ("a..b", "bad function reference"),
    ],
)
def test_load_function_errors(ref: str, message: str) -> None:
    with pytest.raises(InvalidInput) as info:
        load_function(ref)
    assert message in str(info.value)


async def test_the_documented_example(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    doc = (Path(__file__).parents[1] / "docs" / "policies.md").read_text()
    example = next(b for b in doc.split("```python")[1:] if "# mypkg/policies.py" in b)
    (tmp_path / "doc_example_policies.py").write_text(example.split("```")[0])
    monkeypatch.syspath_prepend(str(tmp_path))
    engine = PolicyEngine(
        [PolicySpec(name="custom", type="function", function="doc_example_policies:check")]
    )
    wipe = await engine.evaluate(call(tool_input={"command": "rm -rf /"}))
    assert wipe == Verdict("DENY", "custom", "refusing to wipe the disk")
    assert (await engine.evaluate(call(tool_input={"command": "git push"}))).action == "ASK"
    assert await engine.evaluate(call(tool_input={"command": "ls"})) == Verdict("UNSPECIFIED")
    leaked = await engine.evaluate(result(output="password: hunter2\nok"))
    assert leaked == Verdict("ALLOW", "custom", None, "password=***\nok")


def test_load_function_reports_a_broken_module(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "policy_mod_missing_dep.py").write_text(
        "import omnigent_no_such_dependency\ndef fn(event): return None\n"
    )
    (tmp_path / "policy_mod_raises.py").write_text("raise RuntimeError('import-time boom')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(InvalidInput, match="omnigent_no_such_dependency"):
        load_function("policy_mod_missing_dep.fn")
    with pytest.raises(InvalidInput, match="import-time boom") as info:
        load_function("policy_mod_raises:fn")
    assert isinstance(info.value.__cause__, RuntimeError)


# -- verdicts on the wire -------------------------------------------------------------


def test_wire_form() -> None:
    assert Verdict("ALLOW").wire() == {"result": "POLICY_ACTION_ALLOW"}
    assert Verdict("UNSPECIFIED").wire() == {"result": "POLICY_ACTION_UNSPECIFIED"}
    assert Verdict("DENY", "p", "no", "[marker]").wire() == {
        "result": "POLICY_ACTION_DENY",
        "reason": "no",
        "data": "[marker]",
    }
    with pytest.raises(InternalError):
        Verdict("ASK", "p", "sure?").wire()


def test_resolving_an_ask() -> None:
    asked = Verdict("ASK", "ask_shell", "Approve shell")
    assert asked.elicitation_message == "ask_shell: Approve shell"
    assert asked.resolve(True, call()) == Verdict("ALLOW", "ask_shell", "Approve shell")
    assert asked.resolve(False, call()) == Verdict("DENY", "ask_shell", "declined: Approve shell")
    assert asked.resolve(False, result()).data == "[result withheld by policy ask_shell]"
    with pytest.raises(InternalError):
        Verdict("ALLOW").resolve(True, call())


# -- events from the wire -------------------------------------------------------------


def test_parse_valid_events() -> None:
    event = parse_policy_event(
        {
            "type": "PHASE_TOOL_CALL",
            "data": {"tool_name": "t", "tool_input": {"a": 1}, "call_id": "c1"},
            "context": {"k": "v"},
        }
    )
    assert event == PolicyEvent(
        PHASE_TOOL_CALL,
        {"tool_name": "t", "tool_input": {"a": 1}, "call_id": "c1"},
        None,
        {"k": "v"},
    )
    done = parse_policy_event(
        {"type": "PHASE_TOOL_RESULT", "data": {"tool_name": "t", "tool_output": None}}
    )
    assert done.type == PHASE_TOOL_RESULT
    assert done.request_data is None


def details(obj: Any, root: str = "") -> list[tuple[str, str]]:
    with pytest.raises(InvalidInput) as info:
        parse_policy_event(obj, root=root)
    assert str(info.value).startswith("invalid ")
    return [(d.loc, d.msg) for d in info.value.details]


def test_parse_errors_name_the_field() -> None:
    assert details({"data": {"tool_name": "t"}}) == [("type", "required field missing")]
    assert details({"type": "PHASE_NOPE", "data": {"tool_name": "t"}}) == [
        (
            "type",
            "must be one of PHASE_TOOL_CALL, PHASE_TOOL_RESULT, tool_call or tool_result, "
            "got 'PHASE_NOPE'",
        )
    ]
    assert details({"type": "PHASE_TOOL_CALL", "data": []}) == [
        ("data", "expected object, got array")
    ]
    assert details({"type": "PHASE_TOOL_CALL", "data": {}}) == [
        ("data.name", "required field missing")
    ]
    assert details({"type": "PHASE_TOOL_CALL", "data": {"tool_name": 3}}) == [
        ("data.tool_name", "expected string, got number")
    ]
    assert details({"type": "PHASE_TOOL_CALL", "data": {"tool_name": "t", "tool_input": "x"}}) == [
        ("data.tool_input", "expected object, got string")
    ]
    assert details({"type": "PHASE_TOOL_RESULT", "data": {"tool_name": "t"}}) == [
        ("data.result", "required field missing")
    ]
    assert details({"type": "PHASE_TOOL_CALL", "data": {"tool_name": "t", "tool_output": 1}}) == [
        ("data.tool_output", "only valid at PHASE_TOOL_RESULT")
    ]
    assert details(
        {"type": "PHASE_TOOL_CALL", "data": {"tool_name": "t"}, "context": 1, "extra": 2}
    ) == [("context", "expected object, got number"), ("extra", "unknown field")]
    assert details(None) == [("", "expected object")]


def test_parse_collects_every_failure_under_a_root() -> None:
    found = details({"type": 1, "data": {"tool_input": []}, "request_data": "x"}, root="event")
    assert sorted(loc for loc, _ in found) == [
        "event.data.name",
        "event.data.tool_input",
        "event.request_data",
        "event.type",
    ]
    assert details("nope", root="event") == [("event", "expected object")]


def test_events_built_in_python_are_checked() -> None:
    with pytest.raises(InvalidInput) as info:
        PolicyEvent(PHASE_TOOL_CALL, {"tool_input": {}})
    assert info.value.details == (ErrorDetail("data.tool_name", "required string"),)
    with pytest.raises(ValueError):
        PolicyEvent("PHASE_NOPE", {"tool_name": "t"})  # type: ignore[arg-type]


# -- the original omnigent's words ----------------------------------------------------


def test_a_function_gets_the_originals_event() -> None:
    assert call(tool_input={"command": "ls"}).to_dict() == {
        "type": "tool_call",
        "data": {"name": "sys_os_shell", "arguments": {"command": "ls"}},
        "request_data": {},
        "context": {},
    }
    assert result(output="out").to_dict() == {
        "type": "tool_result",
        "data": {"name": "sys_os_shell", "arguments": {}, "result": "out"},
        "request_data": {"name": "sys_os_shell", "args": {}},
        "context": {},
    }
    extra = PolicyEvent(PHASE_TOOL_CALL, {"tool_name": "t", "call_id": "c1"}, {"k": 1}, {"u": 2})
    assert extra.to_dict() == {
        "type": "tool_call",
        "data": {"call_id": "c1", "name": "t", "arguments": {}},
        "request_data": {"k": 1},
        "context": {"u": 2},
    }


def test_the_originals_spelling_parses_to_the_same_event() -> None:
    original = parse_policy_event(
        {
            "type": "PHASE_TOOL_RESULT",
            "target": "",
            "data": {"result": "out"},
            "request_data": {"name": "t", "args": {"a": 1}},
            "context": {},
        }
    )
    own = parse_policy_event(
        {
            "type": "tool_result",
            "data": {"tool_name": "t", "tool_input": {"a": 1}, "tool_output": "out"},
            "request_data": {"name": "t", "args": {"a": 1}},
            "context": {},
        }
    )
    assert original == own
    assert original.data == {"tool_name": "t", "tool_input": {"a": 1}, "tool_output": "out"}


def exits(event: dict[str, Any]) -> dict[str, Any]:
    raise SystemExit(3)


def interrupts(event: dict[str, Any]) -> dict[str, Any]:
    raise KeyboardInterrupt


async def async_exits(event: dict[str, Any]) -> dict[str, Any]:
    raise SystemExit("from the loop")


@pytest.mark.parametrize("event", [call(), result()], ids=["call", "result"])
@pytest.mark.parametrize(
    ("attr", "raised"),
    [("exits", "SystemExit"), ("interrupts", "KeyboardInterrupt"), ("async_exits", "SystemExit")],
)
async def test_a_policy_that_exits_or_interrupts_denies(
    attr: str, raised: str, event: PolicyEvent
) -> None:
    verdict = await decide(tools("ok", "allow_tools", "*"), fn("f", attr), event=event)
    assert verdict.action == "DENY"
    assert verdict.reason is not None
    assert raised in verdict.reason


def exits_on_import_ref(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    (tmp_path / "policy_mod_exits.py").write_text("import sys\nsys.exit('bye')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    return "policy_mod_exits:fn"


async def test_a_module_that_exits_on_import_fails_closed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = PolicyEngine(
        [PolicySpec(name="e", type="function", function=exits_on_import_ref(tmp_path, monkeypatch))]
    )
    verdict = await engine.evaluate(call())
    assert verdict.action == "DENY"
    assert verdict.reason is not None
    assert "SystemExit" in verdict.reason


def test_a_bad_request_data_at_the_result_phase_names_it() -> None:
    bad = {"type": "PHASE_TOOL_RESULT", "data": {"result": 1}, "request_data": {"name": 3}}
    assert details(bad, root="event") == [
        ("event.request_data.name", "expected string, got number")
    ]
    worse = {**bad, "request_data": {"name": "t", "args": "x"}}
    assert details(worse) == [("request_data.args", "expected object, got string")]
    # Without request_data at the result phase, the name must be in data.
    assert details({"type": "PHASE_TOOL_RESULT", "data": {"result": 1}}) == [
        ("data.name", "required field missing")
    ]
