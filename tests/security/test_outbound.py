"""URLs a client names are fetched only under the operator's allow-lists, and only to
addresses that are safe after DNS, on every hop; error bodies are not reflected.

Found by the third attack probe (issue 23, defect 2): a client's spec naming
``executor.config.base_url`` or ``mcp_servers[].url`` (with headers of its choosing)
made the server POST to loopback, link-local and metadata addresses, and the answer
came back in ``response.failed``. Now such a spec is ``422`` unless the URL is under
``serve --allow-model-url`` / ``--allow-mcp-url``; what is allowed goes through
:mod:`omnigent.outbound`'s guard (addresses checked after resolution, redirects
checked, no environment proxy); and a model endpoint's error body is shown only as
an OpenAI-style ``error.message``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

import omnigent
from omnigent.errors import SpecError
from omnigent.outbound import REFUSED, GuardedTransport, UrlAllowList, address_refusal
from omnigent.testing import MockLLM, run_turn

from .serve_helpers import open_serve, scripted

SECRET = "internal-secret-7f3a"


@asynccontextmanager
async def fixed_server(answer: Callable[[bytes], bytes]) -> AsyncIterator[tuple[int, list[bytes]]]:
    """A loopback HTTP/1.0 server answering each request with ``answer(request)``;
    yields its port and the requests it got."""
    hits: list[bytes] = []

    async def handle(stream: trio.SocketStream) -> None:
        request = b""
        while b"\r\n\r\n" not in request:
            chunk = await stream.receive_some()
            if not chunk:
                return
            request += chunk
        head, _, body = request.partition(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n"):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":", 1)[1])
        while len(body) < length:
            body += await stream.receive_some()
        hits.append(request)
        await stream.send_all(answer(request))
        await stream.aclose()

    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(partial(trio.serve_tcp, handle, 0, host="127.0.0.1"))
        yield listeners[0].socket.getsockname()[1], hits
        nursery.cancel_scope.cancel()


def reply(status: str, body: bytes = b"", headers: str = "") -> bytes:
    return (
        f"HTTP/1.0 {status}\r\nContent-Length: {len(body)}\r\n{headers}Connection: close\r\n\r\n"
    ).encode() + body


def loop_spec(name: str, base_url: str) -> dict[str, Any]:
    config = {"harness": "loop", "model": "m", "base_url": base_url, "api_key": "k"}
    return {"name": name, "executor": {"type": "omnigent", "config": config}}


async def test_a_client_spec_names_no_url_the_operator_did_not_allow(tmp_path: Path) -> None:
    metadata = "http://169.254.169.254/latest"
    specs = {
        "executor.config.base_url": loop_spec("model", metadata),
        "mcp_servers[0].url": scripted("mcp", mcp_servers=[{"name": "m", "url": metadata}]),
        "sub_agents[0].executor.config.base_url": scripted(
            "boss", sub_agents=[loop_spec("helper", "http://127.0.0.1:1/v1")]
        ),
    }
    with trio.fail_after(30):
        async with open_serve(tmp_path) as served:
            for loc, spec in specs.items():
                answer = await served.client.post("/v1/agents", json=spec)
                assert answer.status_code == 422, answer.text
                assert loc in [d["loc"] for d in answer.json()["error"]["details"]]
                assert "--allow-" in answer.text
            assert (await served.client.get("/v1/agents")).json()["data"] == []


async def test_an_allowed_model_url_works_and_its_error_bodies_stay_home(tmp_path: Path) -> None:
    mock = MockLLM()
    mock.reply_text("hello from the model")
    with trio.fail_after(60):
        async with (
            mock.serve() as base_url,
            fixed_server(lambda _: reply("404 Not Found", SECRET.encode())) as (port, hits),
        ):
            internal = f"http://127.0.0.1:{port}/v1"
            options = ("--allow-model-url", base_url, "--allow-model-url", internal)
            async with open_serve(tmp_path, *options) as served:
                good = await served.agent(loop_spec("good", base_url))
                session = await served.session(agent_id=good)
                done = await _turn(served, session)
                assert done["status"] == "completed", done
                leaky = await served.agent(loop_spec("leaky", internal))
                session = await served.session(agent_id=leaky)
                done = await _turn(served, session)
                assert done["status"] == "failed"
                assert "404" in done["error"]["message"], done
                assert SECRET not in str(done), done
            assert hits, "the allowed endpoint was reached"


async def _turn(served: Any, session: str) -> dict[str, Any]:
    """Send a message with ?stream=true; the turn's terminal response.* event."""
    last: dict[str, Any] = {}
    content = [{"type": "input_text", "text": "hi"}]
    body = {"type": "message", "data": {"role": "user", "content": content}}
    async with served.client.stream(
        "POST", f"/v1/sessions/{session}/events?stream=true", json=body
    ) as stream:
        assert stream.status_code == 200, await stream.aread()
        async for line in stream.aiter_lines():
            if line.startswith("data: "):
                event = json.loads(line[6:])
                if event["type"] in ("response.completed", "response.failed"):
                    last = event["response"] | {"error": event.get("error")}
    return last


