"""The runtime's side of the external harness protocol, without I/O."""

from __future__ import annotations

import json
from typing import Any

import pytest

from omnigent.errors import HarnessError
from omnigent.harnesses.base import ToolSchema, TurnRequest
from omnigent.harnesses.external._protocol import (
    FrameReader,
    elicitation_params,
    error_message,
    injection_body,
    turn_body,
)
from omnigent.model import InputText, MessageItem
from omnigent.spec import AgentSpec


def frame(data: dict[str, Any], event: str | None = None) -> bytes:
    head = f"event: {event or data['type']}\n"
    return f"{head}data: {json.dumps(data)}\n\n".encode()


def delta(text: str, item: str = "m") -> bytes:
    return frame({"type": "response.output_text.delta", "item_id": item, "delta": text})


def test_deltas_that_arrive_together_are_coalesced() -> None:
    reader = FrameReader()
    frames = reader.feed(delta("a") + delta("b") + delta("c", "other") + delta("d", "other"))
    assert [(f["item_id"], f["delta"]) for f in frames] == [("m", "ab"), ("other", "cd")]


def test_frames_split_anywhere_are_put_back_together() -> None:
    stream = delta("hello ") + frame({"type": "response.completed"}) + delta("x")
    for cut in range(1, len(stream)):
        reader = FrameReader()
        got = reader.feed(stream[:cut]) + reader.feed(stream[cut:])
        texts = [f.get("delta") for f in got if f["type"] == "response.output_text.delta"]
        assert "".join(t for t in texts if t) == "hello x"
        assert [f["type"] for f in got].count("response.completed") == 1


def test_crlf_comments_and_done_are_handled() -> None:
    reader = FrameReader()
    raw = b": ping\r\n\r\n" + delta("a").replace(b"\n", b"\r\n") + b"data: [DONE]\n\n"
    assert [f["delta"] for f in reader.feed(raw)] == ["a"]


def test_a_delta_between_other_frames_is_not_merged_across_them() -> None:
    item = {"type": "response.output_item.done", "item": {}}
    frames = FrameReader().feed(delta("a") + frame(item) + delta("b"))
    assert [f["type"] for f in frames] == [
        "response.output_text.delta",
        "response.output_item.done",
        "response.output_text.delta",
    ]


@pytest.mark.parametrize("payload", [b"data: not json\n\n", b"data: [1, 2]\n\n"])
def test_a_bad_frame_is_a_harness_error(payload: bytes) -> None:
    with pytest.raises(HarnessError):
        FrameReader().feed(payload)


def test_an_endless_frame_is_refused() -> None:
    reader = FrameReader()
    with pytest.raises(HarnessError, match="8 MiB"):
        for _ in range(9):
            reader.feed(b"data: " + b"x" * (1 << 20))


def test_bodies() -> None:
    message = MessageItem(role="user", content=(InputText("hi"),), id="item_1")
    request = TurnRequest(
        session_id="conv_1",
        response_id="resp_1",
        turn_number=0,
        history=(),
        input=(message,),
        instructions="be brief",
        model="m",
        tools=(ToolSchema("t", "a tool", {"type": "object"}),),
        spec=AgentSpec(name="a"),
    )
    body = turn_body(request)
    assert body["type"] == "message" and body["role"] == "user"
    assert body["content"] == [
        {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "hi"}],
            "id": "item_1",
            "status": "completed",
        }
    ]
    assert body["tools"] == [
        {"type": "function", "name": "t", "description": "a tool", "parameters": {"type": "object"}}
    ]
    assert body["model"] == "m" and body["instructions"] == "be brief"
    assert injection_body([message])["content"] == body["content"]


def test_elicitation_params_and_errors() -> None:
    params = elicitation_params({"message": "ok?", "mode": "url", "url": "https://x", "phase": 3})
    assert (params.mode, params.url, params.phase) == ("url", "https://x", "harness_elicitation")
    with pytest.raises(HarnessError):
        elicitation_params({"mode": "form"})
    assert error_message({"error": {"message": "boom"}}, "d") == "boom"
    assert error_message({"response": {"error": "bad"}}, "d") == "bad"
    assert error_message({}, "d") == "d"
