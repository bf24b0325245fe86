"""Writing the bus's batches to the store, losing as little as possible.

The event writer (:meth:`~._writer.EventWriter.run`) hands each batch to
:meth:`Persister.persist`. A batch is written in one call; one that fails is retried
(a store hiccup: a full disk, a busy lock), then written row by row, so that a row the
store will not take costs only that row — logged with its session and type — and
every other session's events are kept. A store that keeps failing must not take the
runtime down: what it would not take is dropped, with a log line naming the sessions.
As it was never durable, it is never delivered either.

:meth:`Persister.abandon` (a shutdown past its grace) stops the retries: what is left
is dropped at once.

Three answers are not failures of the rows. A store that cannot be reached
(``StoreUnavailable``: a shared database restarting) is waited for, however long it
takes — until abandoned. A store that did not answer within its timeout
(``StoreTimeout``, a kind of ``StoreUnavailable``) is too, and the batch is written
again: when its outcome is ``unknown`` it may have been committed after all, and the
store recognises a batch it holds already, so the batch is neither reported lost nor
stored twice — it is delivered once it is known to be stored. A shared store that
refuses some sessions' rows because this server no longer holds their lease
(``LeaseLost``) has written the others: the refused ones are dropped, and ``on_lost``
is told, so their trees are given up.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence

import trio

from ...errors import StoreTimeout, StoreUnavailable
from ...observability import Metrics
from ...stores import LeaseLost, Store, StoredEvent

__all__ = ["Persister"]

log = logging.getLogger("omnigent.core.bus")

_RETRY_DELAYS = (0.05, 0.25, 1.0)
_UNREACHABLE_DELAY = 1.0
# Row by row, this many refusals with nothing written means the store is down, not
# one row bad: the rest of the batch is dropped instead of tried one by one.
_GIVE_UP_AFTER = 3


class Persister:
    """Writes batches of events to one store. Owned by the ``EventBus``."""

    def __init__(
        self,
        store: Store,
        on_lost: Callable[[tuple[str, ...]], None] = lambda ids: None,
        metrics: Metrics | None = None,
    ) -> None:
        self._store = store
        self._on_lost = on_lost
        self._metrics = metrics
        self._abandoned = False
        self._pause: trio.CancelScope | None = None

    async def persist(
        self, rows: Sequence[StoredEvent], *, on_stored: Callable[[], None] | None = None
    ) -> list[bool]:
        """Write ``rows``; for each, whether it was stored.

        ``on_stored`` is called, before this returns, if and when the whole batch is
        stored by one write (the common case) — from the store's commit completion,
        where it can (see :meth:`~omnigent.stores.Store.append_events`). Not when rows
        were refused or written one by one: the caller reads the answer then.

        Cancellation: callers shield it (the writer does); a pause between retries
        ends early on :meth:`abandon`.
        """
        failure: Exception | None = None
        delays = iter((*_RETRY_DELAYS, None))
        maybe_stored = False  # a write of this batch may have committed unseen
        while True:
            if self._abandoned:
                break
            started = time.monotonic()
            try:
                await self._store.append_events(rows, on_stored=on_stored)
            except LeaseLost as lost:
                # The other sessions' rows were written; these are not ours to write.
                log.warning("dropping the events of %s: lease lost", ", ".join(lost.session_ids))
                self._on_lost(lost.session_ids)
                refused = set(lost.session_ids)
                return [row.session_id not in refused for row in rows]
            except StoreTimeout as exc:
                maybe_stored = maybe_stored or exc.unknown
                log.warning("%s; %d events wait to be written again", exc.message, len(rows))
                await self._wait(_UNREACHABLE_DELAY)
                continue
            except StoreUnavailable:
                log.warning("the database is unreachable; %d events wait", len(rows))
                await self._wait(_UNREACHABLE_DELAY)
                continue
            except Exception as exc:
                delay = next(delays)
                failure = exc
                if delay is None:
                    log.warning("the store refused %d events", len(rows), exc_info=True)
                    break
                log.warning("the store refused %d events; retrying", len(rows), exc_info=True)
                await self._wait(delay)
            else:
                if self._metrics is not None:
                    self._metrics.events_stored(len(rows), time.monotonic() - started)
                return [True] * len(rows)
        if self._abandoned:
            _log_dropped(rows, maybe_stored=maybe_stored)
            return [False] * len(rows)
        if len(rows) == 1:
            _log_refused(rows[0], failure)
            return [False]
        return await self._one_by_one(rows)

    async def _one_by_one(self, rows: Sequence[StoredEvent]) -> list[bool]:
        stored: list[bool] = []
        refused = 0
        for row in rows:
            if self._abandoned or (not any(stored) and refused >= _GIVE_UP_AFTER):
                _log_dropped(rows[len(stored) :])
                return stored + [False] * (len(rows) - len(stored))
            try:
                await self._store.append_events([row])
            except LeaseLost as lost:
                self._on_lost(lost.session_ids)
                stored.append(False)
                continue
            except Exception as exc:
                refused += 1
                stored.append(False)
                _log_refused(row, exc)
            else:
                stored.append(True)
        return stored

    async def _wait(self, delay: float) -> None:
        with trio.move_on_after(delay) as self._pause:
            await trio.sleep_forever()
        self._pause = None

    def abandon(self) -> None:
        """Stop retrying: what the store has not taken yet is dropped (and logged)."""
        self._abandoned = True
        if self._pause is not None:
            self._pause.cancel()


def _log_refused(row: StoredEvent, error: Exception | None) -> None:
    log.error(
        "dropping event %d (%s) of session %s: the store would not take it",
        row.event_id,
        row.type,
        row.session_id,
        exc_info=error,
    )


def _log_dropped(rows: Sequence[StoredEvent], *, maybe_stored: bool = False) -> None:
    if not rows:
        return
    sessions = sorted({row.session_id for row in rows})
    named = ", ".join(sessions[:10]) + (" …" if len(sessions) > 10 else "")
    if maybe_stored:
        # Not lost for sure: a write that had not answered may have committed them,
        # and a subscriber resuming from the store will then see them.
        log.error(
            "not delivering %d events whose write never answered; they may be stored "
            "(sessions: %s)",
            len(rows),
            named,
        )
        return
    log.error("dropping %d events the store would not take (sessions: %s)", len(rows), named)
