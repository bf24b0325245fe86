"""The OpenAPI document against the running app: every answer it gives on a real loopback
server matches what the document says for that status, every SSE frame matches the
stream's ``itemSchema``, and every request body the document forbids is refused ``422``.

(That the document lists exactly the app's routes is ``test_http_api``'s test.)
"""

from __future__ import annotations

from typing import Any

import httpx
import jsonschema
import pytest
import trio
from schemathesis.specs.openapi.definitions import OPENAPI_32_VALIDATOR

import omnigent
from omnigent.transports.http import _fence, create_app
from omnigent.transports.http._params import IDENTITY_HEADER

from .http_elicitation_helpers import REQUEST, asking_session, next_event, watch
from .http_helpers import HTTPX_GENERATORS, Server, SSEReader, open_server, scripted
from .openapi_helpers import (
    DOCUMENT,
    assert_conforms,
    assert_frames_conform,
    body_allowed,
    schema_validator,
)

pytestmark = HTTPX_GENERATORS

ME = {IDENTITY_HEADER: "ada@example.com"}
PNG = b"\x89PNG\r\n\x1a\n" + b"x" * 64
TEXT = [{"type": "input_text", "text": "hello"}]


def test_the_document_is_valid_openapi_3_2() -> None:
    """Against the official OpenAPI 3.2 schema (schemathesis ships it). As a 3.1
    document it was not: ``itemSchema`` is 3.2's, and strict 3.1 validators refused it."""
    errors = [str(e)[:300] for e in OPENAPI_32_VALIDATOR.iter_errors(DOCUMENT)]
    assert DOCUMENT["openapi"] == "3.2.0"
    assert errors == []
    # A stream is described per frame only: a ``schema`` would describe the whole stream
    # (as an array of frames), and a string one failed every frame (schemathesis ST108).
    streams = [
        media
        for item in DOCUMENT["paths"].values()
        for op in item.values()
        for answer in op["responses"].values()
        for kind, media in answer.get("content", {}).items()
        if kind == "text/event-stream"
    ]
    assert len(streams) == 3
    assert all(set(media) == {"itemSchema"} for media in streams)


def test_every_schema_in_the_document_is_valid_json_schema() -> None:
    for name, schema in DOCUMENT["components"]["schemas"].items():
        try:
            jsonschema.Draft202012Validator.check_schema(schema)
        except jsonschema.SchemaError as exc:  # pragma: no cover - the failure message
            raise AssertionError(f"{name}: {exc.message}") from exc
    for path, item in DOCUMENT["paths"].items():
        for method, op in item.items():
            for answer in op["responses"].values():
                for media in answer.get("content", {}).values():
                    for key in ("schema", "itemSchema"):
                        if key in media:
                            schema_validator(media[key])  # refs resolve at use
                            jsonschema.Draft202012Validator.check_schema(media[key])
            assert op["responses"], f"{method} {path}"


async def test_every_body_the_document_lists_is_one_the_route_reads() -> None:
    # The routes declare what they read (``@accepts``; JSON if not): the fence answers
    # 415 for anything else, so the document must list exactly those.
    with trio.fail_after(10):
        async with omnigent.open_runtime() as runtime:
            app = create_app(runtime)
    checked = 0
    for rule in app.url_map.iter_rules():
        for method in sorted(rule.methods & {"POST", "PUT", "PATCH"}):
            view = app.view_functions[rule.endpoint]
            reads = set(getattr(view, _fence._ACCEPTS_ATTR, _fence.JSON))
            path = rule.rule.replace("<", "{").replace(">", "}")
            body = DOCUMENT["paths"][path][method.lower()]["requestBody"]
            assert set(body["content"]) == reads, f"{method} {path}"
            checked += 1
    assert checked >= 12


