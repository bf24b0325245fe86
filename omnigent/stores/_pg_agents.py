"""The PostgreSQL store's agents: each name with its numbered, immutable spec versions.

As in the SQLite store: ``agents`` holds one row per name and its latest version
number, ``agent_versions`` every spec ever stored. Two servers registering the same
name at once (``serve --agents DIR`` on both) are serialised by a row lock on the
agent, so they agree on one version — and on its owner: the owner is checked under
that lock, so of two owners creating a name at once exactly one gets it.
"""

from __future__ import annotations

import json
from typing import Any, LiteralString

from .._ids import new_id, now
from ..errors import Forbidden
from ._pg_base import Conn, PGBase
from ._rows import AgentRow

__all__ = ["AgentsMixin"]

_SELECT = (
    "SELECT a.id, a.name, a.owner, v.version, v.spec, a.created_at, v.created_at "
    "FROM agents a JOIN agent_versions v ON v.agent_id = a.id "
)


def _row(r: tuple[Any, ...]) -> AgentRow:
    return AgentRow(r[0], r[1], r[2], r[3], json.loads(r[4]), r[5], r[6])


def _agent(c: Conn, where: LiteralString, key: str, version: int | None) -> AgentRow | None:
    sql = _SELECT + "AND v.version = COALESCE(%s, a.latest_version) WHERE " + where
    r = c.execute(sql, (version, key)).fetchone()
    return None if r is None else _row(r)


class AgentsMixin(PGBase):
    """Agent methods of :class:`~.postgres.PostgresStore`."""

    async def put_agent_version(self, name: str, spec: dict[str, Any], owner: str) -> AgentRow:
        """Create the agent ``name``, or add a new version of it; returns its row.

        A spec equal to the latest version's keeps that version (so a retry after a
        lost answer, or a second server registering the same file, adds none).

        Raises:
            Forbidden: the name belongs to another owner (checked under the agent's
                row lock, in the write's own transaction).
        """
        spec_text = json.dumps(spec, sort_keys=True)
        fresh_id = new_id("agent")

        def write(c: Conn) -> AgentRow:
            t = now()
            c.execute(
                "INSERT INTO agents (id, name, owner, latest_version, created_at, updated_at) "
                "VALUES (%s, %s, %s, 0, %s, %s) ON CONFLICT (name) DO NOTHING",
                (fresh_id, name, owner, t, t),
            )
            r = c.execute(
                "SELECT id, owner, latest_version, created_at FROM agents WHERE name = %s "
                "FOR UPDATE",
                (name,),
            ).fetchone()
            assert r is not None
            agent_id, agent_owner, latest, created = r
            if agent_owner != owner:
                raise Forbidden(f"agent {name!r} belongs to another user")
            if latest:
                current = _agent(c, "a.id = %s", agent_id, None)
                if current is not None and json.dumps(current.spec, sort_keys=True) == spec_text:
                    return current
            version = latest + 1
            c.execute(
                "UPDATE agents SET latest_version = %s, updated_at = %s WHERE id = %s",
                (version, t, agent_id),
            )
            c.execute(
                "INSERT INTO agent_versions VALUES (%s, %s, %s, %s)",
                (agent_id, version, spec_text, t),
            )
            return AgentRow(agent_id, name, agent_owner, version, spec, created, t)

        return await self._transaction(write)

    async def get_agent(self, agent_id: str, version: int | None = None) -> AgentRow | None:
        """The agent with that id (its latest version unless ``version`` is given)."""
        return await self._read(lambda c: _agent(c, "a.id = %s", agent_id, version))

    async def get_agent_by_name(self, name: str) -> AgentRow | None:
        return await self._read(lambda c: _agent(c, "a.name = %s", name, None))

    async def list_agents(self) -> list[AgentRow]:
        """Every agent at its latest version, oldest first."""

        def read(c: Conn) -> list[AgentRow]:
            sql = _SELECT + "AND v.version = a.latest_version ORDER BY a.created_at, a.seq"
            return [_row(r) for r in c.execute(sql)]

        return await self._read(read)
