"""Argument handling of the orchestration tools (pure): every refusal names its fix."""

from __future__ import annotations

import json
from typing import Any

import pytest

from omnigent.core.tools._agent_args import (
    CreateArgs,
    SendArgs,
    TypedError,
    closed_title,
    is_closed,
    parse_cancel,
    parse_create,
    parse_history,
    parse_level,
    parse_send,
    refusal,
    split_title,
    visible_title,
)
from omnigent.core.tools.session._agent_schemas import AGENT_TOOL_SCHEMAS, send_schema
from omnigent.tools import ToolError


def test_send_in_both_modes() -> None:
    assert parse_send({"agent": "w", "title": "t", "args": "go"}) == SendArgs(
        "go", agent="w", title="t"
    )
    assert parse_send({"agent": "w", "args": {"input": "go", "model": " gpt-5 "}}) == SendArgs(
        "go", model="gpt-5", agent="w"
    )
    assert parse_send({"session_id": "conv_1", "args": {"input": "go", "purpose": "review"}}) == (
        SendArgs("go", session_id="conv_1", purpose="review")
    )


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        ("not an object", "arguments must be an object"),
        ({"agent": "w", "title": "t"}, "'args' is required"),
        ({"agent": "w", "args": "go", "extra": 1}, "unknown argument 'extra'"),
        ({"agent": "", "args": "go"}, "'agent' must not be empty"),
        ({"agent": "w", "title": 3, "args": "go"}, "'title' must be a string"),
        ({"agent": "w", "title": "x" * 201, "args": "go"}, "at most 200 characters"),
        ({"agent": "w", "title": "a\nb", "args": "go"}, "must not contain control characters"),
        ({"agent": "w", "session_id": "c", "args": "go"}, "both 'session_id' and 'agent'/'title'"),
        ({"title": "t", "session_id": "c", "args": "go"}, "both 'session_id' and 'agent'/'title'"),
        ({"args": "go"}, "needs 'agent'"),
        ({"title": "t", "args": "go"}, "needs 'agent' with 'title'"),
        ({"agent": "w", "args": 7}, "'args' must be the message (a string) or an object"),
        ({"agent": "w", "args": {"model": "gpt-5"}}, "'args.input' must be the message"),
        ({"agent": "w", "args": {"input": "go", "files": []}}, "unknown key 'files' in 'args'"),
        ({"agent": "w", "args": {"input": "go", "purpose": 1}}, "'args.purpose' is a string"),
        ({"agent": "w", "args": {"input": "go", "model": "a b"}}, "is not a model id"),
        ({"agent": "w", "args": {"input": "go", "model": None}}, "must be a string, got null"),
        ({"agent": "w", "args": "\n\t "}, "needs a non-empty message"),
        ({"agent": "w", "args": "x" * 200_001}, "over 200000 characters"),
        (
            {"session_id": "conv_1", "args": {"input": "go", "model": "gpt-5"}},
            "Continue without 'model' to message session 'conv_1', or close the session",
        ),
    ],
)
def test_bad_sends(raw: Any, says: str) -> None:
    with pytest.raises(ToolError) as caught:
        parse_send(raw)
    assert caught.value.render().startswith("Error: ")
    assert says in caught.value.message, caught.value.message


def test_create() -> None:
    assert parse_create({"agent_id": "a"}) == CreateArgs(agent_id="a")
    assert parse_create({"config_path": "x.yaml", "message": "", "model": "m1"}) == CreateArgs(
        config_path="x.yaml", model="m1"
    )
    for raw, says in [
        ({}, "exactly one of 'agent_id'"),
        ({"agent_id": "a", "config_path": "b"}, "exactly one of 'agent_id'"),
        ({"agent_id": "a", "model": 1}, "'model' must be a string"),
        ({"agent_id": "a", "message": 1}, "'message' must be a string"),
        ({"agent_id": "a", "bogus": 1}, "unknown argument 'bogus'"),
    ]:
        with pytest.raises(ToolError) as caught:
            parse_create(raw)
        assert says in caught.value.message


def test_history_cancel_and_level() -> None:
    assert parse_history({"conversation_id": "c"}) == ("c", 10)
    assert parse_history({"conversation_id": "c", "tail_items": 500}) == ("c", 50)
    for raw in (
        {},
        {"conversation_id": "c", "tail_items": 0},
        {"conversation_id": "c", "tail_items": "3"},
    ):
        with pytest.raises(ToolError):
            parse_history(raw)
    assert parse_cancel({"task_id": "conv_1"}) == "conv_1"
    with pytest.raises(ToolError):
        parse_cancel({"handle_id": "x"})
    assert [parse_level(v) for v in ("read", "edit", "manage", 1, 2, 3)] == [1, 2, 3, 1, 2, 3]
    for bad in ("owner", 0, 4, True, None):
        with pytest.raises(ToolError):
            parse_level(bad)


def test_refusals_are_the_originals_json_objects() -> None:
    typed = TypedError("session_closed", ("conversation_id", "conv_1"), "it is closed")
    assert json.loads(refusal(typed)) == {
        "error": "session_closed",
        "conversation_id": "conv_1",
        "message": "it is closed",
    }
    bare = TypedError("session_not_found", ("session_id", "conv_2"))
    assert json.loads(refusal(bare)) == {"error": "session_not_found", "session_id": "conv_2"}
    hinted = TypedError("task_not_found", ("task_id", "t"), extra={"hint": "h"})
    assert json.loads(refusal(hinted)) == {"error": "task_not_found", "task_id": "t", "hint": "h"}
    assert json.loads(refusal(ToolError("no such thing"))) == {"error": "no such thing"}
    assert typed.message == "session_closed: it is closed"


def test_session_names() -> None:
    assert split_title("researcher:auth") == ("researcher", "auth")
    assert split_title("researcher:a:b") == ("researcher", "a:b")
    assert split_title("plain") == (None, "plain")
    assert split_title(None) == (None, None)
    closed = closed_title("researcher:auth", "conv_1")
    assert closed == "researcher:auth:closed:conv_1"
    assert visible_title(closed) == "researcher:auth" and split_title(closed) == (
        "researcher",
        "auth",
    )
    assert is_closed({}, closed) and is_closed({"omnigent.closed": "true"}, "x")
    assert not is_closed({"omnigent.closed": "false"}, "researcher:auth")


def test_schemas_name_what_the_tools_take() -> None:
    schema = send_schema({"w": "the worker"})
    assert set(schema["parameters"]["properties"]) == {"agent", "title", "session_id", "args"}
    assert schema["parameters"]["required"] == ["args"]
    assert set(send_schema({})["parameters"]["properties"]) == {"session_id", "args"}
    for name, tool in AGENT_TOOL_SCHEMAS.items():
        assert tool["description"] and tool["parameters"]["additionalProperties"] is False, name
