"""``omnigent approve`` / ``omnigent deny``: answer what a session on a server waits for.

A question a session asks (a tool call a policy wants approved, a Claude Code question,
an MCP form) waits in the process that runs the session. ``omnigent run`` and ``chat``
ask on their own terminal; a session on ``omnigent serve`` shows its pending requests
(``sessions show``, ``sessions tail``, the web console) and these commands answer one:
``approve SESSION`` when exactly one is pending, ``approve SESSION ELICITATION`` to
pick it. A request mirrored from a sub-session is answered under the session that owns
it. The server is ``--server URL``, else the one holding the store.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import trio

from ..errors import BadRequest, InvalidInput, NotFound
from ._agents import add_server_option
from ._output import one_line
from ._records import open_records

__all__ = ["declare_approve", "declare_deny"]


def declare_approve(parser: argparse.ArgumentParser) -> None:
    _declare(parser, "accept")
    parser.add_argument(
        "--content",
        metavar="JSON",
        help="the answer's content, for a form or a question (a JSON object)",
    )


def declare_deny(parser: argparse.ArgumentParser) -> None:
    _declare(parser, "decline")


def _declare(parser: argparse.ArgumentParser, action: str) -> None:
    parser.add_argument("session_id", metavar="SESSION", help="the session that waits")
    parser.add_argument(
        "elicitation_id",
        metavar="ELICITATION",
        nargs="?",
        help="which request (default: the only one pending)",
    )
    add_server_option(parser)
    parser.set_defaults(handler=_cmd_answer, action=action)


def _content(args: argparse.Namespace) -> Any:
    text = getattr(args, "content", None)
    if text is None:
        return None
    try:
        content = json.loads(text)
    except ValueError as exc:
        raise InvalidInput.at("--content", f"not JSON: {exc}") from exc
    if not isinstance(content, dict):
        raise InvalidInput.at("--content", "must be a JSON object")
    return content


def _pick(session_id: str, pending: list[dict[str, Any]], wanted: str | None) -> dict[str, Any]:
    if wanted is not None:
        for request in pending:
            if request["elicitation_id"] == wanted:
                return request
        raise NotFound(wanted, f"{wanted} is not pending on session {session_id}")
    if not pending:
        raise NotFound(session_id, f"nothing is pending on session {session_id}")
    if len(pending) > 1:
        listed = "; ".join(
            f"{r['elicitation_id']}: {one_line(r['params'].get('message', ''), 60)}"
            for r in pending
        )
        raise BadRequest(f"{len(pending)} requests are pending on {session_id}; name one: {listed}")
    return pending[0]


def _cmd_answer(args: argparse.Namespace) -> int:
    content = _content(args)

    async def answer() -> tuple[dict[str, Any], bool]:
        async with open_records(
            getattr(args, "db", None), args.server, require_server=True
        ) as records:
            session = await records.get_session(args.session_id)
            request = _pick(args.session_id, session["pending_elicitations"], args.elicitation_id)
            owner = request["params"].get("target_session_id") or args.session_id
            done = await records.resolve(owner, request["elicitation_id"], args.action, content)
            return request, done

    request, done = trio.run(answer, restrict_keyboard_interrupt_to_checkpoints=True)
    if not done:
        raise NotFound(
            request["elicitation_id"], f"{request['elicitation_id']} is no longer pending"
        )
    verb = "approved" if args.action == "accept" else "declined"
    print(f"{verb} {request['elicitation_id']}: {one_line(request['params'].get('message', ''))}")
    return 0
