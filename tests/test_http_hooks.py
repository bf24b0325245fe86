"""Hooks (Claude Code, Codex) and policy evaluation over HTTP: requests that wait."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

import omnigent
from omnigent.errors import SpecError
from omnigent.transports.http._serve import load_policies, serve

from .http_elicitation_helpers import (
    REQUEST,
    RESOLVED,
    approve,
    asking_agent,
    child_of,
    next_event,
    resolve,
    resolved,
    watch,
)
from .http_helpers import HTTPX_GENERATORS, Server, open_server, scripted, serve_runtime
from .test_http_api import assert_error

pytestmark = HTTPX_GENERATORS

HOOK = "/v1/sessions/{}/hooks/permission-request"
CODEX = "/v1/sessions/{}/hooks/codex-elicitation-request"
EVALUATE = "/v1/sessions/{}/policies/evaluate"


def claude_body(tool_name: str = "Bash", **tool_input: Any) -> dict[str, Any]:
    return {
        "session_id": "claude-123",
        "transcript_path": "/tmp/t.jsonl",
        "cwd": "/work",
        "hook_event_name": "PermissionRequest",
        "tool_name": tool_name,
        "tool_input": tool_input or {"command": "ls -la"},
        "permission_suggestions": [{"type": "addRules"}],
    }


@asynccontextmanager
async def waiting(
    server: Server, url: str, body: dict[str, Any]
) -> AsyncIterator[list[httpx.Response]]:
    """POST ``body`` to ``url`` in a task; the answer is in the list once the block ends."""
    answers: list[httpx.Response] = []

    async def call() -> None:
        answers.append(await server.client.post(url, json=body))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(call)
        yield answers


async def ask_and_answer(
    server: Server,
    session_id: str,
    url: str,
    body: dict[str, Any],
    action: str,
    content: Any = None,
) -> tuple[dict[str, Any], httpx.Response]:
    """Send a waiting request, resolve its elicitation; returns (request event, answer)."""
    async with watch(server, session_id) as stream:
        async with waiting(server, url, body) as answers:
            request = (await next_event(stream, REQUEST)).data
            assert not answers
            answer = await resolve(server, session_id, request["elicitation_id"], action, content)
            assert answer.json() == {"resolved": True}
        done = await next_event(stream, RESOLVED, elicitation_id=request["elicitation_id"])
        assert done.data["action"] == action
    assert answers[0].status_code == 200, answers[0].text
    return request, answers[0]


# -- Claude Code -----------------------------------------------------------------------


@pytest.mark.parametrize("action", ["accept", "decline", "cancel"])
async def test_permission_request_round_trip(action: str) -> None:
    with trio.fail_after(10):
        async with open_server() as server:
            sid = await server.session()
            request, answer = await ask_and_answer(
                server, sid, HOOK.format(sid), claude_body(), action
            )
            params = request["params"]
            assert params["phase"] == "permission_request"
            assert params["message"] == "Claude Code wants to use Bash"
            assert params["tool_name"] == "Bash"
            assert params["tool_input"] == {"command": "ls -la"}
            assert params["url"] == f"/approve/{sid}/{request['elicitation_id']}"
            output = answer.json()["hookSpecificOutput"]
            assert output["hookEventName"] == "PermissionRequest"
            decision = output["decision"]
            if action == "accept":
                assert decision == {"behavior": "allow"}
            else:
                assert decision["behavior"] == "deny"
                assert {"decline": "declined", "cancel": "cancelled"}[action] in decision["message"]


QUESTIONS = [
    {
        "question": "Which database?",
        "header": "DB",
        "options": [
            {"label": "SQLite", "description": "a file"},
            {"label": "<Postgres>", "description": "a server"},
        ],
        "multiSelect": False,
    },
    {
        "question": "Which features?",
        "header": "Features",
        "options": [{"label": "auth"}, {"label": "search"}],
        "multiSelect": True,
    },
]


async def test_ask_user_question_answers_come_back_in_updated_input() -> None:
    with trio.fail_after(10):
        async with open_server() as server:
            sid = await server.session()
            body = claude_body("AskUserQuestion", questions=QUESTIONS)
            answers = {"Which database?": "SQLite", "Which features?": "auth, search"}
            request, answer = await ask_and_answer(
                server, sid, HOOK.format(sid), body, "accept", answers
            )
            params = request["params"]
            assert params["ask_user_question"] == {"questions": QUESTIONS}
            assert params["message"] == "Claude Code asks: Which database? / Which features?"
            view = (await server.client.get(f"/v1/sessions/{sid}")).json()
            assert view["pending_elicitations"] == []
            decision = answer.json()["hookSpecificOutput"]["decision"]
            assert decision == {
                "behavior": "allow",
                "updatedInput": {"questions": QUESTIONS, "answers": answers},
            }


async def test_ask_user_question_through_the_approval_page() -> None:
    with trio.fail_after(10):
        async with open_server() as server:
            sid = await server.session()
            body = claude_body("AskUserQuestion", questions=QUESTIONS)
            async with watch(server, sid) as stream, waiting(server, HOOK.format(sid), body) as out:
                eid = (await next_event(stream, REQUEST)).data["elicitation_id"]
                view = (await server.client.get(f"/v1/sessions/{sid}/elicitations/{eid}")).json()
                assert view["content_preview"] == "Which database?\nWhich features?"
                html = (await server.client.get(f"/approve/{sid}/{eid}")).text
                assert 'type="radio" name="q0" value="SQLite"' in html
                assert 'type="radio" name="q0" value="&lt;Postgres&gt;"' in html
                assert 'type="checkbox" name="q1" value="search"' in html
                form = {"action": "accept", "q0": "<Postgres>", "q1": ["auth", "search"]}
                form["q1_other"] = "billing"
                page = await approve(server.client, f"/approve/{sid}/{eid}", form)
                assert page.status_code == 200 and "Accepted" in page.text
            decision = out[0].json()["hookSpecificOutput"]["decision"]
            assert decision["updatedInput"]["answers"] == {
                "Which database?": "<Postgres>",
                "Which features?": "auth, search, billing",
            }


async def test_bad_hook_bodies_are_422_naming_the_field() -> None:
    with trio.fail_after(10):
        async with open_server() as server:
            sid = await server.session()
            IR = "invalid_request"
            hook, codex, evaluate = HOOK.format(sid), CODEX.format(sid), EVALUATE.format(sid)
            call = {"type": "PHASE_TOOL_CALL", "data": {"tool_name": "x"}}
            bad_input, result = {"tool_name": "x", "tool_input": 1}, "PHASE_TOOL_RESULT"
            cases: list[tuple[str, Any, str]] = [
                (hook, {"tool_input": {}}, "tool_name"),
                (hook, {"tool_name": 3, "tool_input": {}}, "tool_name"),
                (hook, {"tool_name": "Bash"}, "tool_input"),
                (hook, {"tool_name": "Bash", "tool_input": "ls"}, "tool_input"),
                (hook, {**claude_body(), "hook_event_name": "PreToolUse"}, "hook_event_name"),
                (hook, claude_body("AskUserQuestion", questions="?"), "tool_input.questions"),
                (hook, [1], "body"),
                (codex, {"id": 1}, "method"),
                (codex, {"method": "m"}, "id"),
                (codex, {"id": True, "method": "m"}, "id"),
                (codex, {"id": 1, "method": "m", "params": []}, "params"),
                (codex, {"id": 1, "method": "m", "extra": 1}, "extra"),
                (codex, {"jsonrpc": "1.0", "id": 1, "method": "m"}, "jsonrpc"),
                (evaluate, {}, "event"),
                (evaluate, {"event": call, "extra": 1}, "extra"),
                (evaluate, {"event": {**call, "type": "PHASE_NOPE"}}, "event.type"),
                (evaluate, {"event": {**call, "data": {}}}, "event.data.name"),
                (evaluate, {"event": {**call, "data": bad_input}}, "event.data.tool_input"),
                (evaluate, {"event": {**call, "type": result}}, "event.data.result"),
                (evaluate, {"event": 5}, "event"),
            ]  # fmt: skip
            for url, body, loc in cases:
                answer = await server.client.post(url, json=body)
                try:
                    assert_error(answer, 422, IR, loc)
                except AssertionError as exc:
                    raise AssertionError(f"{url} {body}: {answer.text}") from exc
            for route in (HOOK, CODEX, EVALUATE):
                answer = await server.client.post(route.format("conv_nope"), json={})
                assert_error(answer, 404, "session_not_found")
            assert server.runtime.statistics()["elicitations"] == 0


# -- leaving, shutting down, timeouts ------------------------------------------------


async def test_a_caller_that_goes_away_withdraws_the_elicitation() -> None:
    with trio.fail_after(10):
        async with open_server() as server:
            sid = await server.session()
            async with watch(server, sid) as stream:
                with trio.CancelScope() as caller:
                    async with waiting(server, HOOK.format(sid), claude_body()):
                        request = await next_event(stream, REQUEST)
                        caller.cancel()  # the client closes its connection mid-request
                eid = request.data["elicitation_id"]
                done = await next_event(stream, RESOLVED, elicitation_id=eid)
                assert done.data["action"] == "expired"
            stored = await server.runtime.get_elicitation(sid, eid)
            assert stored.status == "expired"
            assert not await resolved(server, sid, eid, "accept")
            assert server.runtime.statistics()["elicitations"] == 0


async def test_a_waiting_hook_answers_503_when_the_server_stops() -> None:
    with trio.fail_after(10):
        async with open_server() as server:
            sid = await server.session()
            body = {"id": 1, "method": "m"}
            async with (
                watch(server, sid) as stream,
                waiting(server, CODEX.format(sid), body) as out,
            ):
                eid = (await next_event(stream, REQUEST)).data["elicitation_id"]
                server.stopping.set()
            assert_error(out[0], 503, "runtime_closed")
            stored = await server.runtime.get_elicitation(sid, eid)
            assert stored.status == "expired"


async def test_no_server_timeout_cuts_a_waiting_hook() -> None:
    with trio.fail_after(10):
        async with open_server() as server:
            # Quart's own timeouts, made tiny: neither may cut a handler that waits.
            server.app.config["RESPONSE_TIMEOUT"] = 0.05
            server.app.config["BODY_TIMEOUT"] = 0.05
            sid = await server.session()
            body = claude_body()
            async with watch(server, sid) as stream, waiting(server, HOOK.format(sid), body) as out:
                eid = (await next_event(stream, REQUEST)).data["elicitation_id"]
                await trio.sleep(0.5)
                assert await resolved(server, sid, eid, "accept")
            decision = out[0].json()["hookSpecificOutput"]["decision"]
            assert decision == {"behavior": "allow"}


# -- Codex -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("action", "decision"), [("accept", "accept"), ("decline", "decline"), ("cancel", "decline")]
)
async def test_codex_command_approval_round_trip(action: str, decision: str) -> None:
    with trio.fail_after(10):
        async with open_server() as server:
            sid = await server.session()
            body = {
                "jsonrpc": "2.0",
                "id": 7,
                "method": "item/commandExecution/requestApproval",
                "params": {
                    "threadId": "t",
                    "turnId": "u",
                    "itemId": "i",
                    "command": ["git", "push", "--force"],
                    "cwd": "/repo",
                    "reason": "needs network",
                },
            }
            request, answer = await ask_and_answer(server, sid, CODEX.format(sid), body, action)
            params = request["params"]
            assert params["phase"] == "codex_command_approval"
            assert params["command"] == "git push --force"
            assert params["message"] == "Codex wants to run: git push --force (needs network)"
            assert params["tool_input"] == {
                "command": "git push --force",
                "cwd": "/repo",
                "reason": "needs network",
            }
            assert answer.json() == {"decision": decision}


@pytest.mark.parametrize(
    ("method", "phase"),
    [
        ("item/fileChange/requestApproval", "codex_file_change_approval"),
        ("item/tool/requestUserInput", "codex_item_tool_requestUserInput"),
    ],
)
async def test_codex_other_requests(method: str, phase: str) -> None:
    with trio.fail_after(10):
        async with open_server() as server:
            sid = await server.session()
            body = {"id": "r1", "method": method, "params": {"itemId": "i", "grantRoot": "/r"}}
            request, answer = await ask_and_answer(server, sid, CODEX.format(sid), body, "accept")
            assert request["params"]["phase"] == phase
            assert request["params"]["tool_input"] == {"itemId": "i", "grantRoot": "/r"}
            assert answer.json() == {"decision": "accept"}


# -- policies --------------------------------------------------------------------------

POLICIES = [
    {"name": "deny_rm", "type": "deny_tools", "tools": ["rm"], "reason": "never"},
    {"name": "ask_sh", "type": "ask_tools", "tools": ["sh"], "reason": "shell?"},
]


def call_event(tool_name: str, **tool_input: Any) -> dict[str, Any]:
    data = {"tool_name": tool_name, "tool_input": tool_input}
    return {"event": {"type": "PHASE_TOOL_CALL", "data": data}}


async def test_policy_evaluation_deny_unspecified_and_ask() -> None:
    with trio.fail_after(10):
        async with open_server() as server:
            spec = scripted("guarded")
            spec["policies"] = POLICIES
            sid = await server.session(spec)
            url = EVALUATE.format(sid)
            denied = await server.client.post(url, json=call_event("rm", path="/"))
            assert denied.json() == {"result": "POLICY_ACTION_DENY", "reason": "never"}
            nothing = await server.client.post(url, json=call_event("ls"))
            assert nothing.json() == {"result": "POLICY_ACTION_UNSPECIFIED"}
            for action, result in [("accept", "ALLOW"), ("decline", "DENY"), ("cancel", "DENY")]:
                request, answer = await ask_and_answer(
                    server, sid, url, call_event("sh", cmd="make"), action
                )
                params = request["params"]
                assert params["message"] == "ask_sh: shell?" and params["phase"] == "tool_call"
                assert params["policy_name"] == "ask_sh"
                assert params["tool_input"] == {"cmd": "make"}
                assert answer.json()["result"] == f"POLICY_ACTION_{result}"


async def test_policy_ask_on_a_child_is_answered_from_the_parent() -> None:
    with trio.fail_after(10):
        async with open_server() as server:
            parent = await server.session(scripted("parent"))
            child = await child_of(server, parent, asking_agent("kid"))
            async with watch(server, parent) as stream:
                async with waiting(
                    server, EVALUATE.format(child), call_event("x", path="p")
                ) as out:
                    request = (await next_event(stream, REQUEST)).data
                    eid, params = request["elicitation_id"], request["params"]
                    assert params["target_session_id"] == child
                    assert params["message"] == "ask_x: approve x?"
                    # The parent sees it, but only the owner's id answers it.
                    assert not await resolved(server, parent, eid, "accept")
                    assert await resolved(server, params["target_session_id"], eid, "accept")
                done = await next_event(stream, RESOLVED, elicitation_id=eid)
                assert done.data["target_session_id"] == child
            assert out[0].json()["result"] == "POLICY_ACTION_ALLOW"


async def test_server_default_policies_apply(tmp_path: Path) -> None:
    path = tmp_path / "policies.yaml"
    path.write_text("- {name: no_x, type: deny_tools, tools: [x], reason: not here}\n")
    start = partial(serve, None, "127.0.0.1", 0, None, "none", policies=load_policies(path))
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            stop = trio.Event()
            url = await nursery.start(partial(start, stop=stop))
            try:
                async with httpx.AsyncClient(base_url=url, timeout=5) as client:
                    agent = (await client.post("/v1/agents", json=scripted("plain"))).json()
                    session = await client.post("/v1/sessions", json={"agent_id": agent["id"]})
                    sid = session.json()["id"]
                    answer = await client.post(EVALUATE.format(sid), json=call_event("x"))
                    assert answer.json() == {"result": "POLICY_ACTION_DENY", "reason": "not here"}
            finally:
                stop.set()


def test_load_policies_refuses_bad_files(tmp_path: Path) -> None:
    cases = {
        "map.yaml": "name: x\n",
        "bad.yaml": "- {name: x, type: nope}\n",
        "yaml.yaml": "- [\n",
    }
    for name, text in cases.items():
        (tmp_path / name).write_text(text)
        with pytest.raises(SpecError):
            load_policies(tmp_path / name)
    (tmp_path / "empty.yaml").write_text("")
    assert load_policies(tmp_path / "empty.yaml") == []


# -- who may ---------------------------------------------------------------------------


async def test_the_routes_enforce_session_levels() -> None:
    alice, bob = {"X-Forwarded-Email": "alice@x"}, {"X-Forwarded-Email": "bob@x"}
    with trio.fail_after(10):
        async with (
            omnigent.open_runtime() as runtime,
            serve_runtime(runtime, auth="header") as (url, _app, _stopping),
            httpx.AsyncClient(base_url=url, timeout=10) as client,
        ):
            agent = await client.post("/v1/agents", json=scripted("own"), headers=alice)
            created = await client.post(
                "/v1/sessions", json={"agent_id": agent.json()["id"]}, headers=alice
            )
            sid = created.json()["id"]
            params = omnigent.core.elicitation_params("ok?", "mcp_elicitation")
            eid = await runtime.hold_elicitation(sid, params)
            E = f"/v1/sessions/{sid}/elicitations/{eid}"
            reads: list[tuple[str, str, dict[str, Any]]] = [
                ("GET", E, {}),
                ("GET", f"/approve/{sid}/{eid}", {}),
            ]
            writes: list[tuple[str, str, dict[str, Any]]] = [
                ("POST", f"{E}/resolve", {"json": {"action": "accept"}}),
                ("POST", f"/approve/{sid}/{eid}", {"data": {"action": "accept"}}),
                ("POST", HOOK.format(sid), {"json": claude_body()}),
                ("POST", CODEX.format(sid), {"json": {"id": 1, "method": "m"}}),
                ("POST", EVALUATE.format(sid), {"json": call_event("x")}),
            ]
            for method, route, options in reads + writes:
                answer = await client.request(method, route, **options)
                assert_error(answer, 401, "unauthorized")
                answer = await client.request(method, route, headers=bob, **options)
                assert_error(answer, 404, "session_not_found")
            await runtime.grant(sid, "bob@x", 1)
            for method, route, options in reads:
                answer = await client.request(method, route, headers=bob, **options)
                assert answer.status_code == 200, (route, answer.text)
            for method, route, options in writes:
                answer = await client.request(method, route, headers=bob, **options)
                assert_error(answer, 403, "forbidden")
            assert (await runtime.get_elicitation(sid, eid)).status == "pending"
            answer = await client.post(f"{E}/resolve", json={"action": "accept"}, headers=alice)
            assert answer.json() == {"resolved": True}
