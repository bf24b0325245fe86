"""Bounded parsing, attacked over a real ``omnigent serve`` (issue 9).

A 492-byte YAML alias bomb once blocked the server for 36 s and stored 351 MB; bodies
nested 500 deep answered ``500`` or killed a session's actor with ``RecursionError``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import httpx
import trio

from omnigent.model import MAX_DEPTH

from .serve_helpers import open_serve, run_cli, scripted

YAML = {"Content-Type": "application/yaml"}


def alias_bomb(size: int = 492) -> str:
    """A "billion laughs" agent spec: 9 levels of 9 aliases, ~387 million strings."""
    text = "name: bomb\nexecutor: {type: omnigent, config: {harness: scripted}}\nmetadata:\n"
    text += '  a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
    for previous, name in zip("abcdefgh", "bcdefghi", strict=True):
        text += f"  {name}: &{name} [" + ",".join([f"*{previous}"] * 9) + "]\n"
    pad = size - len(text) - len("description: \n")
    assert pad >= 0
    return f"description: {'x' * pad}\n{text}"


def deep(levels: int, leaf: Any = 1) -> Any:
    value = leaf
    for _ in range(levels):
        value = {"a": value}
    return value


async def _health_while(
    client: httpx.AsyncClient, done: trio.Event, latencies: list[float]
) -> None:
    """Ask ``/health`` again and again until ``done``; record each answer's latency."""
    while not done.is_set():
        start = time.monotonic()
        answer = await client.get("/health")
        assert answer.json()["status"] == "ok"
        latencies.append(time.monotonic() - start)
        await trio.sleep(0.01)


async def test_the_alias_bomb_is_refused_at_once_and_health_answers(tmp_path: Path) -> None:
    bomb = alias_bomb()
    assert len(bomb.encode()) == 492
    with trio.fail_after(30):
        async with (
            open_serve(tmp_path) as served,
            httpx.AsyncClient(base_url=served.url, timeout=10) as health,
        ):
            before = (await served.client.get("/v1/agents")).json()
            latencies: list[float] = []
            done = trio.Event()
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_health_while, health, done, latencies)
                start = time.monotonic()
                answer = await served.client.post("/v1/agents", content=bomb, headers=YAML)
                took = time.monotonic() - start
                await trio.sleep(0.05)
                done.set()
            assert took < 1.0, took
            assert answer.status_code == 422, answer.text
            detail = answer.json()["error"]["details"][0]
            assert "aliases" in detail["msg"] and detail["loc"] == "metadata.b[0]"
            assert latencies and max(latencies) < 1.0
            assert (await served.client.get("/v1/agents")).json() == before
            assert not any(p.stat().st_size > 10 << 20 for p in served.home.iterdir())


async def test_a_bomb_in_a_local_file_is_refused_by_its_expanded_size(tmp_path: Path) -> None:
    # Local files may use aliases (an operator's own anchors), within an expansion bound.
    path = tmp_path / "bomb.yaml"
    path.write_text(alias_bomb())
    db = f"sqlite:///{tmp_path / 'local.db'}"
    start = time.monotonic()
    done = await run_cli("agents", "add", str(path), "--db", db)
    assert time.monotonic() - start < 10
    assert done.returncode == 2, done.stderr
    assert "expands to more than" in done.stderr.decode()
    anchors = tmp_path / "anchors.yaml"
    anchors.write_text(
        "name: anchored\n"
        "executor: {type: omnigent, config: {harness: scripted, script: [{say: hi}]}}\n"
        "policies:\n"
        "  - {name: no_shell, type: deny_tools, tools: &shell [sys_os_shell, sys_os_write]}\n"
        "  - {name: ask_shell, type: ask_tools, tools: *shell}\n"
    )
    added = await run_cli("agents", "add", str(anchors), "--db", db)
    assert added.returncode == 0, added.stderr


async def test_yaml_is_parsed_off_the_event_loop(tmp_path: Path) -> None:
    # A large, valid spec: PyYAML needs a second or more for it. The server keeps
    # answering /health meanwhile, because the parse runs in a worker thread.
    lines = "".join(f"  key{i}: a value of some length, number {i}\n" for i in range(19_000))
    spec = "name: big\nexecutor: {type: omnigent, config: {harness: scripted}}\nmetadata:\n"
    spec += lines
    assert 900_000 < len(spec) < 1 << 20
    with trio.fail_after(60):
        async with (
            open_serve(tmp_path) as served,
            httpx.AsyncClient(base_url=served.url, timeout=30) as health,
        ):
            latencies: list[float] = []
            done = trio.Event()
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_health_while, health, done, latencies)
                start = time.monotonic()
                answer = await served.client.post("/v1/agents", content=spec, headers=YAML)
                took = time.monotonic() - start
                done.set()
            assert answer.status_code == 201, answer.text
            during = [latency for latency in latencies[:-1]]
            assert len(during) >= 3, (took, latencies)
            assert max(during) < took / 2, (took, max(during))
            too_long = spec + "x" * (1 << 20)
            refused = await served.client.post("/v1/agents", content=too_long, headers=YAML)
            assert refused.status_code == 413, refused.text


