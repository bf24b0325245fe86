"""``GET /health``, ``GET /metrics`` and ``GET /v1/servers``: this server, and the others
on its database.

``/health`` needs no identity (load balancers call it): it checks the store with one
bounded query and answers ``200 {"status": "ok", "server_id", "store"}``, or ``503``
with ``"status": "unavailable"`` when the database cannot be reached — a server that
cannot reach its database cannot serve. ``/v1/servers`` lists the live servers
sharing the database and how many sessions each runs (one process on SQLite).
``/metrics`` is the runtime's Prometheus metrics (``docs/observability.md``), in the
text exposition format, behind the same identity check as the API.
"""

from __future__ import annotations

from typing import Any

from quart import Blueprint, Response

from ...observability import CONTENT_TYPE
from ._params import owner, state

__all__ = ["blueprint", "health_blueprint"]

blueprint = Blueprint("omnigent_servers", __name__)
health_blueprint = Blueprint("omnigent_health", __name__)


@health_blueprint.get("/health")
async def health() -> tuple[dict[str, Any], int]:
    answer = await state().runtime.health()
    return answer.to_dict(), 200 if answer.status == "ok" else 503


@health_blueprint.get("/metrics")
async def metrics() -> Response:
    owner()
    runtime = state().runtime
    body = runtime.metrics.exposition(runtime.statistics())
    return Response(body, status=200, content_type=CONTENT_TYPE)


@blueprint.get("/servers")
async def list_servers() -> dict[str, Any]:
    from ._answers import ServerList  # imported by the first answer: see _answers

    owner()
    servers = await state().runtime.list_servers()
    return ServerList(tuple(servers)).to_dict()
