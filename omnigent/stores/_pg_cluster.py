"""The PostgreSQL store's cluster tables: servers, leases and commands.

Implements :class:`~._cluster.ClusterStore` (see there for the model). Every time
compared between servers is the database's ``now()``; TTLs are seconds.

A lease row is keyed by a session tree's root. ``claim`` inserts it, or takes it when
it is this instance's or expired — recording in ``taken_from`` whose expired lease it
took, so the claimer knows to recover the tree. Renewal (:meth:`ClusterMixin.heartbeat`)
extends only leases that are still live: a lease that expired is lost even if nobody
took it yet, because events its holder tried to write meanwhile were refused.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from contextlib import AbstractAsyncContextManager

import attrs
import trio

from .._ids import now
from ._cluster import COMMANDS_CHANNEL, Claim, CommandRow, Notification, RunnerLinkRow, ServerRow
from ._pg_base import Conn, PGBase
from ._pg_listen import open_listener
from ._pg_sessions import trees_of

__all__ = ["ClusterMixin"]

_UNFINISHED = ["launching", "running", "waiting"]


class ClusterMixin(PGBase):
    """Cluster methods of :class:`~.postgres.PostgresStore`."""

    url: str

    @property
    def _me(self) -> str:
        if self.instance is None:
            raise RuntimeError("this store was opened without a cluster instance key")
        return self.instance

    # -- servers ---------------------------------------------------------------------

    async def register_server(self, name: str, host: str, pid: int, ttl: float) -> float | None:
        """Register this instance as ``name`` (``None``), or say when its holder expires."""
        me = self._me

        def write(c: Conn) -> float | None:
            r = c.execute(
                "INSERT INTO servers AS s (name, instance, host, pid, started_at, expires_at) "
                "VALUES (%s, %s, %s, %s, %s, now() + make_interval(secs => %s)) "
                "ON CONFLICT (name) DO UPDATE SET instance = EXCLUDED.instance, "
                "host = EXCLUDED.host, pid = EXCLUDED.pid, started_at = EXCLUDED.started_at, "
                "expires_at = EXCLUDED.expires_at "
                "WHERE s.expires_at <= now() OR s.instance = EXCLUDED.instance RETURNING 1",
                (name, me, host, pid, now(), ttl),
            ).fetchone()
            if r is not None:
                return None
            left = c.execute(
                "SELECT EXTRACT(EPOCH FROM expires_at - now()) FROM servers WHERE name = %s",
                (name,),
            ).fetchone()
            return 0.0 if left is None else max(0.0, float(left[0]))

        return await self._run(write)

    async def heartbeat(self, ttl: float) -> set[str] | None:
        """Extend the heartbeat and the live leases; the roots still held.

        ``None`` when this instance's server row is gone (another instance took the
        name after this one's heartbeat expired): this process is no longer a member.
        """
        me = self._me

        def write(c: Conn) -> set[str] | None:
            rows = c.execute(
                "WITH srv AS (UPDATE servers SET expires_at = now() + make_interval(secs => %s) "
                "WHERE instance = %s RETURNING 1), "
                "kept AS (UPDATE leases SET expires_at = now() + make_interval(secs => %s) "
                f"WHERE root_id IN ({_MINE}{_IN_ORDER}) AND EXISTS (SELECT 1 FROM srv) "
                "RETURNING root_id) "
                "SELECT (SELECT count(*) FROM srv), root_id FROM (SELECT root_id FROM kept "
                "UNION ALL SELECT NULL) k",
                (ttl, me, ttl, me),
            ).fetchall()
            if not rows or not rows[0][0]:
                return None
            return {r[1] for r in rows if r[1] is not None}

        # Cancellable: the renewer gives a heartbeat up at its own deadline, and one
        # that lands late only extends what was held anyway.
        return await self._run(write, cancellable=True)

    async def unregister_server(self) -> None:
        """Release this instance's live leases and delete its server row."""
        me = self._me

        def write(c: Conn) -> None:
            c.execute("DELETE FROM leases WHERE instance = %s AND expires_at > now()", (me,))
            c.execute("DELETE FROM runner_links WHERE instance = %s", (me,))
            c.execute("DELETE FROM servers WHERE instance = %s", (me,))

        await self._transaction(write)

    async def live_servers(self) -> list[ServerRow]:
        """Every server whose heartbeat is live, oldest first, with its session count."""

        def read(c: Conn) -> list[ServerRow]:
            rows = c.execute(
                "SELECT v.name, v.instance, v.host, v.pid, v.started_at, "
                "(SELECT count(*) FROM leases l JOIN sessions s ON s.root_session_id = l.root_id "
                "WHERE l.instance = v.instance AND l.expires_at > now()) "
                "FROM servers v WHERE v.expires_at > now() ORDER BY v.started_at, v.name"
            )
            return [ServerRow(r[0], r[1], r[2], r[3], r[4], int(r[5])) for r in rows]

        return await self._read(read)

    # -- runner links ----------------------------------------------------------------

    async def link_runner(self, runner_id: str, server: str, connected_at: float) -> str | None:
        me = self._me

        def write(c: Conn) -> str | None:
            # Taken over only from this instance, or from a server that is not live.
            r = c.execute(
                "INSERT INTO runner_links AS l (runner_id, instance, server, connected_at) "
                "VALUES (%s, %s, %s, %s) ON CONFLICT (runner_id) DO UPDATE SET "
                "instance = EXCLUDED.instance, server = EXCLUDED.server, "
                "connected_at = EXCLUDED.connected_at "
                "WHERE l.instance = EXCLUDED.instance OR NOT EXISTS (SELECT 1 FROM servers v "
                "WHERE v.instance = l.instance AND v.expires_at > now()) RETURNING 1",
                (runner_id, me, server, connected_at),
            ).fetchone()
            if r is not None:
                return None
            held = c.execute(
                "SELECT server FROM runner_links WHERE runner_id = %s", (runner_id,)
            ).fetchone()
            return "another server" if held is None else str(held[0])

        return await self._run(write)

    async def unlink_runner(self, runner_id: str) -> None:
        me = self._me
        await self._run(
            lambda c: c.execute(
                "DELETE FROM runner_links WHERE runner_id = %s AND instance = %s",
                (runner_id, me),
            )
        )

    async def runner_links(self) -> list[RunnerLinkRow]:
        def read(c: Conn) -> list[RunnerLinkRow]:
            rows = c.execute(
                "SELECT l.runner_id, l.instance, l.server, l.connected_at FROM runner_links l "
                "JOIN servers v ON v.instance = l.instance AND v.expires_at > now() "
                "ORDER BY l.runner_id"
            )
            return [RunnerLinkRow(r[0], r[1], r[2], float(r[3])) for r in rows]

        return await self._read(read)

    # -- leases ----------------------------------------------------------------------

    async def claim(self, root_id: str, ttl: float) -> Claim:
        """Take the tree's lease if it is free, expired, or already this instance's.

        Returns who holds it afterwards; ``taken_from`` is set when this call took
        over an expired lease (the tree needs recovering), and ``sessions`` — read
        after the lease is this instance's, on the same connection — when it holds
        it now.
        """
        return (await self.claim_all([root_id], ttl))[root_id]

    async def claim_all(self, root_ids: Collection[str], ttl: float) -> dict[str, Claim]:
        """:meth:`claim` for several trees at once: two statements for trees nobody
        holds, whatever their number.

        Deadlocks: the trees without a lease row are inserted in one statement, in
        root order (two servers' batches insert in the same order), and an existing
        row is neither locked nor waited for there; each tree with a row — another
        instance's, expired, or this one's — is claimed alone, as before batches, a
        statement that locks one row and waits holding no other.
        """
        me = self._me
        roots = sorted(root_ids)

        def write(c: Conn) -> dict[str, Claim]:
            rows = c.execute(_CLAIM_FREE, (me, me, ttl, roots)).fetchall()
            claims = {r[0]: Claim(r[0], me, r[1]) for r in rows}
            for root in roots:
                if root not in claims:
                    r = c.execute(_CLAIM_ONE, (root, me, me, ttl)).fetchone()
                    if r is not None:
                        claims[root] = Claim(root, r[0], r[1], r[2])
            if claims:
                trees = trees_of(c, list(claims))
                for root, claim in claims.items():
                    tree = trees.get(root, [])
                    below = tuple(session for session, _ in tree if session != root)
                    claims[root] = attrs.evolve(claim, sessions=below, heads=tuple(tree))
            others = [root for root in roots if root not in claims]
            if others:
                claims.update((held.root_id, held) for held in _holders(c, others))
            # Released between the statements: nobody holds it; the caller retries.
            return {root: claims.get(root) or Claim(root, "", "") for root in roots}

        return await self._run(write)

    async def release(self, *root_ids: str) -> None:
        """Give up this instance's live leases on these trees, in one statement."""
        me = self._me
        roots = list(root_ids)
        await self._run(
            lambda c: c.execute(
                f"DELETE FROM leases WHERE root_id IN ({_MINE} AND root_id = ANY(%s){_IN_ORDER})",
                (me, roots),
            )
        )

    async def lease_holder(self, root_id: str) -> Claim | None:
        """Who holds the tree's live lease (``None``: free, or expired)."""
        return await self._read(lambda c: _holder(c, root_id))

    async def claim_expired(self, ttl: float, limit: int) -> list[Claim]:
        """Take over up to ``limit`` expired leases (``Claim.taken_from``: whose they were)."""
        me = self._me

        def write(c: Conn) -> list[Claim]:
            rows = c.execute(
                "WITH gone AS (SELECT root_id, instance FROM leases WHERE expires_at <= now() "
                "ORDER BY expires_at LIMIT %s FOR UPDATE SKIP LOCKED) "
                "UPDATE leases l SET instance = %s, "
                "server = COALESCE((SELECT name FROM servers WHERE instance = %s), ''), "
                "acquired_at = now(), expires_at = now() + make_interval(secs => %s), "
                "taken_from = gone.instance FROM gone WHERE l.root_id = gone.root_id "
                "RETURNING l.root_id, l.instance, l.server, l.taken_from",
                (limit, me, me, ttl),
            ).fetchall()
            return [Claim(*r) for r in rows]

        return await self._run(write)

    async def orphaned_roots(self, limit: int, min_age: float = 0.0) -> list[str]:
        """Trees with unfinished work but no lease row (see the protocol)."""

        def read(c: Conn) -> list[str]:
            rows = c.execute(
                "SELECT DISTINCT s.root_session_id FROM sessions s WHERE "
                "(s.status = ANY(%(unfinished)s) "
                "OR EXISTS (SELECT 1 FROM items i WHERE i.pending AND i.session_id = s.id "
                "AND i.created_at <= %(before)s) "
                "OR EXISTS (SELECT 1 FROM running_tasks t WHERE t.session_id = s.id "
                "AND t.started_at <= %(before)s)) "
                "AND NOT EXISTS (SELECT 1 FROM leases l WHERE l.root_id = s.root_session_id) "
                "LIMIT %(limit)s",
                {"unfinished": _UNFINISHED, "before": now() - min_age, "limit": limit},
            )
            return [r[0] for r in rows]

        return await self._read(read)

    async def next_expiry(self) -> float | None:
        """Seconds until the first live lease of another instance expires."""
        me = self._me

        def read(c: Conn) -> float | None:
            r = c.execute(
                "SELECT EXTRACT(EPOCH FROM min(expires_at) - now()) FROM leases "
                "WHERE instance <> %s",
                (me,),
            ).fetchone()
            return None if r is None or r[0] is None else max(0.0, float(r[0]))

        return await self._read(read)

    # -- commands --------------------------------------------------------------------

    async def post_command(self, command: CommandRow) -> None:
        """Store a command and notify its target; a repeat of the same id is ignored."""

        def write(c: Conn) -> None:
            c.execute(
                "WITH ins AS (INSERT INTO commands (id, target, sender, session_id, kind, "
                "payload, reply_to) VALUES (%s, %s, %s, %s, %s, %s, %s) "
                "ON CONFLICT (id) DO NOTHING RETURNING target) "
                "SELECT pg_notify(%s, target) FROM ins",
                (
                    command.id,
                    command.target,
                    command.sender,
                    command.session_id,
                    command.kind,
                    command.payload,
                    command.reply_to,
                    COMMANDS_CHANNEL,
                ),
            )

        await self._run(write)

    async def take_commands(self, limit: int) -> list[CommandRow]:
        """Remove and return up to ``limit`` commands for this instance, oldest first."""
        me = self._me

        def write(c: Conn) -> list[CommandRow]:
            rows = c.execute(
                "DELETE FROM commands WHERE seq IN (SELECT seq FROM commands WHERE target = %s "
                "ORDER BY seq LIMIT %s FOR UPDATE SKIP LOCKED) "
                "RETURNING seq, id, target, sender, session_id, kind, payload, reply_to",
                (me, limit),
            ).fetchall()
            return [CommandRow(*r[1:]) for r in sorted(rows)]

        return await self._run(write)

    async def collect_garbage(self, max_age: float) -> None:
        """Forget long-dead servers, and commands addressed to no live instance."""

        def write(c: Conn) -> None:
            c.execute(
                "DELETE FROM servers WHERE expires_at < now() - make_interval(secs => %s)",
                (max_age,),
            )
            c.execute(
                "DELETE FROM commands c WHERE created_at < now() - make_interval(secs => %s) "
                "AND NOT EXISTS (SELECT 1 FROM servers v WHERE v.instance = c.target "
                "AND v.expires_at > now())",
                (max_age,),
            )

        await self._transaction(write)

    # -- notifications ---------------------------------------------------------------

    def open_listener(
        self, channels: Sequence[str]
    ) -> AbstractAsyncContextManager[trio.MemoryReceiveChannel[Notification]]:
        """Notifications on ``channels`` (see :func:`._pg_listen.open_listener`)."""
        return open_listener(self.url, channels)


