"""The cross-site fence, attacked over a real ``omnigent serve`` (issue 9).

A page the user visits can send "simple" requests (``text/plain``, form bodies) to
127.0.0.1 without a preflight, and a DNS-rebinding page makes the browser send
``Host: attacker.example``. Each attack is replayed as the browser would send it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import httpx
import trio

from .serve_helpers import open_serve, run_cli, scripted

EVIL = "https://attacker.example"
# The overwrite the attack wants: the next session of "coder" runs a shell command.
SHELL_SPEC = json.dumps(scripted("coder", [{"call": "sys_os_shell", "args": {"command": "id"}}]))


def _error(answer: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert answer.status_code == status, answer.text
    body: dict[str, Any] = answer.json()["error"]
    assert body["code"] == code, body
    return body


async def _spec_of(client: httpx.AsyncClient, agent_id: str) -> dict[str, Any]:
    answer = await client.get(f"/v1/agents/{agent_id}")
    assert answer.status_code == 200, answer.text
    found: dict[str, Any] = answer.json()
    return found


async def test_a_cross_site_simple_post_cannot_overwrite_a_known_agent(tmp_path: Path) -> None:
    with trio.fail_after(30):
        async with open_serve(tmp_path) as served:
            agent_id = await served.agent(scripted("coder"))
            before = await _spec_of(served.client, agent_id)
            # What a form or fetch(..., {mode: "no-cors"}) on another site can send.
            simple = [
                {"content": SHELL_SPEC, "headers": {"Content-Type": "text/plain"}},
                {"content": SHELL_SPEC, "headers": {"Content-Type": "text/plain", "Origin": EVIL}},
                {"data": {"name": "coder"}, "headers": {"Origin": EVIL}},
                {"content": SHELL_SPEC, "headers": {"Content-Type": "multipart/form-data"}},
                {"content": SHELL_SPEC},  # no Content-Type at all
            ]
            for options in simple:
                answer = await served.client.post("/v1/agents", **options)
                assert answer.status_code in (403, 415), answer.text
            # A JSON body is not "simple": a browser preflights it, and a foreign
            # Origin is refused even so; Sec-Fetch-Site alone is enough to refuse.
            for headers in ({"Origin": EVIL}, {"Sec-Fetch-Site": "cross-site"}, {"Origin": "null"}):
                answer = await served.client.post(
                    "/v1/agents",
                    content=SHELL_SPEC,
                    headers={"Content-Type": "application/json", **headers},
                )
                _error(answer, 403, "cross_site_request")
            session_id = await served.session(agent_id=agent_id)
            for method, url in (
                ("DELETE", f"/v1/sessions/{session_id}"),
                ("PATCH", f"/v1/sessions/{session_id}"),
                ("POST", f"/v1/sessions/{session_id}/events"),
                ("PUT", f"/v1/sessions/{session_id}/permissions"),
            ):
                answer = await served.client.request(
                    method, url, json={"type": "interrupt"}, headers={"Origin": EVIL}
                )
                _error(answer, 403, "cross_site_request")
            assert await _spec_of(served.client, agent_id) == before
            assert (await served.client.get(f"/v1/sessions/{session_id}")).status_code == 200
            # The server's own pages, and programs (no Origin), still work.
            own = await served.client.post(
                "/v1/agents", json=scripted("other"), headers={"Origin": served.url}
            )
            assert own.status_code == 201, own.text
            same = {"Origin": served.url, "Sec-Fetch-Site": "same-origin"}
            assert (
                await served.client.post("/v1/agents", json=scripted("x"), headers=same)
            ).status_code == 201
            # A foreign page may still *read* nothing it could not before: GETs pass,
            # with no CORS header to let the page see the answer.
            listed = await served.client.get("/v1/agents", headers={"Origin": EVIL})
            assert listed.status_code == 200
            assert "access-control-allow-origin" not in listed.headers


async def test_json_routes_refuse_other_media_types_before_parsing(tmp_path: Path) -> None:
    with trio.fail_after(30):
        async with open_serve(tmp_path) as served:
            agent_id = await served.agent(scripted("bot"))
            session_id = await served.session(agent_id=agent_id)
            routes = [
                ("POST", "/v1/sessions"),
                ("PATCH", f"/v1/sessions/{session_id}"),
                ("POST", f"/v1/sessions/{session_id}/events"),
                ("POST", f"/v1/sessions/{session_id}/elicitations/elicit_x/resolve"),
                ("POST", f"/v1/sessions/{session_id}/hooks/permission-request"),
                ("POST", f"/v1/sessions/{session_id}/hooks/codex-elicitation-request"),
                ("POST", f"/v1/sessions/{session_id}/policies/evaluate"),
                ("PUT", f"/v1/sessions/{session_id}/permissions"),
            ]
            for method, url in routes:
                for media in ("text/plain", "application/x-www-form-urlencoded", "text/yaml"):
                    # Not even JSON: had it been parsed, it would be a 422.
                    answer = await served.client.request(
                        method, url, content=b"{nope", headers={"Content-Type": media}
                    )
                    body = _error(answer, 415, "unsupported_media_type")
                    assert "application/json" in body["message"]
            # YAML is read where documented, and only there.
            yaml_spec = "name: y\nexecutor: {type: omnigent, config: {harness: scripted}}\n"
            answer = await served.client.post(
                "/v1/agents", content=yaml_spec, headers={"Content-Type": "application/yaml"}
            )
            assert answer.status_code == 201, answer.text
            answer = await served.client.post(
                "/v1/files", content=b"x", headers={"Content-Type": "application/json"}
            )
            _error(answer, 415, "unsupported_media_type")


async def test_a_foreign_host_is_misdirected(tmp_path: Path) -> None:
    with trio.fail_after(30):
        async with open_serve(tmp_path, "--allowed-host", "omni.internal") as served:
            for host in ("attacker.example", f"attacker.example:{served.port}", "127.0.0.1.nip.io"):
                for method, url in (
                    ("GET", "/health"),
                    ("GET", "/v1/agents"),
                    ("POST", "/v1/agents"),
                ):
                    answer = await served.client.request(
                        method, url, json=scripted("rebound"), headers={"Host": host}
                    )
                    _error(answer, 421, "misdirected_request")
            for host in (
                f"127.0.0.1:{served.port}",
                f"localhost:{served.port}",
                "localhost",
                "omni.internal",
                "OMNI.internal:443",
            ):
                answer = await served.client.get("/v1/agents", headers={"Host": host})
                assert answer.status_code == 200, (host, answer.text)
            listed = (await served.client.get("/v1/agents")).json()["data"]
            assert listed == []  # the rebound POSTs registered nothing


async def test_an_allowed_origin_gets_cors_and_others_do_not(tmp_path: Path) -> None:
    app = "https://app.example"
    with trio.fail_after(30):
        async with open_serve(tmp_path, "--allowed-origin", app) as served:
            preflight = {
                "Origin": app,
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "content-type",
            }
            answer = await served.client.options("/v1/agents", headers=preflight)
            assert answer.status_code == 204, answer.text
            assert answer.headers["access-control-allow-origin"] == app
            assert "POST" in answer.headers["access-control-allow-methods"]
            assert "content-type" in answer.headers["access-control-allow-headers"].lower()
            made = await served.client.post(
                "/v1/agents",
                json=scripted("webapp"),
                headers={"Origin": app, "Sec-Fetch-Site": "cross-site"},
            )
            assert made.status_code == 201, made.text
            assert made.headers["access-control-allow-origin"] == app
            assert made.headers["access-control-allow-credentials"] == "true"
            assert "Origin" in made.headers["vary"]
            # Errors carry CORS too, so the web app can read them.
            bad = await served.client.post("/v1/sessions", json={}, headers={"Origin": app})
            assert bad.status_code == 422 and bad.headers["access-control-allow-origin"] == app
            other = {**preflight, "Origin": EVIL}
            _error(
                await served.client.options("/v1/agents", headers=other), 403, "cross_site_request"
            )
            answer = await served.client.post(
                "/v1/agents", json=scripted("evil"), headers={"Origin": EVIL}
            )
            _error(answer, 403, "cross_site_request")


async def test_bad_fence_options_are_one_error_line(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'x.db'}"
    done = await run_cli("serve", "--port", "0", "--db", db, "--allowed-origin", "not a url")
    assert done.returncode == 2
    assert done.stderr.decode().startswith("Error: "), done.stderr
    assert "--allowed-origin" in done.stderr.decode()


def _token(page: str) -> str:
    found = re.search(r'name="token" value="([^"]+)"', page)
    assert found is not None, page
    return found.group(1)


async def test_the_approval_form_needs_its_token_and_its_own_origin(tmp_path: Path) -> None:
    app = "https://app.example"
    with trio.fail_after(30):
        async with open_serve(tmp_path, "--allowed-origin", app) as served:
            agent_id = await served.agent(scripted("asker"))
            session_id = await served.session(agent_id=agent_id)
            other_id = await served.session(agent_id=agent_id)
            ask = {"type": "mcp_elicitation", "data": {"message": "Deploy to production?"}}
            posted = await served.client.post(f"/v1/sessions/{session_id}/events", json=ask)
            assert posted.status_code == 202, posted.text
            eid = posted.json()["elicitation_id"]
            url = f"/approve/{session_id}/{eid}"
            page = await served.client.get(url)
            token = _token(page.text)
            # Without the token (a form on another site cannot read the page to get it).
            _error(await served.client.post(url, data={"action": "accept"}), 403, "forbidden")
            # Another elicitation's page, or another session's, has another token.
            other = await served.client.post(f"/v1/sessions/{other_id}/events", json=ask)
            other_url = f"/approve/{other_id}/{other.json()['elicitation_id']}"
            other_token = _token((await served.client.get(other_url)).text)
            assert other_token != token
            wrong = await served.client.post(url, data={"action": "accept", "token": other_token})
            _error(wrong, 403, "forbidden")
            # With the token but a foreign Origin: refused, with or without
            # Sec-Fetch-Site, and even for an origin the API admits.
            form = {"action": "accept", "token": token}
            for headers in (
                {"Origin": EVIL},
                {"Origin": app},
                {"Origin": EVIL, "Sec-Fetch-Site": "cross-site"},
            ):
                answer = await served.client.post(url, data=form, headers=headers)
                _error(answer, 403, "cross_site_request")
            still = await served.client.get(f"/v1/sessions/{session_id}/elicitations/{eid}")
            assert still.json()["status"] == "pending"
            done = await served.client.post(
                url, data=form, headers={"Origin": served.url, "Sec-Fetch-Site": "same-origin"}
            )
            assert done.status_code == 200 and "Accepted" in done.text
            gone = await served.client.get(f"/v1/sessions/{session_id}/elicitations/{eid}")
            assert gone.json()["status"] == "resolved"


async def test_served_uploads_never_run_in_the_servers_origin(tmp_path: Path) -> None:
    with trio.fail_after(30):
        async with open_serve(tmp_path) as served:
            uploads = {
                "page.html": ("text/html", b"<script>fetch('/v1/agents')</script>"),
                "logo.svg": ("image/svg+xml", b"<svg><script>alert(1)</script></svg>"),
                "notes.txt": ("text/plain", b"<script>alert(1)</script>"),
                "dot.png": ("image/png", b"\x89PNG\r\n\x1a\n"),
            }
            served_headers: dict[str, httpx.Headers] = {}
            for name, (media, content) in uploads.items():
                up = await served.client.post("/v1/files", files={"file": (name, content, media)})
                assert up.status_code == 201, up.text
                got = await served.client.get(f"/v1/files/{up.json()['id']}/content")
                assert got.status_code == 200 and got.content == content
                served_headers[name] = got.headers
            for headers in served_headers.values():
                assert headers["x-content-type-options"] == "nosniff"
                assert "sandbox" in headers["content-security-policy"]
            for name in ("page.html", "logo.svg", "notes.txt"):
                disposition = served_headers[name]["content-disposition"]
                assert disposition.startswith("attachment;") and name in disposition
            assert "content-disposition" not in served_headers["dot.png"]


async def test_the_websocket_upgrade_passes_the_same_fence(tmp_path: Path) -> None:
    upgrade = {
        "Connection": "Upgrade",
        "Upgrade": "websocket",
        "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
        "Sec-WebSocket-Version": "13",
    }

    async def try_upgrade(url: str, **headers: str) -> httpx.Response:
        # One connection per attempt: a refused upgrade closes its connection.
        async with httpx.AsyncClient(timeout=10) as client:
            return await client.get(url, headers={**upgrade, **headers})

    with trio.fail_after(30):
        async with open_serve(tmp_path) as served:
            await served.agent(scripted("default"))
            url = f"{served.url}/v1/ws"
            rebound = await try_upgrade(url, Host=f"attacker.example:{served.port}")
            _error(rebound, 421, "misdirected_request")
            for headers in ({"Origin": EVIL}, {"Sec-Fetch-Site": "cross-site"}):
                _error(await try_upgrade(url, **headers), 403, "cross_site_request")


async def test_an_origin_of_another_scheme_is_foreign(tmp_path: Path) -> None:
    # Found by the third probe: the Origin check compared host and port only, so a page
    # at https://127.0.0.1:PORT (or one a network attacker injects over plain http into
    # a server published over https) passed as the server's own.
    upgrade = {
        "Connection": "Upgrade",
        "Upgrade": "websocket",
        "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
        "Sec-WebSocket-Version": "13",
    }
    with trio.fail_after(30):
        async with open_serve(tmp_path) as served:
            await served.agent(scripted("default"))
            other = served.url.replace("http://", "https://")
            answer = await served.client.post(
                "/v1/agents", json=scripted("x"), headers={"Origin": other}
            )
            _error(answer, 403, "cross_site_request")
            async with httpx.AsyncClient(timeout=10) as client:
                refused = await client.get(
                    f"{served.url}/v1/ws", headers={**upgrade, "Origin": other}
                )
            _error(refused, 403, "cross_site_request")
            # Behind a TLS proxy that says so, https is the server's own scheme...
            proxied = {"Origin": other, "X-Forwarded-Proto": "https"}
            made = await served.client.post("/v1/agents", json=scripted("y"), headers=proxied)
            assert made.status_code == 201, made.text
            # ...and then a plain-http page is the foreign one.
            plain = {"Origin": served.url, "X-Forwarded-Proto": "https"}
            answer = await served.client.post("/v1/agents", json=scripted("z"), headers=plain)
            _error(answer, 403, "cross_site_request")