def _deep_bodies(session_id: str, levels: int) -> list[tuple[str, str, Any, str]]:
    """(method, url, body, expected loc prefix) for every JSON route of the API."""
    s = f"/v1/sessions/{session_id}"
    d = deep(levels)
    return [
        ("POST", "/v1/agents", {**scripted("deep"), "metadata": d}, "metadata.a"),
        (
            "POST",
            "/v1/agents",
            scripted("deep-args", [{"call": "sys_os_read", "args": d}]),
            "executor.config.script[0].args.a",
        ),
        ("POST", "/v1/sessions", {"agent_id": "agent_x", "labels": d}, "labels.a"),
        (
            "POST",
            "/v1/sessions",
            {"agent_id": "agent_x", "initial_items": [d]},
            "initial_items[0].a",
        ),
        ("PATCH", s, {"labels": d}, "labels.a"),
        ("POST", f"{s}/events", {"type": "message", "data": {"content": [d]}}, "data.content[0].a"),
        (
            "POST",
            f"{s}/events",
            {"type": "mcp_elicitation", "data": {"message": "m", "requestedSchema": d}},
            "data.requestedSchema.a",
        ),
        (
            "POST",
            f"{s}/events",
            {"type": "approval", "data": {"elicitation_id": "e", "action": "accept", "content": d}},
            "data.content.a",
        ),
        (
            "POST",
            f"{s}/elicitations/elicit_x/resolve",
            {"action": "accept", "content": d},
            "content.a",
        ),
        (
            "POST",
            f"{s}/hooks/permission-request",
            {"tool_name": "Bash", "tool_input": d},
            "tool_input.a",
        ),
        (
            "POST",
            f"{s}/hooks/codex-elicitation-request",
            {"id": 1, "method": "item/commandExecution/requestApproval", "params": d},
            "params.a",
        ),
        (
            "POST",
            f"{s}/policies/evaluate",
            {"event": {"type": "PHASE_TOOL_CALL", "data": {"tool_name": "x", "tool_input": d}}},
            "event.data.tool_input.a",
        ),
        ("PUT", f"{s}/permissions", {"user_id": d, "level": 1}, "user_id.a"),
    ]


async def test_bodies_nested_500_deep_are_422_with_the_path_on_every_route(tmp_path: Path) -> None:
    with trio.fail_after(60):
        async with open_serve(tmp_path) as served:
            agent_id = await served.agent(scripted("bot", [{"say": "still here"}]))
            session_id = await served.session(agent_id=agent_id)
            for levels in (500, MAX_DEPTH + 1):
                for method, url, body, loc in _deep_bodies(session_id, levels):
                    answer = await served.client.request(method, url, json=body)
                    assert answer.status_code == 422, (url, answer.text)
                    error = answer.json()["error"]
                    assert error["code"] in ("invalid_request", "invalid_spec")
                    found = error["details"][0]
                    assert found["loc"].startswith(loc), (url, found)
                    assert f"deeper than {MAX_DEPTH}" in found["msg"]
            yaml_deep = "name: d\nmetadata: " + "{a: " * 500 + "1" + "}" * 500 + "\n"
            answer = await served.client.post("/v1/agents", content=yaml_deep, headers=YAML)
            assert answer.status_code == 422, answer.text
            assert answer.json()["error"]["details"][0]["loc"].startswith("metadata.a.a")
            # Exactly at the limit is fine.
            at_limit = {**scripted("edge"), "metadata": deep(MAX_DEPTH - 1)}
            assert (await served.client.post("/v1/agents", json=at_limit)).status_code == 201
            # The session and the server are unharmed: a turn runs to its end.
            sent = {"type": "message", "data": {"content": [{"type": "input_text", "text": "hi"}]}}
            async with served.client.stream(
                "POST", f"/v1/sessions/{session_id}/events?stream=true", json=sent
            ) as streamed:
                text = (await streamed.aread()).decode()
            assert "still here" in text and "response.completed" in text
            assert (await served.client.get("/v1/agents")).status_code == 200


async def _exchange(stream: trio.SocketStream, request: bytes) -> bytes:
    """Send ``request`` and read one whole response (headers and Content-Length body)."""
    await stream.send_all(request)
    buffer = b""
    while b"\r\n\r\n" not in buffer:
        chunk = await stream.receive_some(65536)
        assert chunk, f"the connection closed after {buffer!r}"
        buffer += chunk
    head, _, body = buffer.partition(b"\r\n\r\n")
    length = int(next(v for k, v in _headers(head) if k == b"content-length"))
    while len(body) < length:
        chunk = await stream.receive_some(65536)
        assert chunk
        body += chunk
    return head + b"\r\n\r\n" + body


