"""The ``loop`` harness against MockLLM: streaming, tools, retries, failures, restarts."""

from __future__ import annotations

import json
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

import omnigent
from omnigent.harnesses.loop import chat_messages
from omnigent.model import (
    FunctionCallItem,
    FunctionCallOutputItem,
    InputText,
    MessageItem,
    OutputText,
    OutputTextDelta,
)
from omnigent.testing import MockLLM, collect_turn, run_turn

from .conftest import all_tasks, statuses, wait_quiet


def loop_spec(base_url: str, **config: Any) -> dict[str, Any]:
    return {
        "name": "looper",
        "prompt": "You are terse.",
        "executor": {
            "type": "omnigent",
            "config": {"harness": "loop", "model": "mock-model", "base_url": base_url, **config},
        },
    }


@pytest.fixture
def mock() -> MockLLM:
    return MockLLM()


@pytest.fixture
async def mock_rt(mock: MockLLM) -> AsyncIterator[omnigent.Runtime]:
    async with (
        httpx.AsyncClient(transport=mock.transport()) as http,
        omnigent.open_runtime(http_client=http) as runtime,
    ):
        yield runtime


async def new_session(rt: omnigent.Runtime, base_url: str = "http://mock/v1", **cfg: Any) -> str:
    agent = await rt.create_agent(loop_spec(base_url, **cfg))
    return (await rt.create_session(agent.id)).id


LIBRARY_YAML = """
name: looper
executor:
  type: omnigent
  config:
    harness: loop
    model: mock-model
    base_url: {url}
"""


async def test_library_example_with_the_loop_harness_over_a_real_socket() -> None:
    mock = MockLLM()
    mock.reply_text("Hello over loopback.")
    async with mock.serve() as url, omnigent.open_runtime(db=None) as rt:
        agent = await rt.create_agent(omnigent.AgentSpec.from_yaml(LIBRARY_YAML.format(url=url)))
        session = await rt.create_session(agent_id=agent.id)
        texts: list[str] = []
        async with rt.subscribe(session.id, after=0) as events:
            await rt.send_message(session.id, "hello")
            async for event in events:
                if event.type == "response.output_text.delta":
                    texts.append(event.to_dict()["delta"])
                if event.type == "session.status" and event.status in (
                    "idle",
                    "failed",
                    "cancelled",
                ):
                    break
    assert "".join(texts) == "Hello over loopback."
    assert mock.requests[0]["messages"][-1] == {"role": "user", "content": "hello"}


