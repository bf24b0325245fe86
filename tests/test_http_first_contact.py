"""What a newcomer following the README hits first: sessions by agent name, JSON always."""

from __future__ import annotations

import httpx
import pytest
import trio

from .http_helpers import HTTPX_GENERATORS, open_server, scripted

pytestmark = HTTPX_GENERATORS


async def test_a_session_by_agent_name() -> None:
    with trio.fail_after(10):
        async with open_server() as server:
            agent_id = await server.agent(scripted("greeter"))
            answer = await server.client.post("/v1/sessions", json={"agent_name": "greeter"})
            assert answer.status_code == 201, answer.text
            assert answer.json()["agent_id"] == agent_id
            assert answer.json()["agent_name"] == "greeter"


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ({"agent_name": "nobody"}, 404, "agent_not_found"),
        ({}, 422, "invalid_request"),
        ({"agent_name": "greeter", "agent_id": "agent_x"}, 422, "invalid_request"),
        ({"agent_name": 3}, 422, "invalid_request"),
    ],
)
async def test_bad_agent_references(body: dict[str, object], status: int, code: str) -> None:
    with trio.fail_after(10):
        async with open_server() as server:
            await server.agent(scripted("greeter"))
            answer = await server.client.post("/v1/sessions", json=body)
            assert answer.status_code == status, answer.text
            assert answer.json()["error"]["code"] == code
            listed = await server.client.get("/v1/sessions")
            assert listed.json()["data"] == []  # nothing was created


async def test_the_library_takes_an_agent_name_too() -> None:
    with trio.fail_after(10):
        async with open_server() as server:
            agent_id = await server.agent(scripted("greeter"))
            session = await server.runtime.create_session(agent_name="greeter")
            assert session.agent_id == agent_id


@pytest.mark.parametrize(
    ("path", "status"),
    [
        ("/v1/agents/", 200),  # a trailing slash reaches the route
        ("/health/", 200),
        ("/v1//agents", 404),  # a double slash is no route: the JSON envelope
        ("/v1/sessions//x", 404),
        ("/v1/nope", 404),
        ("/v1/nope/", 404),
    ],
)
async def test_odd_slashes_answer_json_never_a_redirect(path: str, status: int) -> None:
    with trio.fail_after(10):
        async with open_server() as server:
            answer = await server.client.get(path)  # httpx keeps the path as given
            assert answer.status_code == status, answer.text
            assert answer.headers["content-type"] == "application/json"
            if status == 404:
                assert answer.json()["error"]["code"] == "not_found"
                assert path in answer.json()["error"]["message"]


async def test_health_with_a_trailing_slash_needs_no_identity() -> None:
    with trio.fail_after(10):
        async with open_server(auth="header") as server:
            assert (await server.client.get("/health/")).status_code == 200
            denied = await server.client.get("/v1/agents/")
            assert denied.status_code == 401


def test_httpx_keeps_the_path() -> None:
    # The test above relies on it: no tidying of the path on the way.
    assert httpx.URL("http://h/v1//agents").raw_path == b"/v1//agents"
