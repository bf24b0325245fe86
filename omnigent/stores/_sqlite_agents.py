"""The SQLite store's agents: each name with its numbered, immutable spec versions.

``agents`` holds one row per name and its latest version number; ``agent_versions``
keeps every spec ever stored, so a session pinned to an older version still reads it.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from .._ids import new_id, now
from ..errors import Forbidden
from ._rows import AgentRow
from ._sqlite_base import SQLiteBase

__all__ = ["AgentsMixin"]


class AgentsMixin(SQLiteBase):
    """Agent methods of :class:`~.sqlite.SQLiteStore`."""

    async def put_agent_version(self, name: str, spec: dict[str, Any], owner: str) -> AgentRow:
        """Create the agent ``name``, or add a new version of it; returns its row.

        A spec equal to the latest version's keeps that version (registering the same
        file at every ``run`` or ``serve --agents`` start makes no new version).

        Raises:
            Forbidden: the name belongs to another owner — checked in the write's own
                transaction, so of two owners creating a name at once one is refused.
        """
        spec_text = json.dumps(spec, sort_keys=True)

        def write(c: sqlite3.Connection) -> AgentRow:
            t = now()
            row = c.execute("SELECT * FROM agents WHERE name = ?", (name,)).fetchone()
            if row is None:
                agent_id, version, created, agent_owner = new_id("agent"), 1, t, owner
                c.execute(
                    "INSERT INTO agents VALUES (?, ?, ?, 1, ?, ?)", (agent_id, name, owner, t, t)
                )
            elif row["owner"] != owner:
                raise Forbidden(f"agent {name!r} belongs to another user")
            else:
                latest = self._agent(c, "a.id = ?", row["id"], None)
                if latest is not None and json.dumps(latest.spec, sort_keys=True) == spec_text:
                    return latest
                agent_id, version = row["id"], row["latest_version"] + 1
                created, agent_owner = row["created_at"], row["owner"]
                c.execute(
                    "UPDATE agents SET latest_version = ?, updated_at = ? WHERE id = ?",
                    (version, t, agent_id),
                )
            c.execute(
                "INSERT INTO agent_versions VALUES (?, ?, ?, ?)", (agent_id, version, spec_text, t)
            )
            return AgentRow(agent_id, name, agent_owner, version, spec, created, t)

        return await self._write(write)

    async def get_agent(self, agent_id: str, version: int | None = None) -> AgentRow | None:
        """The agent with that id (its latest version unless ``version`` is given)."""
        return await self._read(lambda c: self._agent(c, "a.id = ?", agent_id, version))

    async def get_agent_by_name(self, name: str) -> AgentRow | None:
        return await self._read(lambda c: self._agent(c, "a.name = ?", name, None))

    async def list_agents(self) -> list[AgentRow]:
        def read(c: sqlite3.Connection) -> list[AgentRow]:
            ids = [r[0] for r in c.execute("SELECT id FROM agents ORDER BY created_at, rowid")]
            return [a for i in ids if (a := self._agent(c, "a.id = ?", i, None)) is not None]

        return await self._read(read)

    @staticmethod
    def _agent(c: sqlite3.Connection, where: str, key: str, version: int | None) -> AgentRow | None:
        row = c.execute(
            "SELECT a.id, a.name, a.owner, v.version, v.spec, a.created_at, v.created_at AS vt "
            "FROM agents a JOIN agent_versions v ON v.agent_id = a.id "
            f"AND v.version = COALESCE(?, a.latest_version) WHERE {where}",
            (version, key),
        ).fetchone()
        if row is None:
            return None
        return AgentRow(
            row["id"],
            row["name"],
            row["owner"],
            row["version"],
            json.loads(row["spec"]),
            row["created_at"],
            row["vt"],
        )
