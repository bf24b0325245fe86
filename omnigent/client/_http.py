"""A typed Trio client for an omnigent server's HTTP API (``omnigent serve``).

:class:`OmnigentClient` wraps an :class:`httpx.AsyncClient` (its own, or one you pass)
with one method per route and typed answers: :class:`AgentInfo` and
:class:`SessionInfo` records, :class:`~omnigent.model.Item` and
:class:`~omnigent.model.Event` objects. A non-2xx answer raises :class:`ApiError`
with the server's ``code``, ``message`` and ``details``; no answer at all (refused,
timed out, cut off) raises :class:`ServerUnreachable`. Both are :class:`ClientError`.

:meth:`OmnigentClient.events` is the session's SSE stream that survives a dropped
connection: see :mod:`._sse`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

import attrs
import httpx

from ..model import Item, structure
from ._errors import ApiError, ServerUnreachable, transport_reason
from ._sse import EventStream

__all__ = ["AgentInfo", "MessageAccepted", "OmnigentClient", "SessionInfo"]


def _check(response: httpx.Response) -> Any:
    if response.is_success:
        return response.json() if response.content else None
    try:
        error = response.json()["error"]
        raise ApiError(
            response.status_code, error["code"], error["message"], error.get("details", ())
        )
    except (ValueError, KeyError, TypeError):
        raise ApiError(response.status_code, "http_error", response.text[:500]) from None


@attrs.frozen
class AgentInfo:
    """An agent as the server lists it; ``raw`` is the whole answer."""

    id: str
    name: str
    version: int
    harness: str
    model: str | None
    raw: dict[str, Any] = attrs.field(repr=False, eq=False)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AgentInfo:
        return cls(data["id"], data["name"], data["version"], data["harness"], data["model"], data)


@attrs.frozen
class SessionInfo:
    """A session snapshot; ``raw`` has every field the server sent."""

    id: str
    agent_id: str
    agent_name: str
    title: str | None
    status: str
    busy: bool
    model: str | None
    parent_session_id: str | None
    last_event_id: int
    pending_elicitations: tuple[dict[str, Any], ...]
    raw: dict[str, Any] = attrs.field(repr=False, eq=False)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SessionInfo:
        return cls(
            id=data["id"],
            agent_id=data["agent_id"],
            agent_name=data["agent_name"],
            title=data.get("title"),
            status=data["status"],
            busy=bool(data.get("busy")),
            model=data.get("model"),
            parent_session_id=data.get("parent_session_id"),
            last_event_id=int(data.get("last_event_id", 0)),
            pending_elicitations=tuple(data.get("pending_elicitations") or ()),
            raw=data,
        )


@attrs.frozen
class MessageAccepted:
    """``accepted`` (a new turn) or ``buffered`` (a turn was running), and the item id."""

    status: str
    item_id: str


class OmnigentClient:
    """The HTTP API of one omnigent server.

    Args:
        base_url: ``http://127.0.0.1:6767``.
        user: sent as ``X-Forwarded-Email`` (for servers run with ``--auth header``).
        http: an httpx client to use (its ``base_url`` is ignored); by default the
            client owns one, closed by :meth:`aclose` or ``async with``.
    """

    def __init__(
        self,
        base_url: str,
        *,
        user: str | None = None,
        http: httpx.AsyncClient | None = None,
        timeout: float = 30.0,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._owned = http is None
        self._http = http or httpx.AsyncClient(timeout=httpx.Timeout(timeout))
        self._headers = {"X-Forwarded-Email": user} if user else {}

    async def __aenter__(self) -> OmnigentClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the owned httpx client (idempotent)."""
        if self._owned:
            await self._http.aclose()

    async def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        """One request; the decoded answer.

        Raises:
            ApiError: the server answered an error. ServerUnreachable: nothing answered.
        """
        headers = {**self._headers, **kwargs.pop("headers", {})}
        try:
            response = await self._http.request(
                method, f"{self.base_url}{path}", headers=headers, **kwargs
            )
        except httpx.TransportError as exc:
            raise ServerUnreachable(self.base_url, transport_reason(exc)) from exc
        return _check(response)

    # -- agents ----------------------------------------------------------------------

    async def health(self) -> bool:
        """Whether the server answers ``GET /health`` with ``ok``: ``False`` when
        nothing answers, or the server says its store is unavailable."""
        try:
            answer = await self._call("GET", "/health")
        except (ServerUnreachable, ApiError):
            return False
        return isinstance(answer, dict) and answer.get("status") == "ok"

    async def create_agent(self, spec: Mapping[str, Any] | str) -> AgentInfo:
        """Register an agent (a dict, or YAML text); a new version if the name exists."""
        if isinstance(spec, str):
            answer = await self._call(
                "POST",
                "/v1/agents",
                content=spec.encode(),
                headers={"Content-Type": "application/yaml"},
            )
        else:
            answer = await self._call("POST", "/v1/agents", json=dict(spec))
        return AgentInfo.from_dict(answer)

    async def list_agents(self) -> list[AgentInfo]:
        return [AgentInfo.from_dict(a) for a in (await self._call("GET", "/v1/agents"))["data"]]

    async def get_agent(self, agent_id: str) -> AgentInfo:
        return AgentInfo.from_dict(await self._call("GET", f"/v1/agents/{agent_id}"))

    async def get_agent_spec(self, agent_id: str, version: int | None = None) -> dict[str, Any]:
        """An agent version's spec (the latest by default), secrets redacted."""
        params = {} if version is None else {"version": version}
        answer = await self._call("GET", f"/v1/agents/{agent_id}/spec", params=params)
        spec: dict[str, Any] = answer["spec"]
        return spec

    # -- sessions --------------------------------------------------------------------

    async def create_session(
        self, agent_id: str | None = None, *, agent_name: str | None = None, **fields: Any
    ) -> SessionInfo:
        """A new session of an agent, by id or by name; ``fields`` as ``POST /v1/sessions``."""
        body = dict(fields)
        if agent_id is not None:
            body["agent_id"] = agent_id
        if agent_name is not None:
            body["agent_name"] = agent_name
        return SessionInfo.from_dict(await self._call("POST", "/v1/sessions", json=body))

    async def get_session(self, session_id: str) -> SessionInfo:
        return SessionInfo.from_dict(await self._call("GET", f"/v1/sessions/{session_id}"))

    async def list_sessions(
        self,
        *,
        agent_name: str | None = None,
        parent_session_id: str | None = None,
        limit: int = 20,
        after: str | None = None,
        top_level: bool = False,
    ) -> tuple[list[SessionInfo], bool]:
        """One page, newest first, and whether there is more (pass the last id as after).

        ``top_level``: only sessions without a parent (no sub-agents)."""
        query: dict[str, Any] = {"agent_name": agent_name, "parent_session_id": parent_session_id}
        query |= {"limit": limit, "after": after, "top_level": "true" if top_level else None}
        params = {k: v for k, v in query.items() if v is not None}
        answer = await self._call("GET", "/v1/sessions", params=params)
        return [SessionInfo.from_dict(s) for s in answer["data"]], bool(answer["has_more"])

    async def update_session(self, session_id: str, **changes: Any) -> SessionInfo:
        """Change ``title``, ``labels`` or ``model_override`` (``None`` clears)."""
        answer = await self._call("PATCH", f"/v1/sessions/{session_id}", json=changes)
        return SessionInfo.from_dict(answer)

    async def delete_session(self, session_id: str) -> None:
        await self._call("DELETE", f"/v1/sessions/{session_id}")

    async def list_items(
        self, session_id: str, *, order: str = "asc", limit: int | None = None
    ) -> list[Item]:
        """The session's history (every page), as typed items."""
        items: list[Item] = []
        after: str | None = None
        while True:
            query = {"order": order, "limit": limit or 100, "after": after}
            params = {k: v for k, v in query.items() if v is not None}
            page = await self._call("GET", f"/v1/sessions/{session_id}/items", params=params)
            items.extend(structure(i, Item) for i in page["data"])
            if not page["has_more"] or (limit is not None and len(items) >= limit):
                return items[:limit] if limit is not None else items
            after = page["last_id"]

    # -- events ----------------------------------------------------------------------

    async def post_event(self, session_id: str, type: str, data: Any = None) -> Any:
        """``POST /v1/sessions/{id}/events {type, data}``; the answer body."""
        body = {"type": type, "data": {} if data is None else data}
        return await self._call("POST", f"/v1/sessions/{session_id}/events", json=body)

    async def send_message(
        self, session_id: str, content: str | Sequence[dict[str, Any]]
    ) -> MessageAccepted:
        """Post a user message (text, or content blocks)."""
        blocks = [{"type": "input_text", "text": content}] if isinstance(content, str) else content
        answer = await self.post_event(session_id, "message", {"content": list(blocks)})
        return MessageAccepted(answer["status"], answer["item_id"])

    async def interrupt(self, session_id: str) -> None:
        await self.post_event(session_id, "interrupt")

    async def stop_session(self, session_id: str) -> None:
        await self.post_event(session_id, "stop_session")

    async def resolve_elicitation(
        self, session_id: str, elicitation_id: str, action: str, content: Any = None
    ) -> bool:
        """Answer an elicitation the session owns; False if it was not pending there."""
        body: dict[str, Any] = {"action": action}
        if content is not None:
            body["content"] = content
        path = f"/v1/sessions/{session_id}/elicitations/{elicitation_id}/resolve"
        return bool((await self._call("POST", path, json=body))["resolved"])

    @asynccontextmanager
    async def events(
        self,
        session_id: str,
        *,
        after: int | None = None,
        retries: int = 10,
        backoff: float = 0.2,
    ) -> AsyncIterator[EventStream]:
        """The session's events, resumed after a dropped connection; see :mod:`._sse`.

        ``after`` replays from that event id (``0``: everything); ``None`` starts now.

        Resource handling: the HTTP stream is closed when the block exits.
        """
        if after is None:
            after = (await self.get_session(session_id)).last_event_id
        stream = EventStream(
            self._http,
            f"{self.base_url}/v1/sessions/{session_id}/stream",
            after,
            headers=self._headers,
            retries=retries,
            backoff=backoff,
        )
        try:
            yield stream
        finally:
            await stream.aclose()