async def test_no_allow_list_opens_a_link_local_or_metadata_address() -> None:
    spec = loop_spec("meta", "http://169.254.169.254/v1")
    with trio.fail_after(30):
        async with omnigent.open_runtime(allowed_model_urls=["http://169.254.169.254/"]) as rt:
            agent = await rt.create_agent(spec, from_client=True)
            session = await rt.create_session(agent.id)
            events = await run_turn(rt, session.id)
    failed = [e for e in events if e.type == "response.failed"]
    assert failed and REFUSED in failed[0].error.message, events  # type: ignore[attr-defined]
    assert "link-local" in failed[0].error.message  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("address", "literal", "refused"),
    [
        ("169.254.169.254", True, "link-local"),
        ("fe80::1", True, "link-local"),
        ("fd00:ec2::254", True, "link-local"),
        ("::ffff:169.254.169.254", True, "link-local"),
        ("0.0.0.0", True, "not a destination"),
        ("224.0.0.1", True, "not a destination"),
        ("255.255.255.255", True, "broadcast"),
        ("127.0.0.1", False, "loopback"),
        ("::ffff:127.0.0.1", False, "loopback"),
        ("64:ff9b::a00:1", False, "private"),
        ("10.1.2.3", False, "private"),
        ("100.64.0.1", False, "private"),
        ("fc00::1", False, "private"),
        ("127.0.0.1", True, None),
        ("10.1.2.3", True, None),
        ("93.184.216.34", False, None),
    ],
)
def test_address_rules(address: str, literal: bool, refused: str | None) -> None:
    problem = address_refusal(address, named_literally=literal)
    assert (problem is None) == (refused is None), problem
    if refused is not None:
        assert problem is not None and refused in problem


async def test_a_name_that_resolves_to_a_private_address_is_refused() -> None:
    # DNS rebinding: the operator allowed a public name; it now resolves to loopback.
    async with fixed_server(lambda _: reply("200 OK", SECRET.encode())) as (port, hits):

        async def rebound(host: str, port: int) -> list[str]:
            return ["127.0.0.1"]

        allow = UrlAllowList([f"http://models.example:{port}/"])
        transport = GuardedTransport(allow, resolve=rebound)
        async with httpx.AsyncClient(transport=transport) as client:
            with pytest.raises(httpx.ConnectError, match="loopback"):
                await client.get(f"http://models.example:{port}/v1")
            # The literal address the operator allowed works (and so the guarded pool is
            # the one httpx uses: the name was refused by it, this one passes it).
        literal = UrlAllowList([f"http://127.0.0.1:{port}/"])
        async with httpx.AsyncClient(transport=GuardedTransport(literal)) as client:
            assert (await client.get(f"http://127.0.0.1:{port}/v1")).text == SECRET
    assert len(hits) == 1


