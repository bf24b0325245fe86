"""``omnigent sessions list | show | tail | delete``.

Each reads (or changes) the store, or the server that holds it (``--server URL``, else
found in the store's lock: :mod:`omnigent.cli._records`). ``--json`` prints what the
HTTP API answers (``list``: ``GET /v1/sessions``; ``show``: the snapshot with its items
and failed turns). ``tail`` follows a session's events as they come, until Ctrl-C.
"""

from __future__ import annotations

import argparse
import json
import sys
from contextlib import aclosing
from typing import Any

import trio

from ..errors import InvalidInput
from ..model import Item
from ._agents import add_json_option, add_server_option, print_json
from ._output import write
from ._records import Records, open_records
from ._render import (
    Failure,
    TailRenderer,
    failed_turns,
    format_session,
    format_session_tree,
    format_sessions,
)

__all__ = ["TREE_ROWS", "declare_sessions"]

TREE_ROWS = 1000
"""The most rows ``sessions list --tree`` prints (children: 100 per session)."""


def declare_sessions(sessions: argparse.ArgumentParser) -> None:
    commands = sessions.add_subparsers(metavar="COMMAND", required=True)
    listing = commands.add_parser("list", help="list top-level sessions, newest first")
    listing.add_argument("--agent", metavar="NAME", help="only sessions of this agent")
    listing.add_argument("--limit", metavar="N", type=int, default=20, help="at most N (1-100)")
    shown = listing.add_mutually_exclusive_group()
    shown.add_argument(
        "--all", action="store_true", help="sub-sessions too (sub-agents), in one list"
    )
    shown.add_argument(
        "--tree", action="store_true", help="each session with its sub-sessions under it"
    )
    add_json_option(listing)
    add_server_option(listing)
    listing.set_defaults(handler=_cmd_list)
    show = commands.add_parser("show", help="a session's status and history")
    show.add_argument("session_id", metavar="ID", help="the session id")
    add_json_option(show)
    add_server_option(show)
    show.set_defaults(handler=_cmd_show)
    tail = commands.add_parser("tail", help="follow a session's events as they happen")
    tail.add_argument("session_id", metavar="ID", help="the session id")
    tail.add_argument(
        "--after",
        metavar="N",
        type=int,
        help="replay the events after id N first (0: all of them; default: from now on)",
    )
    tail.add_argument(
        "--json", action="store_true", help="one JSON event per line (the stream's data)"
    )
    add_server_option(tail)
    tail.set_defaults(handler=_cmd_tail)
    delete = commands.add_parser(
        "delete", help="stop a session's work and delete it, with its sub-sessions"
    )
    delete.add_argument("session_id", metavar="ID", help="the session id")
    delete.add_argument(
        "--purge",
        action="store_true",
        help="also delete their workspaces ($OMNIGENT_HOME/workspaces/ID; a local store only)",
    )
    add_server_option(delete)
    delete.set_defaults(handler=_cmd_delete)


def _run(action: Any) -> Any:
    return trio.run(action, restrict_keyboard_interrupt_to_checkpoints=True)


def _cmd_list(args: argparse.Namespace) -> int:
    if not 1 <= args.limit <= 100:
        raise InvalidInput.at("--limit", f"must be between 1 and 100, got {args.limit}")

    async def read() -> tuple[list[dict[str, Any]], bool, list[tuple[int, dict[str, Any]]]]:
        async with open_records(getattr(args, "db", None), args.server) as records:
            sessions, more = await records.list_sessions(
                agent_name=args.agent,
                parent=None,
                limit=args.limit,
                after=None,
                top_level=not args.all,
            )
            tree = await _tree(records, sessions) if args.tree else []
            return sessions, more, tree

    sessions, more, tree = _run(read)
    if args.json:
        shown = [s for _, s in tree] if args.tree else sessions
        print_json({"object": "list", "data": shown, "has_more": more})
        return 0
    lines = format_session_tree(tree) if args.tree else format_sessions(sessions)
    for line in lines:
        print(line)
    if more:
        print(f"(more sessions: raise --limit above {args.limit})", file=sys.stderr)
    return 0


def _cmd_show(args: argparse.Namespace) -> int:
    async def read() -> tuple[dict[str, Any], list[Item], list[Failure]]:
        async with open_records(getattr(args, "db", None), args.server) as records:
            return await _history(records, args.session_id)

    session, items, failures = _run(read)
    if args.json:
        print_json(
            {
                "session": session,
                "items": [item.to_dict() for item in items],
                "failed_turns": [f.to_dict() for f in failures],
            }
        )
        return 0
    for line in format_session(session, items, failures):
        print(line)
    return 0


async def _tree(records: Records, roots: list[dict[str, Any]]) -> list[tuple[int, dict[str, Any]]]:
    """``roots`` in order, each followed by its sub-sessions (depth first, newest first),
    at most :data:`TREE_ROWS` rows."""
    rows: list[tuple[int, dict[str, Any]]] = []
    stack = [(0, session) for session in reversed(roots)]
    while stack and len(rows) < TREE_ROWS:
        depth, session = stack.pop()
        rows.append((depth, session))
        children, _ = await records.list_sessions(
            agent_name=None, parent=session["id"], limit=100, after=None
        )
        stack.extend((depth + 1, child) for child in reversed(children))
    return rows


async def _history(
    records: Records, session_id: str
) -> tuple[dict[str, Any], list[Item], list[Failure]]:
    session = await records.get_session(session_id)
    items = await records.items(session_id)
    events = await records.replay(session_id, int(session["last_event_id"]))
    return session, items, failed_turns(events)


def _cmd_tail(args: argparse.Namespace) -> int:
    renderer = TailRenderer(args.session_id)

    async def follow() -> None:
        async with open_records(getattr(args, "db", None), args.server) as records:
            session = await records.get_session(args.session_id)
            after = session["last_event_id"] if args.after is None else args.after
            where = f"following {args.session_id} on {records.where} (Ctrl-C stops)"
            print(where, file=sys.stderr)
            async with aclosing(records.follow(args.session_id, after)) as events:
                async for event in events:
                    if args.json:
                        print(json.dumps(event.to_dict(), ensure_ascii=False), flush=True)
                    else:
                        write(renderer.feed(event))

    try:
        _run(follow)  # until Ctrl-C: main() reports it (exit 130)
    finally:
        write(renderer.finish())
    return 0


def _cmd_delete(args: argparse.Namespace) -> int:
    async def delete() -> str:
        async with open_records(getattr(args, "db", None), args.server, write=True) as records:
            await records.delete_session(args.session_id, purge=args.purge)
            return records.where

    where = _run(delete)
    purged = " and their workspaces" if args.purge else ""
    print(f"deleted {args.session_id} (and its sub-sessions){purged} from {where}")
    return 0
