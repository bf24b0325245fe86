"""The model usage each session and each session tree has used, in both stores.

A turn's usage (the sum of its model calls, as its harness reported them) is added
once, when the turn ends: to the session's own row (``scope = 'own'``), and to the
``tree`` row of the session and of every session above it — so a snapshot reads a
tree's sum in one row, however deep the tree. Rows are deleted with their session
(:data:`~._sql_sessions.SESSION_TABLES`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..model import Usage
from ._sql import SQLBase, SQLConn

__all__ = ["SQLUsageMixin"]

_COUNTS = "input_tokens, output_tokens, cached_input_tokens, model_calls, context_tokens"
# Added to what is there; ``context_tokens`` is the latest call's, and a cost stays
# NULL until a priced usage arrives.
_UPSERT = (
    f"INSERT INTO session_usage (session_id, scope, {_COUNTS}, cost_usd) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (session_id, scope) DO UPDATE SET "
    "input_tokens = session_usage.input_tokens + excluded.input_tokens, "
    "output_tokens = session_usage.output_tokens + excluded.output_tokens, "
    "cached_input_tokens = session_usage.cached_input_tokens + excluded.cached_input_tokens, "
    "model_calls = session_usage.model_calls + excluded.model_calls, "
    "context_tokens = CASE WHEN excluded.context_tokens > 0 THEN excluded.context_tokens "
    "ELSE session_usage.context_tokens END, "
    "cost_usd = CASE WHEN excluded.cost_usd IS NULL THEN session_usage.cost_usd "
    "ELSE COALESCE(session_usage.cost_usd, 0) + excluded.cost_usd END"
)
_ANCESTRY = (
    "WITH RECURSIVE up(id) AS (SELECT CAST(? AS TEXT) "
    "UNION SELECT s.parent_session_id FROM sessions s JOIN up ON s.id = up.id "
    "WHERE s.parent_session_id IS NOT NULL) SELECT id FROM up"
)


def _usage(r: Sequence[Any]) -> Usage:
    input_tokens, output_tokens = int(r[0]), int(r[1])
    return Usage(
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        total_tokens=input_tokens + output_tokens,
        cached_input_tokens=int(r[2]),
        model_calls=int(r[3]),
        context_tokens=int(r[4]),
        cost_usd=None if r[5] is None else float(r[5]),
    )


class SQLUsageMixin(SQLBase):
    """``add_usage`` and ``usage_of``: a session's and its tree's sums."""

    async def add_usage(self, session_id: str, usage: Usage) -> None:
        """Add a turn's ``usage`` to the session and to the tree sums above it.

        A session that no longer exists adds nothing.
        """
        upsert = self.dialect.q(_UPSERT)
        ancestry = self.dialect.q(_ANCESTRY)
        counts = (
            usage.input_tokens,
            usage.output_tokens,
            usage.cached_input_tokens,
            usage.model_calls,
            usage.context_tokens,
            usage.cost_usd,
        )
        exists = self.dialect.q("SELECT 1 FROM sessions WHERE id = ?")

        def write(c: SQLConn) -> None:
            if c.execute(exists, (session_id,)).fetchone() is None:
                return
            c.execute(upsert, (session_id, "own", *counts))
            for (ancestor,) in c.execute(ancestry, (session_id,)).fetchall():
                c.execute(upsert, (ancestor, "tree", *counts))

        await self._sql_write(write)

    async def usage_of(self, session_ids: Sequence[str]) -> dict[str, tuple[Usage, Usage]]:
        """Each session's ``(own, tree)`` usage; sessions that used none are absent."""
        if not session_ids:
            return {}
        condition, params = self.dialect.in_list("session_id", session_ids)
        query = self.dialect.q(
            f"SELECT session_id, scope, {_COUNTS}, cost_usd FROM session_usage WHERE {condition}"
        )

        def read(c: SQLConn) -> dict[str, tuple[Usage, Usage]]:
            found: dict[str, dict[str, Usage]] = {}
            for row in c.execute(query, params).fetchall():
                found.setdefault(row[0], {})[row[1]] = _usage(row[2:])
            empty = Usage()
            return {
                sid: (scopes.get("own", empty), scopes.get("tree", empty))
                for sid, scopes in found.items()
            }

        return await self._sql_read(read)
