"""The original omnigent's wire where it is pinned: its ``policies/evaluate`` bodies and
its function policies, unchanged; and failures that keep internal causes off the wire."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
import trio

import omnigent
from omnigent.harnesses.base import TurnContext, TurnRequest

from .http_helpers import HTTPX_GENERATORS, Server, open_stream, scripted, serve_runtime

pytestmark = HTTPX_GENERATORS

EVALUATE = "/v1/sessions/{}/policies/evaluate"


# -- the original's policy function, verbatim in its tests ---------------------------


def ask_for_bash(event):  # type: ignore[no-untyped-def]
    if event.get("type") != "tool_call":
        return {"result": "ALLOW"}
    data = event.get("data")
    tool = data.get("name", "") if isinstance(data, dict) else ""
    if tool == "Bash":
        return {"result": "ASK", "reason": "Approve child tool call"}
    return {"result": "ALLOW"}


def redact_results(event: dict[str, Any]) -> dict[str, Any]:
    """Sees the result and the call that made it, in the original's words."""
    if event["type"] != "tool_result":
        return {"result": "UNSPECIFIED"}
    call = event["request_data"]
    output = event["data"]["result"].replace("hunter2", "***")
    return {"result": "ALLOW", "reason": f"{call['name']} {call['args']}", "data": output}


def raises(event: dict[str, Any]) -> dict[str, Any]:
    raise RuntimeError("policy bug")


def exits(event: dict[str, Any]) -> dict[str, Any]:
    raise SystemExit(3)


def interrupts(event: dict[str, Any]) -> dict[str, Any]:
    raise KeyboardInterrupt


def says_nothing(event: dict[str, Any]) -> None:
    return None


def function(name: str, attr: str) -> dict[str, Any]:
    return {"name": name, "type": "function", "function": f"{__name__}:{attr}"}


@asynccontextmanager
async def server(**runtime_options: Any) -> AsyncIterator[Server]:
    """A served runtime whose agents may use this module's function policies."""
    async with (
        omnigent.open_runtime(policy_modules=[__name__], **runtime_options) as runtime,
        serve_runtime(runtime) as (url, app, stopping),
        httpx.AsyncClient(base_url=url, timeout=10) as client,
    ):
        yield Server(url, runtime, client, app, stopping)


CALL = {
    "event": {
        "type": "PHASE_TOOL_CALL",
        "target": "",
        "data": {"name": "Bash", "arguments": {"command": "date"}},
        "context": {},
    }
}


def result_body(output: Any) -> dict[str, Any]:
    return {
        "event": {
            "type": "PHASE_TOOL_RESULT",
            "data": {"result": output},
            "request_data": {"name": "Bash", "args": {"command": "date"}},
            "context": {},
        }
    }


@pytest.mark.parametrize(("action", "answer"), [("accept", "ALLOW"), ("decline", "DENY")])
async def test_the_originals_policy_asks_for_bash_and_a_parent_answers(
    action: str, answer: str
) -> None:
    with trio.fail_after(15):
        async with server() as srv:
            parent = await srv.session(scripted("parent"))
            child_agent = await srv.agent({**scripted("child"), "policies": [ask_bash()]})
            created = await srv.client.post(
                "/v1/sessions", json={"agent_id": child_agent, "parent_session_id": parent}
            )
            child = created.json()["id"]
            verdicts: list[httpx.Response] = []
            async with (
                open_stream(srv.client, "GET", f"/v1/sessions/{parent}/stream") as stream,
                trio.open_nursery() as nursery,
            ):

                async def evaluate() -> None:
                    verdicts.append(await srv.client.post(EVALUATE.format(child), json=CALL))

                nursery.start_soon(evaluate)
                frames = await stream.read_until(
                    lambda f: f.event == "response.elicitation_request"
                )
                request = frames[-1]
                params = request.data["params"]
                assert params["message"] == "ask_bash: Approve child tool call"
                assert params["phase"] == "tool_call"
                assert params["policy_name"] == "ask_bash"
                assert params["tool_name"] == "Bash"
                assert params["tool_input"] == {"command": "date"}
                assert params["target_session_id"] == child  # mirrored from the child
                owner = params["target_session_id"]
                eid = request.data["elicitation_id"]
                resolved = await srv.client.post(
                    f"/v1/sessions/{owner}/elicitations/{eid}/resolve", json={"action": action}
                )
                assert resolved.json() == {"resolved": True}
            (verdict,) = verdicts
            assert verdict.status_code == 200, verdict.text
            assert verdict.json()["result"] == f"POLICY_ACTION_{answer}"


def ask_bash() -> dict[str, Any]:
    return function("ask_bash", "ask_for_bash")


async def test_the_originals_policy_allows_other_tools_and_results() -> None:
    with trio.fail_after(10):
        async with server() as srv:
            sid = await srv.session({**scripted("a"), "policies": [ask_bash()]})
            other = {"event": {**CALL["event"], "data": {"name": "Read", "arguments": {}}}}
            answer = await srv.client.post(EVALUATE.format(sid), json=other)
            assert answer.json() == {"result": "POLICY_ACTION_ALLOW"}
            answer = await srv.client.post(EVALUATE.format(sid), json=result_body("Mon\n"))
            assert answer.status_code == 200, answer.text
            assert answer.json() == {"result": "POLICY_ACTION_ALLOW"}