def _headers(head: bytes) -> list[tuple[bytes, bytes]]:
    lines = head.split(b"\r\n")[1:]
    return [(k.strip().lower(), v.strip()) for k, _, v in (line.partition(b":") for line in lines)]


def _post(path: str, body: bytes, content_type: str = "application/json") -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: {content_type}\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode() + body


HEALTH = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"


async def test_the_next_request_after_an_early_answer_on_a_large_body_is_answered(
    tmp_path: Path,
) -> None:
    with trio.fail_after(60):
        async with open_serve(tmp_path) as served:
            big = b"x" * (2 << 20)
            early = [
                (_post("/v1/nowhere", big), b" 404 "),
                (_post("/v1/agents", big), b" 413 "),  # a spec is at most 1 MiB
                (_post("/v1/agents", big, "text/plain"), b" 415 "),
                (
                    _post("/v1/files", b"y" * (30 << 20), "multipart/form-data; boundary=x"),
                    b" 413 ",
                ),
            ]
            for request, status in early:
                stream = await trio.open_tcp_stream("127.0.0.1", served.port)
                async with stream:
                    async with trio.open_nursery() as nursery:
                        # The client writes while the server answers, as a real one does.
                        nursery.start_soon(stream.send_all, request)
                        first = b""
                        while b"\r\n\r\n" not in first:
                            chunk = await stream.receive_some(65536)
                            assert chunk
                            first += chunk
                    assert status in first.split(b"\r\n", 1)[0], first[:200]
                    rest = first.partition(b"\r\n\r\n")[2]
                    length = int(
                        next(
                            v
                            for k, v in _headers(first.partition(b"\r\n\r\n")[0])
                            if k == b"content-length"
                        )
                    )
                    while len(rest) < length:
                        rest += await stream.receive_some(65536)
                    again = await _exchange(stream, HEALTH)
                    assert b" 200 " in again.split(b"\r\n", 1)[0] and b'"ok"' in again
            # httpx, keeping one connection: both answers come on it.
            limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
            async with httpx.AsyncClient(base_url=served.url, limits=limits, timeout=10) as one:
                nowhere = await one.post(
                    "/v1/nowhere", content=big, headers={"Content-Type": "application/json"}
                )
                assert nowhere.status_code == 404
                assert (await one.get("/health")).status_code == 200


async def test_a_body_that_never_ends_gets_its_connection_closed(tmp_path: Path) -> None:
    with trio.fail_after(30):
        async with open_serve(tmp_path) as served:
            stream = await trio.open_tcp_stream("127.0.0.1", served.port)
            async with stream:
                # Declares 100 MB, sends 1 MB, then waits: the answer comes, then EOF.
                head = (
                    b"POST /v1/nowhere HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                    b"Content-Type: application/json\r\nContent-Length: 100000000\r\n\r\n"
                )
                await stream.send_all(head + b"x" * (1 << 20))
                received = b""
                with trio.fail_after(15):
                    while chunk := await stream.receive_some(65536):
                        received += chunk
                assert b" 404 " in received.split(b"\r\n", 1)[0]
                assert b"connection: close" in received.lower()
            assert (await served.client.get("/health")).status_code == 200


async def test_json_bodies_of_every_route_are_checked(tmp_path: Path) -> None:
    # Whatever a route is, a JSON body it reads is decoded by the one strict decoder.
    from omnigent import open_runtime
    from omnigent.transports.http._app import create_app

    async with open_runtime() as rt:
        app = create_app(rt)
        client = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1"
        )
        agent = await rt.create_agent(scripted("bot"))
        session = await rt.create_session(agent.id)
        checked = 0
        async with client:
            for rule in app.url_map.iter_rules():
                methods = rule.methods & {"POST", "PUT", "PATCH"}
                view = app.view_functions[rule.endpoint]
                if not methods or getattr(view, "_omnigent_accepts", None) not in (
                    None,
                    ("application/json",),
                    (
                        "application/json",
                        "application/yaml",
                        "application/x-yaml",
                        "text/yaml",
                        "text/x-yaml",
                    ),
                ):
                    continue
                url = rule.rule.replace("<session_id>", session.id)
                url = url.replace("<elicitation_id>", "elicit_x").replace("<user_id>", "u")
                for method in methods:
                    answer = await client.request(
                        method,
                        url,
                        content=json.dumps({"event": deep(200)}),
                        headers={"Content-Type": "application/json"},
                    )
                    if url.endswith("/mcp"):
                        # MCP speaks JSON-RPC: the refusal is its parse error, not a 5xx.
                        assert answer.status_code == 400, answer.text
                        assert answer.json()["error"]["code"] == -32700
                    else:
                        assert answer.status_code == 422, (method, url, answer.text)
                        details = answer.json()["error"]["details"]
                        assert details[0]["loc"].startswith("event.a.a")
                    checked += 1
        assert checked >= 9
