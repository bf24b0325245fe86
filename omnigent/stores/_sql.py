"""What the SQLite and PostgreSQL stores share: a dialect, a connection shape, a base.

Both stores keep the same tables with the same meaning, and most of their statements
differ only in spelling: the parameter mark (``?`` or ``%s``), how a boolean is
written, and how a column is matched against a list (``IN (?, ?)`` or ``= ANY(%s)``).
The shared table mixins (``_sql_sessions``, ``_sql_log``, ``_sql_work``,
``_sql_extras``) write those statements once, with ``?`` marks, and let the store's
:class:`Dialect` spell them; what genuinely differs (locking, fencing, batching,
conflict handling) stays in each store's own modules.

A shared method runs its statements through three hooks of :class:`SQLBase` — a
read, a one-statement write and a multi-statement write — that each store's base
(``_sqlite_base``, ``_pg_base``) maps onto its own connection plumbing. This module
imports no database driver: PostgreSQL is an optional extra.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any, ClassVar, Protocol, TypeVar

import attrs

__all__ = ["POSTGRES", "SQLITE", "Dialect", "SQLBase", "SQLConn", "SQLCursor"]

T = TypeVar("T")


class SQLCursor(Protocol):
    """What the shared code reads from a statement's result (both drivers' cursors)."""

    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def __iter__(self) -> Iterator[Any]: ...


class SQLConn(Protocol):
    """A connection as the shared code uses it: ``execute`` with positional parameters.

    Rows are indexed by position (``sqlite3.Row`` and psycopg's tuples both are).
    """

    def execute(self, query: str, params: Sequence[Any] = ..., /) -> SQLCursor: ...


@attrs.frozen
class Dialect:
    """How one store spells the statements the two stores share.

    Attributes:
        mark: the parameter placeholder (``?`` or ``%s``).
        true: a boolean column's true value (``1`` or ``TRUE``).
        false: its false value (``0`` or ``FALSE``).
        any_list: whether a column is matched against one array parameter
            (``= ANY(%s)``, PostgreSQL) rather than a list of marks (``IN (?, ?)``).
    """

    mark: str
    true: str
    false: str
    any_list: bool

    def q(self, statement: str) -> str:
        """``statement`` (written with ``?`` marks, and no ``%``) in this dialect."""
        return statement if self.mark == "?" else statement.replace("?", self.mark)

    def marks(self, count: int) -> str:
        """``count`` placeholders, comma-separated (an ``INSERT``'s ``VALUES``)."""
        return ", ".join([self.mark] * count)

    def in_list(self, column: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
        """A condition that ``column`` is one of ``values``, and its parameters.

        Returns:
            ``(condition, params)``: the condition in this dialect, with its marks.
        """
        if self.any_list:
            return f"{column} = ANY({self.mark})", [list(values)]
        return f"{column} IN ({self.marks(len(values))})", list(values)

    def json_text(self, column: str, field: str) -> str:
        """The top-level ``field`` of the JSON text in ``column``, as text.

        ``field`` is a name the code chose (never a client's): letters and ``_`` only.
        """
        if not field.replace("_", "").isalpha():
            raise ValueError(f"not a field name: {field!r}")
        if self.any_list:  # PostgreSQL
            return f"({column}::jsonb ->> '{field}')"
        return f"json_extract({column}, '$.{field}')"


#: SQLite: ``?`` marks, integer booleans, lists spelled out as marks.
SQLITE = Dialect(mark="?", true="1", false="0", any_list=False)
#: PostgreSQL (psycopg): ``%s`` marks, real booleans, lists as one array parameter.
POSTGRES = Dialect(mark="%s", true="TRUE", false="FALSE", any_list=True)


class SQLBase:
    """The calls a shared table mixin makes; each store's base maps them onto its own.

    ``_sql_read`` runs a read, ``_sql_write_one`` a write of one statement (on
    PostgreSQL an autocommitted one: one round trip), ``_sql_write`` a write of several
    statements in one transaction. On SQLite both writes are the writer's transaction.
    """

    #: How this store spells the shared statements.
    dialect: ClassVar[Dialect]

    async def _sql_read(self, fn: Callable[[SQLConn], T]) -> T:
        """Run ``fn`` on a connection that reads."""
        raise NotImplementedError

    async def _sql_write_one(self, fn: Callable[[SQLConn], T]) -> T:
        """Run ``fn``, which writes with a single statement."""
        raise NotImplementedError

    async def _sql_write(self, fn: Callable[[SQLConn], T]) -> T:
        """Run ``fn``, which writes with several statements, inside one transaction."""
        raise NotImplementedError

    async def _sql_history(self, session_id: str) -> list[dict[str, Any]] | None:
        """A session's taken items in order, if this store reads histories its own way
        (PostgreSQL: several turns' at once, in one statement); ``None``: it reads
        them as every other page of items."""
        return None