def test_every_operation_has_an_id_and_creators_link_to_their_users() -> None:
    ids = [op["operationId"] for item in DOCUMENT["paths"].values() for op in item.values()]
    assert len(ids) == len(set(ids))
    created = DOCUMENT["paths"]["/v1/sessions"]["post"]["responses"]["201"]["links"]
    assert created["get_session"] == {
        "operationId": "get_session",
        "parameters": {"path.session_id": "$response.body#/id"},
    }
    assert "claude_permission_request" not in created  # it waits for a person
    for link in created.values():
        assert link["operationId"] in ids


async def idle(server: Server, sid: str) -> None:
    async def status() -> str:
        return str((await server.client.get(f"/v1/sessions/{sid}", headers=ME)).json()["status"])

    with trio.fail_after(10):
        while await status() != "idle":
            await trio.sleep(0.01)


async def test_every_answer_of_the_running_app_matches_the_document() -> None:
    with trio.fail_after(30):
        async with open_server(auth="header") as server:
            client = server.client

            async def call(method: str, url: str, **options: Any) -> Any:
                answer = await client.request(method, url, headers=ME, **options)
                return assert_conforms(answer)

            assert_conforms(await client.get("/health"))
            assert_conforms(await client.get("/v1/agents"))  # 401: no identity
            await call("GET", "/v1/openapi.json")
            spec = scripted("doc-bot", [{"say": "hello there"}], model="m")
            agent = await call("POST", "/v1/agents", json=spec)
            await call("POST", "/v1/agents", json={"name": "Bad Name"})  # 422
            await call("GET", "/v1/agents")
            await call("GET", f"/v1/agents/{agent['id']}")
            await call("GET", "/v1/agents/agent_nope")  # 404
            image = await call("POST", "/v1/files", files={"file": ("a.png", PNG, "image/png")})
            await call("GET", f"/v1/files/{image['id']}")
            assert_conforms(await client.get(f"/v1/files/{image['id']}/content", headers=ME))
            body = {
                "agent_id": agent["id"],
                "title": "t",
                "labels": {"k": "v"},
                "model_override": "gpt-4o",
                "initial_items": [{"type": "message", "data": {"role": "user", "content": TEXT}}],
            }
            session = await call("POST", "/v1/sessions", json=body)
            sid = session["id"]
            child = await call(
                "POST", "/v1/sessions", json={"agent_name": "doc-bot", "parent_session_id": sid}
            )
            await call("GET", "/v1/sessions", params={"limit": 1})
            await call("GET", f"/v1/sessions/{sid}/child_sessions")
            await call("PATCH", f"/v1/sessions/{sid}", json={"title": None, "labels": {"a": "b"}})
            image_block = {"type": "input_image", "file_id": image["id"]}
            message = {"type": "message", "data": {"content": [*TEXT, image_block]}}
            await call("POST", f"/v1/sessions/{sid}/events", json=message)
            await idle(server, sid)
            replay = await _replay(client, sid)
            assert_frames_conform("GET", f"/v1/sessions/{sid}/stream", replay)
            async with client.stream(
                "POST", f"/v1/sessions/{sid}/events?stream=true", json=message, headers=ME
            ) as streamed:
                assert_conforms(streamed)
                raw = b"".join([chunk async for chunk in streamed.aiter_raw()])
            turn = assert_frames_conform("POST", f"/v1/sessions/{sid}/events", raw)
            assert turn[-1]["type"] == "response.completed"
            await call("GET", f"/v1/sessions/{sid}/items", params={"order": "desc", "limit": 2})
            for kind in ("interrupt", "stop_session"):
                await call("POST", f"/v1/sessions/{sid}/events", json={"type": kind})
            ask = {"type": "mcp_elicitation", "data": {"message": "ok?"}}
            held = await call("POST", f"/v1/sessions/{sid}/events", json=ask)
            eid = held["elicitation_id"]
            await call("GET", f"/v1/sessions/{sid}", params={})  # pending_elicitations
            await call("GET", f"/v1/sessions/{sid}/elicitations/{eid}")  # pending
            approval = {"elicitation_id": eid, "action": "accept", "content": {"a": 1}}
            await call(
                "POST", f"/v1/sessions/{sid}/events", json={"type": "approval", "data": approval}
            )
            await call("GET", f"/v1/sessions/{sid}/elicitations/{eid}")  # resolved
            await call(
                "POST", f"/v1/sessions/{sid}/elicitations/{eid}/resolve", json={"action": "decline"}
            )
            await call("GET", f"/v1/sessions/{sid}/permissions")
            grant = {"user_id": "bob@example.com", "level": 2}
            await call("PUT", f"/v1/sessions/{sid}/permissions", json=grant)
            await call("DELETE", f"/v1/sessions/{sid}/permissions/bob@example.com")
            await call("DELETE", f"/v1/sessions/{sid}/permissions/ada@example.com")  # 409
            await call("GET", f"/v1/sessions/{sid}/resources")
            await call("GET", f"/v1/sessions/{sid}/resources/terminal_x_y/screen")  # 404
            evaluate = {"event": {"type": "PHASE_TOOL_CALL", "data": {"name": "Bash"}}}
            await call("POST", f"/v1/sessions/{sid}/policies/evaluate", json=evaluate)
            mcp = f"/v1/sessions/{sid}/mcp"
            hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
            await call("POST", mcp, json=hello)
            await call("POST", mcp, json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
            await call("POST", mcp, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
            await call("POST", mcp, json=[1])  # 400, a JSON-RPC error
            await call("GET", mcp)  # 405
            await call("DELETE", f"/v1/sessions/{child['id']}")
            await call("DELETE", f"/v1/sessions/{sid}")
            await call("GET", f"/v1/sessions/{sid}")  # 404


async def _replay(client: httpx.AsyncClient, sid: str) -> bytes:
    """The raw SSE replay of every event so far (the stream then tails: cut there)."""
    last = (await client.get(f"/v1/sessions/{sid}", headers=ME)).json()["last_event_id"]
    raw = b""
    async with client.stream("GET", f"/v1/sessions/{sid}/stream?after=0", headers=ME) as stream:
        assert_conforms(stream)
        async for chunk in stream.aiter_raw():
            raw += chunk
            if f"id: {last}\n".encode() in raw and raw.endswith(b"\n\n"):
                return raw
    raise AssertionError("the stream ended")


async def _answer_elicitations(server: Server, reader: SSEReader, sid: str, count: int) -> None:
    """Accept, then decline, the next ``count`` elicitations of the session."""
    for index in range(count):
        frame = await next_event(reader, REQUEST)
        action = "accept" if index % 2 == 0 else "decline"
        url = f"/v1/sessions/{sid}/elicitations/{frame.data['elicitation_id']}/resolve"
        assert (await server.client.post(url, json={"action": action})).status_code == 202


async def test_hooks_that_wait_answer_what_the_document_says() -> None:
    with trio.fail_after(20):
        async with open_server() as server:
            sid = await asking_session(server)
            hook = {
                "tool_name": "AskUserQuestion",
                "tool_input": {"questions": [{"question": "?"}]},
            }
            codex = {
                "id": 7,
                "method": "item/commandExecution/requestApproval",
                "params": {"command": ["ls"], "cwd": "/"},
            }
            answers: list[Any] = []

            async def post(url: str, body: dict[str, Any]) -> None:
                answers.append(assert_conforms(await server.client.post(url, json=body)))

            async with watch(server, sid) as reader, trio.open_nursery() as nursery:
                nursery.start_soon(_answer_elicitations, server, reader, sid, 4)
                for url, body in [
                    (f"/v1/sessions/{sid}/hooks/permission-request", hook),
                    (f"/v1/sessions/{sid}/hooks/permission-request", {**hook, "tool_name": "Bash"}),
                    (f"/v1/sessions/{sid}/hooks/codex-elicitation-request", codex),
                    (f"/v1/sessions/{sid}/policies/evaluate", _asking_event()),
                ]:
                    await post(url, body)
            decisions = [a.get("hookSpecificOutput", a) for a in answers]
            assert decisions[0]["decision"]["behavior"] == "allow"
            assert decisions[1]["decision"]["behavior"] == "deny"
            assert answers[2] == {"decision": "accept"}
            assert answers[3]["result"] == "POLICY_ACTION_DENY"


def _asking_event() -> dict[str, Any]:
    return {"event": {"type": "PHASE_TOOL_CALL", "data": {"name": "x", "arguments": {}}}}


# -- bodies the document forbids are refused -----------------------------------------

SESSION = "/v1/sessions/{sid}"
FORBIDDEN: list[tuple[str, str, Any]] = [
    ("POST", "/v1/agents", {"name": "Bad Name"}),
    ("POST", "/v1/agents", {"name": "a", "bogus": 1}),
    ("POST", "/v1/agents", {"name": "a", "spawn": "yes"}),
    ("POST", "/v1/agents", {"name": "a" * 101}),
    ("POST", "/v1/agents", {"name": "a", "executor": {"config": {"max_steps": 0}}}),
    ("POST", "/v1/agents", {"name": "a", "executor": {"config": {"script": [{"nap": 1}]}}}),
    ("POST", "/v1/agents", {"name": "a", "executor": {"config": {"command": [""]}}}),
    ("POST", "/v1/agents", {"name": "a", "terminals": {"bad_name": {"command": "sh"}}}),
    ("POST", "/v1/agents", {"name": "a", "policies": [{"name": "p", "type": "maybe"}]}),
    ("POST", "/v1/agents", {"name": "a", "mcp_servers": [{"name": "A__b", "url": "http://x"}]}),
    ("POST", "/v1/agents", {"name": "a", "mcp_servers": [{"name": "m", "url": "ftp://x"}]}),
    ("POST", "/v1/agents", {"name": "a", "agent_session_sharing": "everyone"}),
    ("POST", "/v1/sessions", {"agent_id": "{agent}", "bogus": 1}),
    ("POST", "/v1/sessions", {"agent_id": 5}),
    ("POST", "/v1/sessions", {}),
    ("POST", "/v1/sessions", {"agent_id": "{agent}", "agent_name": "bot"}),
    ("POST", "/v1/sessions", {"agent_id": "{agent}", "model_override": "two words"}),
    ("POST", "/v1/sessions", {"agent_id": "{agent}", "labels": {"a": 1}}),
    ("POST", "/v1/sessions", {"agent_id": "{agent}", "initial_items": [{"type": "nope"}]}),
    (
        "POST",
        "/v1/sessions",
        {
            "agent_id": "{agent}",
            "initial_items": [{"type": "message", "data": {"role": "robot", "content": TEXT}}],
        },
    ),
    ("PATCH", SESSION, {"bogus": 1}),
    ("PATCH", SESSION, {"title": 5}),
    ("PATCH", SESSION, {"labels": {"a": None}}),
    ("PATCH", SESSION, {"model_override": "x" * 201}),
    ("POST", SESSION + "/events", {"type": "nope"}),
    ("POST", SESSION + "/events", {"type": "message"}),
    ("POST", SESSION + "/events", {"type": "message", "data": {"content": []}}),
    ("POST", SESSION + "/events", {"type": "message", "data": {"content": [{"type": "x"}]}}),
    ("POST", SESSION + "/events", {"type": "message", "data": {"content": TEXT}, "x": 1}),
    ("POST", SESSION + "/events", {"type": "message", "data": {"content": TEXT, "role": "bot"}}),
    ("POST", SESSION + "/events", {"type": "interrupt", "data": {"now": True}}),
    (
        "POST",
        SESSION + "/events",
        {"type": "approval", "data": {"elicitation_id": "e", "action": "maybe"}},
    ),
    ("POST", SESSION + "/events", {"type": "mcp_elicitation", "data": {}}),
    ("POST", SESSION + "/elicitations/elicit_x/resolve", {"action": "maybe"}),
    ("POST", SESSION + "/elicitations/elicit_x/resolve", {"action": "accept", "x": 1}),
    ("POST", SESSION + "/elicitations/elicit_x/resolve", {}),
    ("PUT", SESSION + "/permissions", {"user_id": "", "level": 1}),
    ("PUT", SESSION + "/permissions", {"user_id": "bob", "level": 4}),
    ("PUT", SESSION + "/permissions", {"user_id": "bob", "level": "1"}),
    ("PUT", SESSION + "/permissions", {"user_id": "bob", "level": 1, "note": "x"}),
    ("POST", SESSION + "/hooks/permission-request", {"tool_name": "", "tool_input": {}}),
    ("POST", SESSION + "/hooks/permission-request", {"tool_name": "x", "tool_input": 1}),
    (
        "POST",
        SESSION + "/hooks/permission-request",
        {"tool_name": "x", "tool_input": {}, "hook_event_name": "Stop"},
    ),
    ("POST", SESSION + "/hooks/codex-elicitation-request", {"id": True, "method": "m"}),
    ("POST", SESSION + "/hooks/codex-elicitation-request", {"id": 1, "method": ""}),
    ("POST", SESSION + "/hooks/codex-elicitation-request", {"id": 1, "method": "m", "x": 1}),
    ("POST", SESSION + "/policies/evaluate", {}),
    ("POST", SESSION + "/policies/evaluate", {"event": 5}),
    ("POST", SESSION + "/policies/evaluate", {"event": {"type": "PHASE_NOPE", "data": {}}}),
    ("POST", SESSION + "/policies/evaluate", {"event": {"type": "tool_call"}}),
]


def _fill(value: Any, names: dict[str, str]) -> Any:
    if isinstance(value, str):
        return value.format(**names) if "{" in value else value
    if isinstance(value, dict):
        return {k: _fill(v, names) for k, v in value.items()}
    if isinstance(value, list):
        return [_fill(v, names) for v in value]
    return value


async def test_a_body_the_document_forbids_is_refused_422_and_changes_nothing() -> None:
    with trio.fail_after(30):
        async with open_server() as server:
            agent = await server.agent(scripted("bot"))
            sid = await server.session()
            names = {"agent": agent, "sid": sid}
            before = await _state(server.client, sid)
            for method, path, raw in FORBIDDEN:
                url, body = path.format(**names), _fill(raw, names)
                assert not body_allowed(method, url, body), f"the document allows {body}"
                answer = await server.client.request(method, url, json=body)
                try:
                    assert answer.status_code == 422
                    details = answer.json()["error"]["details"]
                    assert details and all(set(d) == {"loc", "msg"} for d in details)
                    assert_conforms(answer)
                except AssertionError as exc:
                    raise AssertionError(f"{method} {url} {body}: {answer.text}") from exc
            assert await _state(server.client, sid) == before


async def _state(client: httpx.AsyncClient, sid: str) -> Any:
    snapshot = (await client.get(f"/v1/sessions/{sid}")).json()
    agents = (await client.get("/v1/agents")).json()
    sessions = (await client.get("/v1/sessions")).json()
    return snapshot, agents, sessions


@pytest.mark.parametrize(
    "method, path, body",
    [
        ("POST", "/v1/sessions", {"agent_id": "{agent}", "model_override": "gpt-4o\n"}),
        ("PATCH", SESSION, {"model_override": "gpt-4o\n"}),
    ],
)
async def test_a_model_override_with_a_trailing_newline_is_refused(
    method: str, path: str, body: dict[str, Any]
) -> None:
    # Regression: the pattern's ``$`` matched before a final newline.
    with trio.fail_after(10):
        async with open_server() as server:
            names = {"agent": await server.agent(scripted("bot")), "sid": await server.session()}
            answer = await server.client.request(
                method, path.format(**names), json=_fill(body, names)
            )
            assert answer.status_code == 422, answer.text
            assert answer.json()["error"]["details"][0]["loc"] == "model_override"
