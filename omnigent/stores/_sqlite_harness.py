"""The SQLite store's harness state: small strings a harness keeps on a session.

Both stores share the statements (:class:`~._sql_extras.SQLHarnessStateMixin`); this
mixin binds them to the SQLite store's connections.
"""

from __future__ import annotations

from ._sql_extras import SQLHarnessStateMixin
from ._sqlite_base import SQLiteBase

__all__ = ["HarnessStateMixin"]


class HarnessStateMixin(SQLHarnessStateMixin, SQLiteBase):
    """Harness state methods of :class:`~.sqlite.SQLiteStore`."""
