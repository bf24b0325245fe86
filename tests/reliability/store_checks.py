"""What a database file says after a crash and a restart, and the checks on it.

Read with plain ``sqlite3`` once the server is dead or stopped: the reliability tests
judge the runtime by what it left on disk, not by what it says about itself.
"""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

from omnigent.model import MessageItem, item_text, structure

TERMINAL = ("idle", "failed", "cancelled")


def read_db(path: Path, query: str, *args: Any) -> list[tuple[Any, ...]]:
    """Rows of ``query`` on the database file."""
    with closing(sqlite3.connect(path)) as db:
        return db.execute(query, args).fetchall()


def events_of(db: Path, session_id: str) -> list[dict[str, Any]]:
    """The session's stored events (wire form), oldest first."""
    rows = read_db(
        db, "SELECT event_id, data FROM events WHERE session_id = ? ORDER BY event_id", session_id
    )
    return [json.loads(data) for _, data in rows]


def items_of(db: Path, session_id: str) -> list[tuple[str, dict[str, Any]]]:
    """The session's stored items ``(id, wire form)``, in history order."""
    rows = read_db(db, "SELECT id, data FROM items WHERE session_id = ? ORDER BY seq", session_id)
    return [(item_id, json.loads(data)) for item_id, data in rows]


def texts_of(db: Path, session_id: str, role: str | None = None) -> list[str]:
    """The text of each message in the session's history (of ``role``, if given)."""
    return [
        item_text(structure(data, MessageItem))
        for _, data in items_of(db, session_id)
        if data.get("type") == "message" and role in (None, data.get("role"))
    ]


def notices(db: Path, session_id: str) -> str:
    """The inbox notices a session's wake-up turns were given, one per line."""
    return "\n".join(t for t in texts_of(db, session_id, "user") if t.startswith("[System:"))


def check_ids(name: str, log: list[dict[str, Any]]) -> None:
    """Event ids are 1, 2, 3, … with no gap and no repeat."""
    ids = [e["event_id"] for e in log]
    assert ids == list(range(1, len(log) + 1)), f"{name}: event ids {ids}"


def check_turn_pairs(name: str, log: list[dict[str, Any]]) -> None:
    """Each response ends exactly once, and each turn with exactly one terminal status.

    A ``response.created`` is followed by exactly one ``response.completed | failed |
    cancelled`` with its id before the next one begins; each ``running`` status by
    exactly one terminal status before the next ``running``; the log ends terminal.
    (A ``response.failed`` in-stream followed by ``response.completed`` would be a
    success: the scripted harnesses here never do that.)
    """
    ends = ("response.completed", "response.failed", "response.cancelled")
    opened: str | None = None
    running = False
    for event in log:
        if event["type"] == "response.created":
            assert opened is None, f"{name}: a response began before the last one ended"
            opened = event["response"]["id"]
        elif event["type"] in ends:
            assert event["response"]["id"] == opened, f"{name}: {event}"
            opened = None
        elif event["type"] == "session.status" and event["status"] in TERMINAL:
            assert running, f"{name}: a terminal status without a turn: {event}"
            running = False
        elif event["type"] == "session.status" and event["status"] == "running":
            running = True
    assert opened is None and not running, f"{name}: a turn never ended"


def check_answers(name: str, db: Path, session_id: str, log: list[dict[str, Any]]) -> int:
    """Each user message was taken by one turn of the log; returns how many turns did.

    A turn takes its messages (``taken_by`` names its response) once its ``running``
    status is durable, so a kill can land between the two: that turn took nothing, the
    restart ends it (``response.failed``, ``runtime_restarted``) and a continuation
    turn takes the message. Such a turn is the only kind allowed to have taken nothing.
    """
    rows = read_db(
        db, "SELECT data, taken_by FROM items WHERE session_id = ? ORDER BY seq", session_id
    )
    takers = [
        taken_by
        for data, taken_by in rows
        if (item := json.loads(data)).get("type") == "message" and item.get("role") == "user"
    ]
    responses = [e["response"]["id"] for e in log if e["type"] == "response.created"]
    assert all(t in responses for t in takers), f"{name}: messages taken by {takers}"
    for response_id in set(responses) - set(takers):
        ends = [
            e for e in log if e["type"] == "response.failed" and e["response"]["id"] == response_id
        ]
        assert ends and ends[0]["error"]["code"] == "runtime_restarted", (
            f"{name}: turn {response_id} took no message and was not cut short by the kill"
        )
    return len(set(takers))


def check_nothing_in_flight(db: Path) -> None:
    """After a clean stop nothing is left for another start to finish."""
    for query in (
        "SELECT COUNT(*) FROM items WHERE pending = 1",
        "SELECT COUNT(*) FROM running_tasks",
        "SELECT COUNT(*) FROM process_groups",
        "SELECT COUNT(*) FROM inbox WHERE delivered = 0",
        "SELECT COUNT(*) FROM subagent_work WHERE status IN ('launching', 'running')",
        "SELECT COUNT(*) FROM elicitations WHERE status = 'pending'",
        "SELECT COUNT(*) FROM sessions WHERE status IN ('launching', 'running', 'waiting')",
    ):
        assert read_db(db, query) == [(0,)], query