async def test_every_redirect_hop_is_checked() -> None:
    async with (
        fixed_server(lambda _: reply("200 OK", SECRET.encode())) as (inner, inner_hits),
        fixed_server(
            lambda request: reply(
                "302 Found",
                headers=f"Location: http://127.0.0.1:{inner}/secret\r\n"
                if b"/mcp/out" in request
                else "Location: /elsewhere\r\n",
            )
        ) as (outer, _),
    ):
        allow = UrlAllowList([f"http://127.0.0.1:{outer}/mcp"])
        transport = GuardedTransport(allow)
        async with httpx.AsyncClient(transport=transport, follow_redirects=True) as client:
            with pytest.raises(httpx.ConnectError, match="under no URL the operator allowed"):
                await client.get(f"http://127.0.0.1:{outer}/mcp/out")
            with pytest.raises(httpx.ConnectError, match="under no URL the operator allowed"):
                await client.get(f"http://127.0.0.1:{outer}/mcp/in")
    assert inner_hits == []


async def test_the_mcp_client_is_guarded_the_same_way() -> None:
    pytest.importorskip("mcp")
    from omnigent.outbound import guarded_mcp_client

    async def rebound(host: str, port: int) -> list[str]:
        return ["10.0.0.7"]

    allow = UrlAllowList(["http://mcp.example/"])
    async with guarded_mcp_client(allow, {"Authorization": "Bearer x"}, resolve=rebound) as http:
        with pytest.raises(Exception, match="private") as caught:
            await http.post("http://mcp.example/mcp", json={})
        assert type(caught.value).__name__ == "ConnectError"
        with pytest.raises(Exception, match="under no URL"):
            await http.post("http://169.254.169.254/latest", json={})


async def test_a_client_sets_only_the_variables_the_operator_named(tmp_path: Path) -> None:
    mcp = {"name": "m", "command": ["mytool"], "env": {"LD_PRELOAD": "/tmp/evil.so"}}
    terminal = {"sh": {"command": "mytool", "env": {"MYTOOL_MODE": "x", "NODE_OPTIONS": "-r x"}}}
    with trio.fail_after(30):
        options = ("--allow-command", "mytool", "--allow-env", "MYTOOL_*")
        async with open_serve(tmp_path, *options) as served:
            answer = await served.client.post(
                "/v1/agents", json=scripted("pre", mcp_servers=[mcp], terminals=terminal)
            )
            assert answer.status_code == 422, answer.text
            locs = sorted(d["loc"] for d in answer.json()["error"]["details"])
            assert locs == ["mcp_servers[0].env.LD_PRELOAD", "terminals.sh.env.NODE_OPTIONS"]
            del terminal["sh"]["env"]["NODE_OPTIONS"]
            del mcp["env"]
            fine = await served.client.post(
                "/v1/agents", json=scripted("fine", mcp_servers=[mcp], terminals=terminal)
            )
            assert fine.status_code == 201, fine.text


async def test_a_websocket_clients_mcp_server_with_a_foreign_variable_is_refused(
    tmp_path: Path,
) -> None:
    pytest.importorskip("mcp")
    server = omnigent.spec.McpServerSpec(
        name="m", command=("mytool",), env={"LD_PRELOAD": "/tmp/evil.so"}
    )
    with trio.fail_after(30):
        async with omnigent.open_runtime(home=tmp_path, allowed_commands=["mytool"]) as rt:
            agent = await rt.create_agent(scripted("a"))
            session = await rt.create_session(agent.id)
            async with rt.open_client_mcp_servers(session.id, [server], from_client=True) as report:
                assert report.connected == ()
                [(name, why)] = report.refused
                assert name == "m" and "LD_PRELOAD" in why


def test_the_library_refuses_bad_allow_list_entries() -> None:
    async def main() -> None:
        for option, value in (
            ("allowed_model_urls", ["ftp://x/"]),
            ("allowed_mcp_urls", ["http://"]),
            ("allowed_env", ["LD PRELOAD"]),
        ):
            with pytest.raises(omnigent.InvalidInput) as caught:
                async with omnigent.open_runtime(**{option: value}):
                    pass
            assert caught.value.details[0].loc == f"{option}[0]"

    trio.run(main)


async def test_an_operator_spec_may_still_name_any_endpoint() -> None:
    with trio.fail_after(30):
        async with omnigent.open_runtime() as rt:
            await rt.create_agent(loop_spec("op", "http://127.0.0.1:1/v1"))
            with pytest.raises(SpecError):
                await rt.create_agent(
                    loop_spec("client", "http://127.0.0.1:1/v1"), from_client=True
                )
