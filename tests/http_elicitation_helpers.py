"""Helpers for the elicitation and hook tests over HTTP."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx

from .http_helpers import Frame, Server, SSEReader, open_stream, scripted

CALLS: list[dict[str, Any]] = []

REQUEST = "response.elicitation_request"
RESOLVED = "response.elicitation_resolved"


def x(path: str) -> str:
    """A tool that records its calls."""
    CALLS.append({"path": path})
    return f"x done: {path}"


def asking_agent(name: str = "asker", path: str = "a.txt") -> dict[str, Any]:
    """A scripted agent that calls ``x`` once per turn, behind an ``ask_tools`` policy."""
    spec = scripted(name, [{"call": "x", "args": {"path": path}}, {"say": "done"}])
    spec["policies"] = [{"name": "ask_x", "type": "ask_tools", "tools": ["x"]}]
    return spec


async def asking_session(server: Server, name: str = "asker", **body: Any) -> str:
    server.runtime.register_tool(x, replace=True)
    return await server.session(asking_agent(name), **body)


async def child_of(server: Server, parent: str, spec: dict[str, Any]) -> str:
    server.runtime.register_tool(x, replace=True)
    agent_id = await server.agent(spec)
    created = await server.client.post(
        "/v1/sessions", json={"agent_id": agent_id, "parent_session_id": parent}
    )
    assert created.status_code == 201, created.text
    child_id: str = created.json()["id"]
    return child_id


@asynccontextmanager
async def watch(server: Server, session_id: str) -> AsyncIterator[SSEReader]:
    """The session's live stream (its start is fixed before this yields)."""
    async with open_stream(server.client, "GET", f"/v1/sessions/{session_id}/stream") as reader:
        assert reader.response.status_code == 200
        yield reader


async def next_event(reader: SSEReader, event: str, **match: Any) -> Frame:
    """The next frame of type ``event`` whose data has every ``match`` item."""
    while (frame := await reader.next()) is not None:
        if frame.event == event and all(frame.data.get(k) == v for k, v in match.items()):
            return frame
    raise AssertionError(f"the stream ended before {event} {match}")


async def resolve(
    server: Server, session_id: str, elicitation_id: str, action: str, content: Any = None
) -> httpx.Response:
    body: dict[str, Any] = {"action": action}
    if content is not None:
        body["content"] = content
    return await server.client.post(
        f"/v1/sessions/{session_id}/elicitations/{elicitation_id}/resolve", json=body
    )


async def resolved(server: Server, session_id: str, elicitation_id: str, action: str) -> bool:
    """Resolve; asserts the 202 and returns the ``resolved`` flag."""
    answer = await resolve(server, session_id, elicitation_id, action)
    assert answer.status_code == 202, answer.text
    flag: bool = answer.json()["resolved"]
    return flag


async def page_token(client: httpx.AsyncClient, url: str, **options: Any) -> str:
    """The form token of the approval page at ``url`` (it must show a pending request)."""
    page = await client.get(url, **options)
    found = re.search(r'name="token" value="([^"]+)"', page.text)
    assert found is not None, page.text
    return found.group(1)


async def approve(
    client: httpx.AsyncClient, url: str, form: dict[str, Any], **options: Any
) -> httpx.Response:
    """POST the approval form at ``url`` as its page would: with the page's token."""
    token = await page_token(client, url, headers=options.get("headers"))
    return await client.post(url, data={**form, "token": token}, **options)
