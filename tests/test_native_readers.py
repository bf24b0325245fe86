"""The pure halves of the pi, openai-agents, Claude Code and Codex harnesses: what their
programs say, read into the relay's actions (usage included), and the conversation as
the Agents SDK's input."""

from __future__ import annotations

from typing import Any

from omnigent.harnesses.agents_sdk._protocol import (
    CheckRequest,
    ChildReader,
    Fatal,
    Ready,
    ToolRequest,
    sdk_input,
)
from omnigent.harnesses.claude._stream import StreamReader
from omnigent.harnesses.codex._stream import CodexReader
from omnigent.harnesses.native import Call, CallOutput, EndMessage, Finished, Say, Used
from omnigent.harnesses.pi._protocol import Answered, PiReader, prompt_command
from omnigent.model import (
    FunctionCallItem,
    FunctionCallOutputItem,
    InputImage,
    InputText,
    MessageItem,
    OutputText,
    Usage,
)


def assistant(stop: str = "stop", error: str | None = None, text: str = "") -> dict[str, Any]:
    message: dict[str, Any] = {
        "role": "assistant",
        "content": [{"type": "text", "text": text}] if text else [],
        "stopReason": stop,
    }
    if error is not None:
        message["errorMessage"] = error
    return message


def delta(text: str) -> dict[str, Any]:
    event = {"type": "text_delta", "contentIndex": 0, "delta": text, "partial": {}}
    return {"type": "message_update", "message": {}, "assistantMessageEvent": event}


def test_pi_text_tools_and_the_end_become_actions() -> None:
    reader = PiReader()
    events = [
        {"type": "response", "id": "omnigent_1", "command": "prompt", "success": True},
        {"type": "agent_start"},
        {"type": "message_start", "message": {"role": "user", "content": []}},
        {"type": "message_start", "message": assistant()},
        delta("Hel"),
        delta("lo."),
        {"type": "message_end", "message": assistant("toolUse", text="Hello.")},
        {
            "type": "tool_execution_start",
            "toolCallId": "c1",
            "toolName": "bash",
            "args": {"command": "ls"},
        },
        {
            "type": "tool_execution_end",
            "toolCallId": "c1",
            "toolName": "bash",
            "result": {"content": [{"type": "text", "text": "no_rm: never"}]},
            "isError": True,
        },
        {"type": "message_start", "message": assistant()},
        {"type": "message_end", "message": assistant(text="Whole, unstreamed.")},
        {"type": "agent_end", "messages": []},
    ]
    assert reader.feed(events) == [
        Answered("omnigent_1", "prompt", True),
        Say("pi_message_1", "Hello."),  # a burst of one message's deltas is one Say
        EndMessage(),
        Call("c1", "bash", '{"command": "ls"}'),
        CallOutput("c1", "Error: no_rm: never"),
        Say("pi_message_2", "Whole, unstreamed."),
        EndMessage(),
        Finished(None),
    ]


def test_pi_a_model_error_or_an_abort_ends_the_turn_with_it() -> None:
    reader = PiReader()
    failed = reader.feed(
        [
            {"type": "message_start", "message": assistant()},
            {"type": "message_end", "message": assistant("error", "429 rate limited")},
            {"type": "agent_end"},
        ]
    )
    assert failed[-1] == Finished("pi: 429 rate limited")
    aborted = reader.feed(
        [
            {"type": "message_start", "message": assistant()},
            delta("par"),
            {"type": "message_end", "message": assistant("aborted", "Request was aborted")},
            {"type": "agent_end"},
        ]
    )
    assert aborted[-1] == Finished("pi aborted the turn")
    refused = reader.feed(
        [{"type": "response", "id": "x", "command": "prompt", "success": False, "error": "busy"}]
    )
    assert refused == [Answered("x", "prompt", False, None, "busy")]


def test_pi_usage_counts_the_whole_prompt_as_input_and_cache_reads_as_cached() -> None:
    reader = PiReader()
    usage = {"input": 10, "cacheRead": 300, "cacheWrite": 25, "output": 42, "totalTokens": 377}
    message = {**assistant(text="Hi."), "model": "mock-model", "usage": usage}
    actions = reader.feed([{"type": "message_end", "message": message}])
    assert [a for a in actions if isinstance(a, Used)] == [
        Used(Usage.of_call(335, 42, 300), "mock-model")
    ]
    # pi's zeros (no usage reported, an aborted call) and a malformed usage count nothing.
    for usage in ({"input": 0, "cacheRead": 0, "cacheWrite": 0, "output": 0}, {"input": "9"}):
        message = {**assistant(text="Hi."), "usage": usage}
        actions = reader.feed([{"type": "message_end", "message": message}])
        assert not [a for a in actions if isinstance(a, Used)]


def test_pi_prompts_carry_the_preamble_text_and_images() -> None:
    message = MessageItem(
        role="user",
        content=(
            InputText("look"),
            InputImage(image_url="data:image/png;base64,AAAA"),
            InputImage(image_url="https://example.com/a.png"),
        ),
    )
    command = prompt_command("omnigent_3", [message], "Earlier: hi")
    assert command == {
        "id": "omnigent_3",
        "type": "prompt",
        "message": "Earlier: hi\n\nlook\n\n(an image at https://example.com/a.png)",
        "images": [{"type": "image", "mimeType": "image/png", "data": "AAAA"}],
    }