def _holder(c: Conn, root_id: str) -> Claim | None:
    held = _holders(c, [root_id])
    return held[0] if held else None


def _holders(c: Conn, root_ids: list[str]) -> list[Claim]:
    """Who holds each of these trees' live leases (the free and expired are left out)."""
    rows = c.execute(
        "SELECT root_id, instance, server FROM leases "
        "WHERE root_id = ANY(%s) AND expires_at > now()",
        (root_ids,),
    ).fetchall()
    return [Claim(r[0], r[1], r[2]) for r in rows]


# This instance's live lease rows (parameter: this instance), locked in root order:
# every statement that locks several lease rows takes them in that order (the
# heartbeat, a group of releases, an insert of free trees, the event batch's share
# locks), so that no two of them wait on each other.
_MINE = "SELECT root_id FROM leases WHERE instance = %s AND expires_at > now()"
_IN_ORDER = " ORDER BY root_id FOR UPDATE"

# Take the leases of trees without a lease row, in root order; the rows taken.
# Parameters: this instance, this instance, the lease's seconds, the roots (sorted).
_CLAIM_FREE = (
    "INSERT INTO leases (root_id, instance, server, acquired_at, expires_at) "
    "SELECT r, %s, COALESCE((SELECT name FROM servers WHERE instance = %s), ''), "
    "now(), now() + make_interval(secs => %s) FROM unnest(%s::text[]) AS r ORDER BY r "
    "ON CONFLICT (root_id) DO NOTHING RETURNING root_id, server"
)

# Take one tree's lease if it is free, expired or this instance's; the row taken.
# Parameters: the root, this instance, this instance, the lease's seconds.
_CLAIM_ONE = (
    "INSERT INTO leases AS l (root_id, instance, server, acquired_at, expires_at) "
    "SELECT %s, %s, COALESCE((SELECT name FROM servers WHERE instance = %s), ''), "
    "now(), now() + make_interval(secs => %s) "
    "ON CONFLICT (root_id) DO UPDATE SET instance = EXCLUDED.instance, "
    "server = EXCLUDED.server, expires_at = EXCLUDED.expires_at, "
    "acquired_at = CASE WHEN l.expires_at <= now() THEN now() ELSE l.acquired_at END, "
    "taken_from = CASE WHEN l.expires_at <= now() THEN l.instance END "
    "WHERE l.instance = EXCLUDED.instance OR l.expires_at <= now() "
    "RETURNING instance, server, taken_from"
)