async def test_the_result_body_reaches_the_function_in_the_originals_words() -> None:
    with trio.fail_after(10):
        async with server() as srv:
            sid = await srv.session(
                {**scripted("a"), "policies": [function("r", "redact_results")]}
            )
            answer = await srv.client.post(
                EVALUATE.format(sid), json=result_body("password: hunter2")
            )
            assert answer.json() == {
                "result": "POLICY_ACTION_ALLOW",
                "reason": "Bash {'command': 'date'}",
                "data": "password: ***",
            }


async def test_both_spellings_mean_the_same_event() -> None:
    with trio.fail_after(10):
        async with server() as srv:
            sid = await srv.session(
                {**scripted("a"), "policies": [function("r", "redact_results")]}
            )
            own = {
                "event": {
                    "type": "PHASE_TOOL_RESULT",
                    "data": {
                        "tool_name": "Bash",
                        "tool_input": {"command": "date"},
                        "tool_output": "password: hunter2",
                    },
                }
            }
            original = await srv.client.post(
                EVALUATE.format(sid), json=result_body("password: hunter2")
            )
            mine = await srv.client.post(EVALUATE.format(sid), json=own)
            assert mine.json() == original.json()
            both = {"event": {**own["event"], "data": {**own["event"]["data"], "result": "x"}}}
            refused = await srv.client.post(EVALUATE.format(sid), json=both)
            assert refused.status_code == 422
            assert [d["loc"] for d in refused.json()["error"]["details"]] == [
                "event.data.tool_output"
            ]


@pytest.mark.parametrize("attr", ["raises", "exits", "interrupts", "says_nothing"])
async def test_a_failing_policy_function_denies_and_the_server_lives(
    attr: str, caplog: pytest.LogCaptureFixture
) -> None:
    with trio.fail_after(10):
        async with server() as srv:
            sid = await srv.session({**scripted("a"), "policies": [function("p", attr)]})
            with caplog.at_level(logging.ERROR, logger="omnigent.core.tools"):
                call = await srv.client.post(EVALUATE.format(sid), json=CALL)
                result = await srv.client.post(EVALUATE.format(sid), json=result_body("s3cr3t"))
            assert call.status_code == 200, call.text
            assert call.json()["result"] == "POLICY_ACTION_DENY"
            assert call.json()["reason"].startswith("policy p failed: ")
            assert result.json() == {
                "result": "POLICY_ACTION_DENY",
                "reason": result.json()["reason"],
                "data": "[result withheld: policy p failed]",
            }
            assert "s3cr3t" not in result.text
            assert any("policy 'p' failed" in r.getMessage() for r in caplog.records)
            assert (await srv.client.get("/health")).json()["status"] == "ok"


# -- failures keep their causes off the wire -----------------------------------------


class _Leaky:
    async def run_turn(self, request: TurnRequest, ctx: TurnContext) -> None:
        raise RuntimeError("db password hunter2")


async def test_a_crashing_harness_keeps_its_secret_off_the_wire(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with trio.fail_after(10):
        async with server() as srv:
            srv.runtime.register_harness("leaky", lambda env: _Leaky())
            sid = await srv.session(scripted("leaky", harness="leaky"))
            body = {"type": "message", "data": {"content": [{"type": "input_text", "text": "x"}]}}
            with caplog.at_level(logging.ERROR, logger="omnigent.core.session"):
                async with srv.client.stream(
                    "POST", f"/v1/sessions/{sid}/events?stream=true", json=body
                ) as answer:
                    streamed = b"".join([chunk async for chunk in answer.aiter_raw()])
            assert b"event: response.failed" in streamed
            assert b'"code":"harness_crashed"' in streamed
            assert b"hunter2" not in streamed
            async with open_stream(srv.client, "GET", f"/v1/sessions/{sid}/stream?after=0") as s:
                replayed = await s.read_until(
                    lambda f: f.event == "session.status" and f.data["status"] == "failed"
                )
            failed = replayed[-1].data["error"]
            assert failed["code"] == "harness_crashed"
            assert "hunter2" not in str([f.data for f in replayed])
            for path in (f"/v1/sessions/{sid}", f"/v1/sessions/{sid}/items"):
                assert "hunter2" not in (await srv.client.get(path)).text
            logged = [r for r in caplog.records if r.exc_info and sid in r.getMessage()]
            assert logged, caplog.records
            assert "hunter2" in str(logged[0].exc_info[1])  # type: ignore[index]


async def test_a_deliberate_error_keeps_its_message() -> None:
    class Strike:
        async def run_turn(self, request: TurnRequest, ctx: TurnContext) -> None:
            raise omnigent.HarnessError("the model is on strike")

    with trio.fail_after(10):
        async with server() as srv:
            srv.runtime.register_harness("strike", lambda env: Strike())
            sid = await srv.session(scripted("s", harness="strike"))
            async with open_stream(srv.client, "GET", f"/v1/sessions/{sid}/stream") as stream:
                await srv.message(sid)
                frames = await stream.read_until(lambda f: f.event == "response.failed")
            assert frames[-1].data["error"] == {
                "message": "the model is on strike",
                "code": "harness_error",
            }
