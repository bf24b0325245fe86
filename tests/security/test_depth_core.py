"""The one depth limit, at the library's own boundaries (issue 9).

HTTP bodies are checked as they are decoded; the same limit holds for what the Python
API takes, so no value deep enough to exhaust the recursion limit reaches an encoder,
``deepcopy`` or cattrs inside a session actor.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import trio

import omnigent
from omnigent.core import elicitation_params
from omnigent.errors import HarnessError, InvalidInput, SpecError
from omnigent.harnesses.base import TurnContext, TurnRequest
from omnigent.harnesses.external._protocol import FrameReader
from omnigent.model import MAX_DEPTH, check_depth, loads
from omnigent.spec import AgentSpec, load_yaml
from omnigent.testing import RecordingHarness, run_turn, scripted_agent

from ..conftest import statuses


def deep(levels: int, leaf: Any = 1) -> Any:
    value = leaf
    for _ in range(levels):
        value = {"a": value}
    return value


def test_check_depth_counts_containers_and_names_the_path() -> None:
    check_depth(deep(MAX_DEPTH))
    check_depth([[[]]], limit=3)
    with pytest.raises(InvalidInput) as caught:
        check_depth({"x": [deep(MAX_DEPTH)]}, loc="body")
    assert caught.value.details[0].loc == "body.x[0]" + ".a" * (MAX_DEPTH - 2)
    with pytest.raises(SpecError):
        check_depth(deep(100), error=SpecError)
    # Iterative: a value far past the recursion limit is refused, not a RecursionError.
    very = []
    for _ in range(100_000):
        very = [very]
    with pytest.raises(InvalidInput):
        check_depth(very)
    long_key = {"k" * 10_000: deep(MAX_DEPTH)}
    with pytest.raises(InvalidInput) as caught:
        check_depth(long_key)
    assert len(caught.value.details[0].loc) < 400


def test_decoders_and_specs_refuse_deep_values() -> None:
    with pytest.raises(InvalidInput) as caught:
        loads('{"metadata": ' + '{"a": ' * 100 + "1" + "}" * 101)
    assert caught.value.details[0].loc.startswith("metadata.a.a")
    with pytest.raises(SpecError) as spec_error:
        AgentSpec(name="x", metadata=deep(100))
    assert spec_error.value.details[0].loc.startswith("metadata.a")
    with pytest.raises(SpecError):
        AgentSpec.from_dict({"name": "x", "metadata": deep(500)})
    with pytest.raises(SpecError) as yaml_error:
        load_yaml("a: " + "[" * 500 + "]" * 500)
    assert yaml_error.value.details[0].loc.startswith("a[0][0]")


def test_the_harness_protocol_refuses_deep_frames() -> None:
    # A frame from an external harness deep enough to break the encoder later fails
    # the turn with a clear harness error now.
    for payload in (json.dumps(deep(100)).encode(), b"[" * 100_000 + b"]" * 100_000):
        with pytest.raises(HarnessError, match="nested deeper than 64 levels"):
            FrameReader().feed(b"data: " + payload + b"\n\n")
    assert FrameReader().feed(
        b'data: {"type": "x", "d": ' + json.dumps(deep(60)).encode() + b"}\n\n"
    )


async def test_the_runtime_refuses_deep_values_and_its_sessions_keep_working(
    rt: omnigent.Runtime,
) -> None:
    with trio.fail_after(10):
        with pytest.raises(SpecError):
            await rt.create_agent({**scripted_agent("d"), "metadata": deep(500)})
        agent = await rt.create_agent(scripted_agent("bot", [{"say": "fine"}]))
        session = await rt.create_session(agent.id)
        schema = elicitation_params("m", "mcp_elicitation", requestedSchema=deep(500))
        with pytest.raises(InvalidInput) as caught:
            await rt.hold_elicitation(session.id, schema)
        assert caught.value.details[0].loc.startswith("params.requestedSchema.a")
        tool_input = elicitation_params("m", "permission_request", tool_input=deep(500))
        with pytest.raises(InvalidInput):
            await rt.elicit(session.id, tool_input)
        with pytest.raises(InvalidInput):
            await rt.resolve_elicitation(session.id, "elicit_x", "accept", deep(500))
        with pytest.raises(InvalidInput):
            await rt.post_event(
                session.id, "mcp_elicitation", {"message": "m", "requestedSchema": deep(500)}
            )
        event = {"type": "PHASE_TOOL_CALL", "data": {"tool_name": "x", "tool_input": deep(500)}}
        with pytest.raises(InvalidInput) as caught:
            await rt.evaluate_policy(session.id, event)
        assert caught.value.details[0].loc.startswith("event.data.tool_input.a")
        with pytest.raises(InvalidInput):
            await rt.send_message(session.id, [deep(500)])
        assert statuses(await run_turn(rt, session.id)) == ["running", "idle"]
        assert (await rt.get_session(session.id)).pending_elicitations == ()


async def test_deep_tool_arguments_are_an_error_the_model_reads(rt: omnigent.Runtime) -> None:
    outputs: list[str] = []

    async def body(request: TurnRequest, ctx: TurnContext) -> None:
        outputs.append(await ctx.call_tool("echo", deep(200)))
        outputs.append(await ctx.call_tool("echo", '{"x": ' * 300 + "1" + "}" * 300))
        outputs.append(await ctx.call_tool("echo", {"x": 1}))

    def echo(x: Any) -> str:
        return f"echo {x}"

    recorder = RecordingHarness(body)
    rt.register_harness("deep-caller", recorder.factory)
    rt.register_tool(echo)
    agent = await rt.create_agent(scripted_agent("caller", harness="deep-caller"))
    session = await rt.create_session(agent.id)
    with trio.fail_after(10):
        assert statuses(await run_turn(rt, session.id)) == ["running", "idle"]
    assert outputs[0].startswith("Error: arguments are nested deeper than 64 levels")
    assert outputs[1].startswith("Error: arguments are nested deeper than 64 levels")
    assert outputs[2] == "echo 1"