def test_the_childs_lines_become_actions_and_requests() -> None:
    reader = ChildReader()
    lines = [
        {"type": "ready", "agent": "assistant"},
        {"type": "delta", "message": 1, "text": "Check"},
        {"type": "delta", "message": 1, "text": "ing."},
        {"type": "message", "message": 1, "text": "Checking."},
        {"type": "call", "call_id": "c1", "name": "get_weather", "arguments": '{"city": "x"}'},
        {
            "type": "check",
            "id": "r1",
            "call_id": "c1",
            "name": "get_weather",
            "arguments": '{"city": "x"}',
            "needs_approval": True,
        },
        {"type": "output", "call_id": "c1", "output": "sunny"},
        {
            "type": "tool_request",
            "id": "r2",
            "call_id": "c2",
            "name": "sys_read_inbox",
            "arguments": "{}",
        },
        {"type": "message", "message": 2, "text": "Done."},
        {"type": "done", "output": None},
    ]
    assert reader.feed(lines) == [
        Ready("assistant"),
        Say("agent_message_1", "Checking."),
        EndMessage(),
        Call("c1", "get_weather", '{"city": "x"}'),
        CheckRequest("r1", "c1", "get_weather", '{"city": "x"}', True),
        CallOutput("c1", "sunny"),
        ToolRequest("r2", "c2", "sys_read_inbox", "{}"),
        Say("agent_message_2", "Done."),
        EndMessage(),
        Finished(None),
    ]
    assert reader.feed([{"type": "done", "output": '{"answer": 3}'}]) == [
        Say("agent_final", '{"answer": 3}'),
        EndMessage(),
        Finished(None),
    ]
    assert reader.feed([{"type": "failed", "error": "MaxTurnsExceeded: 50"}]) == [
        Finished("the agent failed: MaxTurnsExceeded: 50")
    ]
    assert reader.feed([{"type": "fatal", "error": "no such module"}]) == [Fatal("no such module")]


def test_the_childs_usage_lines_become_used() -> None:
    reader = ChildReader()
    line = {"type": "usage", "model": "mock-model", "input": 120, "cached": 100, "output": 7}
    assert reader.feed([line]) == [Used(Usage.of_call(120, 7, 100), "mock-model")]
    zeros = {"type": "usage", "model": None, "input": 0, "cached": 0, "output": 0}
    assert reader.feed([zeros, {"type": "usage", "input": "5"}]) == []


def test_the_conversation_as_the_sdks_input_items() -> None:
    items = [
        MessageItem(role="user", content=(InputText("hi"),)),
        MessageItem(role="assistant", content=(OutputText("Hello."),)),
        FunctionCallItem(call_id="c1", name="get_weather", arguments='{"city": "x"}'),
        FunctionCallOutputItem(call_id="c1", output="sunny"),
        FunctionCallItem(call_id="c2", name="write_note", arguments="{}"),  # interrupted
        FunctionCallOutputItem(call_id="c9", output="an orphan"),
        MessageItem(
            role="user",
            content=(InputText("see"), InputImage(image_url="data:image/png;base64,AA")),
        ),
    ]
    assert sdk_input("Be brief.", items) == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "Hello."},
        {
            "type": "function_call",
            "call_id": "c1",
            "name": "get_weather",
            "arguments": '{"city": "x"}',
        },
        {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
        {"type": "function_call", "call_id": "c2", "name": "write_note", "arguments": "{}"},
        {
            "type": "function_call_output",
            "call_id": "c2",
            "output": "Error: the tool call was interrupted before it returned",
        },
        {
            "role": "user",
            "content": [
                {"type": "input_text", "text": "see"},
                {"type": "input_image", "image_url": "data:image/png;base64,AA", "detail": "auto"},
            ],
        },
    ]


def test_claude_codes_usage_counts_cache_reads_and_writes_as_input() -> None:
    reader = StreamReader()

    def event(body: dict[str, Any]) -> dict[str, Any]:
        return {"type": "stream_event", "event": body}

    usage = {
        "input_tokens": 10,
        "cache_read_input_tokens": 300,
        "cache_creation_input_tokens": 25,
        "output_tokens": 1,
    }
    start = {"type": "message_start", "message": {"id": "m1", "model": "claude-x", "usage": usage}}
    done = {"type": "message_delta", "usage": {"output_tokens": 42}}
    used = [a for a in reader.feed([event(start), event(done)]) if isinstance(a, Used)]
    assert used == [Used(Usage.of_call(335, 42, 300), "claude-x")]
    assert [a for a in reader.feed([event(done)]) if isinstance(a, Used)] == []  # no open call


def test_codex_usage_is_counted_once_per_change_of_the_total() -> None:
    reader = CodexReader("t1")

    def updated(total: int, last: tuple[int, int, int]) -> dict[str, Any]:
        breakdown = {"inputTokens": last[0], "outputTokens": last[1], "cachedInputTokens": last[2]}
        usage = {"total": {"totalTokens": total}, "last": breakdown}
        params = {"threadId": "t1", "turnId": "u1", "tokenUsage": usage}
        return {"jsonrpc": "2.0", "method": "thread/tokenUsage/updated", "params": params}

    actions = reader.feed([updated(120, (100, 20, 80)), updated(120, (100, 20, 80))])
    assert actions == [Used(Usage.of_call(100, 20, 80))]  # the repeat is not counted again
    assert reader.feed([updated(300, (150, 30, 100))]) == [Used(Usage.of_call(150, 30, 100))]
