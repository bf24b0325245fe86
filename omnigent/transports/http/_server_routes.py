"""``GET /health`` and ``GET /v1/servers``: this server, and the others on its database.

``/health`` needs no identity (load balancers call it): it checks the store with one
bounded query and answers ``200 {"status": "ok", "server_id", "store"}``, or ``503``
with ``"status": "unavailable"`` when the database cannot be reached — a server that
cannot reach its database cannot serve. ``/v1/servers`` lists the live servers
sharing the database and how many sessions each runs (one process on SQLite).
"""

from __future__ import annotations

from typing import Any

from quart import Blueprint

from ._answers import ServerList
from ._params import owner, state

__all__ = ["blueprint", "health_blueprint"]

blueprint = Blueprint("omnigent_servers", __name__)
health_blueprint = Blueprint("omnigent_health", __name__)


@health_blueprint.get("/health")
async def health() -> tuple[dict[str, Any], int]:
    answer = await state().runtime.health()
    return answer.to_dict(), 200 if answer.status == "ok" else 503


@blueprint.get("/servers")
async def list_servers() -> dict[str, Any]:
    owner()
    servers = await state().runtime.list_servers()
    return ServerList(tuple(servers)).to_dict()
