"""The SQLite store's harness state: small strings a harness keeps on a session.

A native coding agent's own conversation id (Claude Code's session id, a Codex thread
id) lives here, so a later turn continues that conversation — also after a restart.
Rows are keyed by session, harness name and key, and deleted with the session.
"""

from __future__ import annotations

import sqlite3

from ._sqlite_base import SQLiteBase

__all__ = ["HarnessStateMixin"]


class HarnessStateMixin(SQLiteBase):
    """Harness state methods of :class:`~.sqlite.SQLiteStore`."""

    async def get_harness_state(self, session_id: str, harness: str) -> dict[str, str]:
        def read(c: sqlite3.Connection) -> dict[str, str]:
            rows = c.execute(
                "SELECT key, value FROM harness_state WHERE session_id = ? AND harness = ?",
                (session_id, harness),
            )
            return {r[0]: r[1] for r in rows}

        return await self._read(read)

    async def put_harness_state(
        self, session_id: str, harness: str, key: str, value: str | None
    ) -> None:
        def write(c: sqlite3.Connection) -> None:
            if value is None:
                c.execute(
                    "DELETE FROM harness_state WHERE session_id = ? AND harness = ? AND key = ?",
                    (session_id, harness, key),
                )
                return
            # A session deleted meanwhile keeps no state (nothing would delete it).
            c.execute(
                "INSERT INTO harness_state (session_id, harness, key, value) "
                "SELECT ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM sessions WHERE id = ?) "
                "ON CONFLICT (session_id, harness, key) DO UPDATE SET value = excluded.value",
                (session_id, harness, key, value, session_id),
            )

        await self._write(write)
