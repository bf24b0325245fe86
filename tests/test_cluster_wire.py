"""Typed calls on live work, and the one place they become JSON (issue 22, core B).

In one process a placed call is an object awaited as it is — nothing is serialised
(a runtime on SQLite runs every turn, approval and stop with the wire disabled). A
call forwarded to another server crosses as JSON through ``CallWire``: every placed
call and its answer round-trips to an equal value, an error comes back as its own
class, and what does not fit — another wire version, an unknown call, arguments or
an answer of the wrong shape, text that is not JSON — is refused with an
``InternalError`` saying which, and logged, never guessed at.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
import trio

import omnigent
from omnigent.core.asking import Resolution
from omnigent.core.cluster import WIRE_VERSION, CallWire, Moved
from omnigent.core.runtime import _placed_calls as placed
from omnigent.errors import InternalError, InvalidInput, SessionNotFound
from omnigent.model import (
    ElicitationParams,
    ElicitationRequest,
    InputText,
    MessageItem,
)
from omnigent.testing import collect_turn, scripted_agent

from .conftest import statuses

WIRE = placed.PLACED_WIRE
PARAMS = ElicitationParams(mode="form", message="ok?", phase="tool_call", tool_name="x")
REQUEST = ElicitationRequest(elicitation_id="elicit_1", params=PARAMS).stamped(
    session_id="conv_1", event_id=7, created_at=1.5
)

# Every placed call, with an answer of its type.
CALLS: list[tuple[Any, Any]] = [
    (placed.Deliver(MessageItem(role="user", content=(InputText(text="hi"),))), "buffered"),
    (placed.Interrupt(), True),
    (placed.Stop(), None),
    (placed.StopTree(("conv_1", "conv_2")), None),
    (placed.Resolve("elicit_1", "accept", {"answer": [1, "two"]}), False),
    (placed.HoldElicitation(PARAMS), "elicit_2"),
    (placed.Elicit(PARAMS, mark_waiting=True), Resolution("accept", {"ok": True})),
    (placed.Announce(), None),
    (placed.Pending(), (REQUEST,)),
    (placed.Visible("elicit_1"), REQUEST),
    (placed.Visible("elicit_9"), None),
]


@pytest.mark.parametrize(("call", "answer"), CALLS, ids=lambda c: type(c).__name__)
def test_every_placed_call_and_its_answer_cross_the_wire_unchanged(call: Any, answer: Any) -> None:
    assert call.name in WIRE
    decoded, root = WIRE.decode_call(call.name, WIRE.encode_call(call, "conv_root"))
    assert (decoded, root) == (call, "conv_root")
    assert WIRE.decode_answer(call, WIRE.encode_value(call, answer)) == answer


def test_an_error_comes_back_as_its_own_class_and_moved_as_moved() -> None:
    call = placed.Interrupt()
    with pytest.raises(SessionNotFound, match="conv_9"):
        WIRE.decode_answer(call, WIRE.encode_error(SessionNotFound("conv_9")))
    refused = InvalidInput.at("data.content[0].text", "expected string")
    with pytest.raises(InvalidInput) as caught:
        WIRE.decode_answer(call, WIRE.encode_error(refused))
    assert [(d.loc, d.msg) for d in caught.value.details] == [
        ("data.content[0].text", "expected string")
    ]
    with pytest.raises(Moved):
        WIRE.decode_answer(call, WIRE.encode_moved())


def _other_version(text: str) -> str:
    body = json.loads(text)
    body["v"] = WIRE_VERSION + 1
    return json.dumps(body)


def test_what_does_not_fit_the_wire_is_refused_and_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.ERROR)
    call = placed.Resolve("elicit_1", "accept")
    text = WIRE.encode_call(call, "conv_root")
    wrong_shape = json.dumps({"v": WIRE_VERSION, "root": "conv_root", "args": {"action": 3}})
    cases = {
        "another version": (lambda: WIRE.decode_call(call.name, _other_version(text))),
        "unknown call": (lambda: WIRE.decode_call("reboot", text)),
        "wrong shape": (lambda: WIRE.decode_call(call.name, wrong_shape)),
        "not json": (lambda: WIRE.decode_call(call.name, "{oops")),
        "no root": (lambda: WIRE.decode_call(call.name, json.dumps({"v": WIRE_VERSION}))),
        "answer of another version": (
            lambda: WIRE.decode_answer(call, _other_version(WIRE.encode_value(call, True)))
        ),
        "answer of the wrong shape": (
            lambda: WIRE.decode_answer(call, json.dumps({"v": WIRE_VERSION, "ok": "yes"}))
        ),
        "an answer that says nothing": (
            lambda: WIRE.decode_answer(call, json.dumps({"v": WIRE_VERSION}))
        ),
    }
    for case, decode in cases.items():
        caplog.clear()
        with pytest.raises(InternalError) as refused:
            decode()
        assert "another server sent" in refused.value.message, case
        assert "another process sent" in caplog.text, case
    with pytest.raises(InternalError, match="wire version 2, where this server speaks 1"):
        WIRE.decode_call(call.name, _other_version(text))


def test_two_calls_of_one_name_are_refused() -> None:
    with pytest.raises(ValueError, match="interrupt"):
        CallWire([placed.Interrupt, placed.Interrupt])


async def test_in_one_process_nothing_crosses_the_wire(monkeypatch: pytest.MonkeyPatch) -> None:
    """A message, an approval and an interrupt on a runtime that owns its database
    run as typed calls: the wire is never used (it raises here)."""

    def unused(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a call was serialised in one process")

    for name in ("encode_call", "decode_call", "encode_value", "decode_answer"):
        monkeypatch.setattr(CallWire, name, unused)
    spec = scripted_agent(script=[{"call": "sys_os_read", "args": {"path": "x"}}, {"sleep": 30}])
    spec["policies"] = [{"name": "ask", "type": "ask_tools", "tools": ["sys_os_read"]}]
    with trio.fail_after(10):
        async with omnigent.open_runtime() as rt:
            session = (await rt.create_session((await rt.create_agent(spec)).id)).id
            async with rt.subscribe(session) as events:
                await rt.send_message(session, "go")
                async for event in events:
                    if isinstance(event, ElicitationRequest):
                        break
                snapshot = await rt.get_session(session)
                assert [p.elicitation_id for p in snapshot.pending_elicitations] == [
                    event.elicitation_id
                ]
                assert await rt.resolve_elicitation(session, event.elicitation_id, "decline")
                assert await rt.interrupt(session)
                turn = await collect_turn(events)
    assert statuses(turn)[-1] == "cancelled"
