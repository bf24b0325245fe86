"""Terminals over HTTP, on a real loopback socket: resources, screens, live events."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
import trio

from omnigent.transports.http._params import IDENTITY_HEADER

from .http_helpers import HTTPX_GENERATORS, Server, open_server, open_stream
from .terminal_helpers import BASH

pytestmark = HTTPX_GENERATORS

LAUNCH = {"call": "sys_terminal_launch", "args": {"terminal": "bash", "session": "web"}}
SEND = {
    "call": "sys_terminal_send",
    "args": {"terminal": "bash", "session": "web", "text": "seq 1 80; echo over-$((6 * 7))"},
}
CLOSE = {"call": "sys_terminal_close", "args": {"terminal": "bash", "session": "web"}}


def agent(turns: list[list[dict[str, Any]]]) -> dict[str, Any]:
    config = {"harness": "scripted", "turns": turns}
    return {
        "name": "web-term",
        "executor": {"type": "omnigent", "config": config},
        "terminals": {"bash": BASH},
    }


async def turn(server: Server, session_id: str) -> list[Any]:
    """Post a message and read its streamed turn to the end."""
    body = {"type": "message", "data": {"content": [{"type": "input_text", "text": "go"}]}}
    url = f"/v1/sessions/{session_id}/events?stream=true"
    async with open_stream(server.client, "POST", url, json=body) as stream:
        assert stream.response.status_code == 200
        return await stream.read_until()


async def screen_until(client: httpx.AsyncClient, url: str, marker: str) -> dict[str, Any]:
    with trio.fail_after(10):
        while True:
            answer = await client.get(url)
            assert answer.status_code == 200, answer.text
            if marker in answer.json()["screen"]:
                body: dict[str, Any] = answer.json()
                return body
            await trio.sleep(0.05)


async def test_resources_and_screens_over_http() -> None:
    with trio.fail_after(30):
        async with open_server(
            runtime_options={"allowed_commands": ["bash"], "allowed_env": ["PS1"]}
        ) as server:
            session_id = await server.session(agent([[LAUNCH, SEND], [CLOSE]]))
            base = f"/v1/sessions/{session_id}"
            assert (await server.client.get(f"{base}/resources")).json() == {
                "object": "list",
                "data": [],
            }
            async with open_stream(server.client, "GET", f"{base}/stream?after=0") as live:
                await turn(server, session_id)
                created = await live.read_until(lambda f: f.event == "session.resource.created")
            resource = {
                "id": "terminal_bash_web",
                "type": "terminal",
                "metadata": {"terminal_name": "bash", "session_key": "web", "running": True},
            }
            assert created[-1].data["resource"] == resource
            listed = (await server.client.get(f"{base}/resources")).json()
            assert listed == {"object": "list", "data": [resource]}
            assert (await server.client.get(base)).json()["resources"] == [resource]

            url = f"{base}/resources/terminal_bash_web/screen"
            shown = await screen_until(server.client, url, "over-42")
            assert shown["id"] == "terminal_bash_web" and shown["type"] == "terminal"
            assert shown["scrollback_lines"] == 0 and "\n1\n" not in shown["screen"]
            deeper = (await server.client.get(f"{url}?scrollback=200")).json()
            assert "\n1\n" in deeper["screen"] and deeper["scrollback_lines"] == 200

            for bad in ("-1", "10001", "x"):
                answer = await server.client.get(f"{url}?scrollback={bad}")
                assert answer.status_code == 422, answer.text
                assert answer.json()["error"]["details"][0]["loc"] == "scrollback"
            missing = await server.client.get(f"{base}/resources/terminal_bash_nope/screen")
            assert missing.status_code == 404
            assert missing.json()["error"]["code"] == "resource_not_found"
            unknown = await server.client.get("/v1/sessions/conv_nope/resources")
            assert unknown.status_code == 404
            assert unknown.json()["error"]["code"] == "session_not_found"

            async with open_stream(server.client, "GET", f"{base}/stream") as live:
                frames = await turn(server, session_id)
                deleted = await live.read_until(lambda f: f.event == "session.resource.deleted")
            assert deleted[-1].data["resource_id"] == "terminal_bash_web"
            assert deleted[-1].data["resource_type"] == "terminal"
            outputs = [
                f.data["item"]["output"]
                for f in frames
                if f.event == "response.output_item.done"
                and f.data["item"]["type"] == "function_call_output"
            ]
            assert '"status": "closed"' in outputs[0]
            assert (await server.client.get(f"{base}/resources")).json()["data"] == []
            assert (await server.client.get(url)).status_code == 404


@pytest.mark.parametrize("level", [None, 1])
async def test_reading_a_terminal_needs_read_access(level: int | None) -> None:
    alice, bob = {IDENTITY_HEADER: "alice@x"}, {IDENTITY_HEADER: "bob@x"}
    with trio.fail_after(30):
        bash = {"allowed_commands": ["bash"], "allowed_env": ["PS1"]}
        async with open_server(auth="header", runtime_options=bash) as server:
            made = await server.client.post("/v1/agents", json=agent([[LAUNCH]]), headers=alice)
            body = {"agent_id": made.json()["id"]}
            session_id = (
                await server.client.post("/v1/sessions", json=body, headers=alice)
            ).json()["id"]
            base = f"/v1/sessions/{session_id}"
            if level is not None:
                grant = {"user_id": "bob@x", "level": level}
                assert (
                    await server.client.put(f"{base}/permissions", json=grant, headers=alice)
                ).status_code == 200
            message = {
                "type": "message",
                "data": {"content": [{"type": "input_text", "text": "go"}]},
            }
            async with server.runtime.subscribe(session_id) as events:
                sent = await server.client.post(f"{base}/events", json=message, headers=alice)
                assert sent.status_code == 202
                async for event in events:
                    if event.type == "session.resource.created":
                        break
            screen = f"{base}/resources/terminal_bash_web/screen"
            for url in (f"{base}/resources", screen):
                answer = await server.client.get(url, headers=bob)
                assert answer.status_code == (404 if level is None else 200), answer.text
            await server.runtime.stop_session(session_id)
