"""The REST side of the HTTP transport: routes, validation, the error envelope."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
import trio

from omnigent.transports.http._openapi import openapi_document

from .http_helpers import HTTPX_GENERATORS, Server, open_server, scripted

pytestmark = HTTPX_GENERATORS


def assert_error(answer: httpx.Response, status: int, code: str, loc: str | None = None) -> None:
    assert answer.status_code == status, answer.text
    error = answer.json()["error"]
    assert error["code"] == code
    assert isinstance(error["message"], str) and error["message"]
    if loc is not None:
        assert loc in [d["loc"] for d in error["details"]], error


async def test_health_and_agents() -> None:
    with trio.fail_after(10):
        async with open_server() as server:
            health = (await server.client.get("/health")).json()
            assert health == {
                "status": "ok",
                "server_id": server.runtime.server_id,
                "store": "memory",
            }
            created = await server.client.post("/v1/agents", json=scripted("a1"))
            assert created.status_code == 201
            agent = created.json()
            assert agent["object"] == "agent" and agent["name"] == "a1"
            assert agent["harness"] == "scripted" and agent["version"] == 1
            yaml_spec = "name: a1\nexecutor: {type: omnigent, config: {harness: scripted}}\n"
            again = await server.client.post(
                "/v1/agents", content=yaml_spec, headers={"Content-Type": "application/yaml"}
            )
            assert again.status_code == 201
            assert again.json()["id"] == agent["id"] and again.json()["version"] == 2
            listed = (await server.client.get("/v1/agents")).json()
            assert listed["object"] == "list" and [a["id"] for a in listed["data"]] == [agent["id"]]
            got = await server.client.get(f"/v1/agents/{agent['id']}")
            assert got.json()["version"] == 2
            assert_error(await server.client.get("/v1/agents/agent_nope"), 404, "agent_not_found")
            bad = await server.client.post("/v1/agents", json={"name": "x", "bogus": 1})
            assert_error(bad, 422, "invalid_spec", "bogus")
            bad_yaml = await server.client.post(
                "/v1/agents", content="name: [", headers={"Content-Type": "application/yaml"}
            )
            assert_error(bad_yaml, 422, "invalid_spec", "$")


async def test_session_lifecycle() -> None:
    with trio.fail_after(10):
        async with open_server() as server:
            agent_id = await server.agent(scripted("s1"))
            created = await server.client.post(
                "/v1/sessions",
                json={
                    "agent_id": agent_id,
                    "title": "t",
                    "labels": {"k": "v"},
                    "model_override": "gpt-4o-mini",
                    "initial_items": [
                        {
                            "type": "message",
                            "data": {
                                "role": "user",
                                "content": [{"type": "input_text", "text": "seed"}],
                            },
                        }
                    ],
                },
            )
            assert created.status_code == 201, created.text
            snap = created.json()
            assert snap["object"] == "session" and snap["agent_name"] == "s1"
            assert snap["labels"] == {"k": "v"} and snap["model"] == "gpt-4o-mini"
            sid = snap["id"]
            patched = await server.client.patch(f"/v1/sessions/{sid}", json={"title": "new"})
            assert patched.json()["title"] == "new"
            got = await server.client.get(f"/v1/sessions/{sid}")
            assert got.json()["title"] == "new"
            items = (await server.client.get(f"/v1/sessions/{sid}/items")).json()
            assert items["object"] == "list" and len(items["data"]) == 1
            assert items["first_id"] == items["data"][0]["id"] and items["has_more"] is False
            second = await server.client.post("/v1/sessions", json={"agent_id": agent_id})
            page = (await server.client.get("/v1/sessions?limit=1")).json()
            assert page["has_more"] is True and page["data"][0]["id"] == second.json()["id"]
            rest = await server.client.get(f"/v1/sessions?limit=1&after={second.json()['id']}")
            assert [s["id"] for s in rest.json()["data"]] == [sid]
            named = (await server.client.get("/v1/sessions?agent_name=s1")).json()
            assert len(named["data"]) == 2
            deleted = await server.client.delete(f"/v1/sessions/{sid}")
            assert deleted.json() == {"id": sid, "object": "session.deleted", "deleted": True}
            assert_error(await server.client.get(f"/v1/sessions/{sid}"), 404, "session_not_found")


async def test_child_sessions_with_preview() -> None:
    with trio.fail_after(10):
        async with open_server() as server:
            parent = await server.session(scripted("p"))
            agent_id = await server.agent(scripted("c", [{"say": "child answer"}]))
            child = await server.client.post(
                "/v1/sessions",
                json={"agent_id": agent_id, "parent_session_id": parent, "title": "kid"},
            )
            child_id = child.json()["id"]
            children = (await server.client.get(f"/v1/sessions/{parent}/child_sessions")).json()
            assert children["object"] == "list"
            assert children["data"][0]["preview"] is None
            async with server.runtime.subscribe(child_id, after=0) as events:
                await server.message(child_id)
                async for event in events:
                    if event.type == "session.status" and event.status == "idle":
                        break
            children = (await server.client.get(f"/v1/sessions/{parent}/child_sessions")).json()
            (summary,) = children["data"]
            assert set(summary) == {
                "id",
                "title",
                "agent",
                "tool",
                "session_name",
                "status",
                "busy",
                "current_task_status",
                "preview",
                "labels",
            }
            assert summary["id"] == child_id and summary["agent"] == summary["tool"] == "c"
            assert summary["session_name"] == "kid"
            assert summary["current_task_status"] == "completed"
            assert summary["preview"] == "child answer"
            listed = (await server.client.get(f"/v1/sessions?parent_session_id={parent}")).json()
            assert [s["id"] for s in listed["data"]] == [child_id]


async def test_files_round_trip() -> None:
    with trio.fail_after(10):
        async with open_server() as server:
            png = b"\x89PNG\r\n\x1a\n" + b"x" * 100
            up = await server.client.post(
                "/v1/files", files={"file": ("pic.png", png, "image/png")}
            )
            assert up.status_code == 201, up.text
            info = up.json()
            assert info["object"] == "file" and info["bytes"] == len(png)
            assert info["filename"] == "pic.png" and info["content_type"] == "image/png"
            assert (await server.client.get(f"/v1/files/{info['id']}")).json() == info
            content = await server.client.get(f"/v1/files/{info['id']}/content")
            assert content.content == png and content.headers["content-type"] == "image/png"
            assert_error(await server.client.get("/v1/files/file_x"), 404, "file_not_found")
            missing = await server.client.post("/v1/files", files={"other": ("a", b"1")})
            assert_error(missing, 422, "invalid_request", "file")
            session_id = await server.session()
            body = {
                "type": "message",
                "data": {"content": [{"type": "input_image", "file_id": info["id"]}]},
            }
            sent = await server.client.post(f"/v1/sessions/{session_id}/events", json=body)
            assert sent.status_code == 202


def _msg(text: Any = "hi") -> dict[str, Any]:
    return {"type": "message", "data": {"content": [{"type": "input_text", "text": text}]}}


async def _bad(server: Server, method: str, url: str, **options: Any) -> httpx.Response:
    return await server.client.request(method, url, **options)


async def test_every_4xx_uses_the_envelope() -> None:
    with trio.fail_after(10):
        async with open_server() as server:
            sid = await server.session(scripted("e"))
            agent_id = (await server.client.get(f"/v1/sessions/{sid}")).json()["agent_id"]
            S, NOPE, SS = f"/v1/sessions/{sid}", "/v1/sessions/conv_no", "/v1/sessions"
            ev, IR, SNF = f"{S}/events", "invalid_request", "session_not_found"

            def new(**fields: Any) -> dict[str, Any]:
                return {"json": {"agent_id": agent_id, **fields}}

            def raw(body: bytes) -> dict[str, Any]:
                return {"content": body, "headers": {"Content-Type": "application/json"}}

            cases: list[tuple[str, str, dict[str, Any], int, str, str | None]] = [
                ("POST", ev, {"json": {"type": "dance", "data": {}}}, 422, IR, "type"),
                ("POST", ev, {"json": {"data": {}}}, 422, IR, "type"),
                ("POST", ev, {"json": {"type": 7}}, 422, IR, "type"),
                ("POST", ev, {"json": {"type": "message", "data": {}}}, 422, IR, "data.content"),
                ("POST", ev, {"json": _msg(5)}, 422, IR, "data.content[0].text"),
                ("POST", ev, {"json": {**_msg(), "extra": 1}}, 422, IR, "extra"),
                ("POST", ev, raw(b"not json"), 422, IR, "body"),
                ("POST", ev, {"json": [1, 2]}, 422, IR, "body"),
                ("POST", ev, {"content": b"{}", "headers": {"Content-Type": "text/plain"}}, 415,
                 "unsupported_media_type", None),
                ("POST", f"{ev}?stream=maybe", {"json": _msg()}, 422, IR, "stream"),
                ("POST", f"{ev}?stream=true", {"json": {"type": "interrupt"}}, 422, IR, "stream"),
                ("POST", f"{ev}?stream=true", {"json": {"type": "dance"}}, 422, IR, "type"),
                ("POST", f"{NOPE}/events", {"json": _msg()}, 404, SNF, None),
                ("POST", f"{NOPE}/events?stream=true", {"json": _msg()}, 404, SNF, None),
                ("GET", f"{NOPE}/stream", {}, 404, SNF, None),
                ("GET", f"{S}/stream?after=-1", {}, 422, IR, "after"),
                ("GET", f"{S}/stream", {"headers": {"Last-Event-ID": "x"}}, 422, IR, None),
                ("GET", "/v1/sessions?limit=0", {}, 422, IR, "limit"),
                ("GET", "/v1/sessions?limit=101", {}, 422, IR, "limit"),
                ("GET", "/v1/sessions?limit=ten", {}, 422, IR, "limit"),
                ("GET", f"{S}/items?limit=0", {}, 422, IR, "limit"),
                ("GET", f"{S}/items?order=up", {}, 422, IR, "order"),
                ("GET", f"{NOPE}/items", {}, 404, SNF, None),
                ("GET", f"{NOPE}/child_sessions", {}, 404, SNF, None),
                ("POST", SS, {"json": {}}, 422, IR, "agent_id"),
                ("POST", SS, {"json": {"agent_id": 5}}, 422, IR, "agent_id"),
                ("POST", SS, new(nope=1), 422, IR, "nope"),
                ("POST", SS, new(labels={"a": 1}), 422, IR, "labels.a"),
                ("POST", SS, new(harness_override="nope"), 400, "unknown_harness", None),
                ("POST", SS, new(model_override="bad model!"), 422, IR, "model_override"),
                ("POST", SS, {"json": {"agent_id": "agent_no"}}, 404, "agent_not_found", None),
                ("POST", SS, new(parent_session_id="conv_x"), 404, SNF, None),
                ("PATCH", f"{S}", {"json": {"agent_id": "x"}}, 422, IR, "agent_id"),
                ("PATCH", f"{S}", {"json": {"title": 3}}, 422, IR, "title"),
                ("DELETE", f"{NOPE}", {}, 404, SNF, None),
                ("GET", "/v1/nowhere", {}, 404, "not_found", None),
                ("PUT", "/v1/agents", {}, 405, "method_not_allowed", None),
                # Regressions: each of these was a 500 (review, 2026-11-30).
                ("POST", SS, raw(b'{"agent_id": "\\ud800"}'), 422, IR, "body"),
                ("PATCH", f"{S}", raw(b'{"title": "\\udfff"}'), 422, IR, "body"),
                ("POST", SS, raw(b"[" * 100_000 + b"]" * 100_000), 422, IR, "body"),
                ("POST", ev, raw(b'{"type": "message", "data": NaN}'), 422, IR, "body"),
                ("GET", f"{S}/stream?after={2**70}", {}, 422, IR, "after"),
                ("GET", f"{S}/stream", {"headers": {"Last-Event-ID": str(2**64)}}, 422, IR,
                 "Last-Event-ID"),
                ("POST", ev, {"json": {"type": "message", "data": {"content": [
                    {"type": "input_image", "file_id": "file_nope"}]}}}, 422, IR,
                 "data.content[0].file_id"),
            ]  # fmt: skip
            for method, url, options, status, code, loc in cases:
                answer = await _bad(server, method, url, **options)
                try:
                    assert_error(answer, status, code, loc)
                except AssertionError as exc:
                    raise AssertionError(f"{method} {url} {options}: {answer.text}") from exc
            bad_id = await server.client.get(f"{S}/stream", headers={"Last-Event-ID": "x"})
            assert_error(bad_id, 422, IR, "Last-Event-ID")
            # Bad input changed nothing.
            items = (await server.client.get(f"/v1/sessions/{sid}/items")).json()
            assert items["data"] == []


async def test_5xx_hides_the_cause(monkeypatch: pytest.MonkeyPatch, caplog: Any) -> None:
    with trio.fail_after(10):
        async with open_server() as server:
            sid = await server.session()

            async def broken(*args: Any, **kwargs: Any) -> Any:
                raise RuntimeError("secret sauce")

            monkeypatch.setattr(server.runtime, "list_items", broken)
            answer = await server.client.get(f"/v1/sessions/{sid}/items")
            assert_error(answer, 500, "internal_error")
            assert answer.json()["error"]["message"] == "internal error; the cause was logged"
            assert "secret" not in answer.text
            assert "secret sauce" in caplog.text


async def test_header_auth_requires_identity_and_records_the_owner() -> None:
    with trio.fail_after(10):
        async with open_server(auth="header") as server:
            assert (await server.client.get("/health")).status_code == 200
            assert_error(await server.client.get("/v1/agents"), 401, "unauthorized")
            me = {"X-Forwarded-Email": "ada@example.com"}
            created = await server.client.post("/v1/agents", json=scripted("o"), headers=me)
            assert created.status_code == 201
            session = await server.client.post(
                "/v1/sessions", json={"agent_id": created.json()["id"]}, headers=me
            )
            grants = await server.runtime.list_grants(session.json()["id"])
            assert [(g.user_id, g.owner) for g in grants] == [("ada@example.com", True)]


async def test_openapi_document_matches_the_routes() -> None:
    with trio.fail_after(10):
        async with open_server() as server:
            served = (await server.client.get("/v1/openapi.json")).json()
            assert served == openapi_document()
            assert served["openapi"] == "3.2.0"
            documented = {
                (path, method.upper())
                for path, operations in served["paths"].items()
                for method in operations
            }
            routed = set()
            for rule in server.app.url_map.iter_rules():
                if rule.endpoint.startswith("omnigent_console."):
                    continue  # the web console's files (docs/console.md), not the API
                path = rule.rule.replace("<", "{").replace(">", "}")
                for method in rule.methods - {"HEAD", "OPTIONS"}:
                    routed.add((path, method))
            assert documented == routed