async def test_the_provider_configuration_supplies_the_endpoint(
    omnigent_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A spec naming no endpoint, an environment naming none: the provider of
    ``$OMNIGENT_HOME/config.yaml`` that serves ``loop`` is the one asked (issue 14)."""
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    mock = MockLLM()
    mock.reply_text("Hello through the gateway.")
    with trio.fail_after(10):
        async with mock.serve() as url:
            gateway = {"name": "gw", "kind": "gateway", "base_url": url, "harnesses": ["loop"]}
            (omnigent_home / "config.yaml").write_text(json.dumps({"providers": [gateway]}))
            async with omnigent.open_runtime() as rt:
                spec = {"name": "p", "executor": {"config": {"harness": "loop", "model": "m"}}}
                session = await rt.create_session((await rt.create_agent(spec)).id)
                events = await run_turn(rt, session.id, "hello")
    assert statuses(events) == ["running", "idle"]
    assert "".join(e.delta for e in events if isinstance(e, OutputTextDelta)) == (
        "Hello through the gateway."
    )
    assert mock.requests[0]["model"] == "m"


async def test_streams_text_and_records_the_answer(
    mock: MockLLM, mock_rt: omnigent.Runtime
) -> None:
    mock.reply_text("The answer is 42.", chunk_size=4, delay=0.001)  # one read each
    session = await new_session(mock_rt)
    events = await run_turn(mock_rt, session, "question")
    assert statuses(events) == ["running", "idle"]
    deltas = [e.delta for e in events if isinstance(e, OutputTextDelta)]
    assert deltas == ["The ", "answ", "er i", "s 42", "."]
    request = mock.requests[0]
    assert request["model"] == "mock-model"
    assert request["stream"] is True
    assert request["messages"] == [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "question"},
    ]


async def test_the_deltas_of_one_read_are_one_event(
    mock: MockLLM, mock_rt: omnigent.Runtime
) -> None:
    """A burst (the whole answer in one network read, as a buffering gateway sends
    it) is one ``output_text.delta``, not one per model chunk."""
    text = "".join(f"w{i} " for i in range(500))
    mock.reply_text(text, chunk_size=3)  # no delay: one write of ~170 frames
    session = await new_session(mock_rt)
    events = await run_turn(mock_rt, session, "question")
    assert statuses(events) == ["running", "idle"]
    assert [e.delta for e in events if isinstance(e, OutputTextDelta)] == [text]


async def test_tool_calls_run_and_feed_back(mock: MockLLM, mock_rt: omnigent.Runtime) -> None:
    def multiply(a: int, b: int) -> int:
        """Multiply two integers."""
        return a * b

    mock_rt.register_tool(multiply)
    mock.reply_tool_call("multiply", {"a": 6, "b": 7}, call_id="call_1")
    mock.reply_text("It is 42.")
    session = await new_session(mock_rt)
    events = await run_turn(mock_rt, session, "6 times 7?")
    assert statuses(events) == ["running", "idle"]
    offered = [t["function"]["name"] for t in mock.requests[0]["tools"]]
    assert "multiply" in offered
    second = mock.requests[1]["messages"]
    assert second[-2]["tool_calls"][0]["function"] == {
        "name": "multiply",
        "arguments": json.dumps({"a": 6, "b": 7}),
    }
    assert second[-1] == {"role": "tool", "tool_call_id": "call_1", "content": "42"}
    items = (await mock_rt.list_items(session)).data
    assert [i.type for i in items] == [
        "message",
        "function_call",
        "function_call_output",
        "message",
    ]


async def test_rate_limits_are_retried(mock: MockLLM, mock_rt: omnigent.Runtime) -> None:
    mock.reply_error(429, "slow down", retry_after=0.01)
    mock.reply_error(503, "busy", retry_after=0.01)
    mock.reply_text("finally")
    session = await new_session(mock_rt)
    events = await run_turn(mock_rt, session)
    assert statuses(events) == ["running", "idle"]
    assert len(mock.requests) == 3


async def test_a_client_error_fails_the_turn_with_the_endpoint_message(
    mock: MockLLM, mock_rt: omnigent.Runtime
) -> None:
    mock.reply_error(401, "bad key")
    session = await new_session(mock_rt)
    events = await run_turn(mock_rt, session)
    assert statuses(events) == ["running", "failed"]
    assert "401" in events[-1].error.message
    assert "bad key" in events[-1].error.message
    assert events[-1].error.code == "model_endpoint_error"


async def test_an_endpoint_that_refuses_connections_fails_the_turn() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    before = all_tasks()
    async with omnigent.open_runtime() as rt:
        session = await new_session(rt, f"http://127.0.0.1:{port}/v1")
        with trio.fail_after(10):
            events = await run_turn(rt, session)
        await wait_quiet(rt)
    assert statuses(events) == ["running", "failed"]
    assert "refused" in events[-1].error.message
    assert all_tasks() <= before


async def test_a_hanging_model_is_interrupted(mock: MockLLM, mock_rt: omnigent.Runtime) -> None:
    mock.reply_hang()
    session = await new_session(mock_rt)
    async with mock_rt.subscribe(session) as events:
        await mock_rt.send_message(session, "go")
        with trio.fail_after(5):
            while not mock.requests:
                await trio.sleep(0.01)
        with trio.fail_after(1):
            await mock_rt.interrupt(session)
            seen = await collect_turn(events)
    assert statuses(seen) == ["running", "cancelled"]
    await wait_quiet(mock_rt)


async def test_no_model_configured_fails_clearly(mock_rt: omnigent.Runtime) -> None:
    agent = await mock_rt.create_agent({"name": "nomodel", "executor": {"config": {}}})
    session = await mock_rt.create_session(agent.id)
    events = await run_turn(mock_rt, session.id)
    assert "no model is configured" in events[-1].error.message


async def test_model_override_is_sent(mock: MockLLM, mock_rt: omnigent.Runtime) -> None:
    mock.reply_text("ok")
    agent = await mock_rt.create_agent(loop_spec("http://mock/v1"))
    session = await mock_rt.create_session(agent.id, model_override="other-model:7b")
    await run_turn(mock_rt, session.id)
    assert mock.requests[0]["model"] == "other-model:7b"


async def test_max_steps_bounds_a_model_that_never_stops(
    mock: MockLLM, mock_rt: omnigent.Runtime
) -> None:
    for _ in range(3):
        mock.reply_tool_call("nothing", {})
    session = await new_session(mock_rt, max_steps=3)
    events = await run_turn(mock_rt, session)
    assert statuses(events) == ["running", "failed"]
    assert "3 steps" in events[-1].error.message
    assert events[-1].error.code == "max_steps"


@pytest.mark.parametrize(
    ("finish_reason", "code"), [("length", "max_tokens"), ("content_filter", "refusal")]
)
async def test_a_cut_or_filtered_answer_fails_with_its_own_code_and_keeps_its_text(
    mock: MockLLM, mock_rt: omnigent.Runtime, finish_reason: str, code: str
) -> None:
    mock.reply_text("half an ans", finish_reason=finish_reason)
    session = await new_session(mock_rt)
    events = await run_turn(mock_rt, session)
    assert statuses(events) == ["running", "failed"]
    assert events[-1].error.code == code  # type: ignore[union-attr]
    message = (await mock_rt.list_items(session)).data[-1]
    assert isinstance(message, MessageItem) and message.content[0].text == "half an ans"  # type: ignore[union-attr]


async def test_restart_gives_the_model_the_full_history_exactly_once(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'restart.db'}"
    mock = MockLLM()
    mock.reply_text("first answer")
    mock.reply_text("second answer")
    async with httpx.AsyncClient(transport=mock.transport()) as http:
        async with omnigent.open_runtime(db=db, http_client=http) as rt:
            session = await new_session(rt)
            await run_turn(rt, session, "first question")
        async with omnigent.open_runtime(db=db, http_client=http) as rt:
            events = await run_turn(rt, session, "second question")
            assert statuses(events) == ["running", "idle"]
            items = (await rt.list_items(session)).data
    assert mock.requests[1]["messages"] == [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "first question"},
        {"role": "assistant", "content": "first answer"},
        {"role": "user", "content": "second question"},
    ]
    assert [i.type for i in items] == ["message"] * 4


def test_chat_messages_answers_interrupted_tool_calls() -> None:
    items = [
        MessageItem(role="user", content=(InputText("hi"),)),
        MessageItem(role="assistant", content=(OutputText("let me look"),)),
        FunctionCallItem(call_id="c1", name="look", arguments="{}", status="completed"),
        FunctionCallOutputItem(call_id="c1", output="found"),
        FunctionCallItem(call_id="c2", name="look", arguments="{}"),
    ]
    messages = chat_messages("", items)
    assert messages[1]["tool_calls"][0]["id"] == "c1"
    assert messages[2] == {"role": "tool", "tool_call_id": "c1", "content": "found"}
    assert messages[3]["role"] == "assistant"
    assert messages[3]["content"] is None
    assert messages[4]["tool_call_id"] == "c2"
    assert messages[4]["content"].startswith("Error: the tool call was interrupted")
