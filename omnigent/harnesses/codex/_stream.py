"""What a ``codex app-server`` thread's messages mean, without I/O.

:func:`read_message` tells a JSON-RPC server request from a response and a
notification; :class:`CodexReader` turns one turn's notifications into relay actions
(:mod:`omnigent.harnesses.native._relay`): agent messages as text, command executions as
``exec_command`` calls and file changes as ``apply_patch`` calls, each with its output,
``turn/completed`` as the end of the turn, ``thread/tokenUsage/updated`` as what a model
call used (its ``last`` breakdown, once per change of the thread's ``total``: Codex
repeats a count when only its rate limits moved). What omnigent sends, and the approval
mappings, are in :mod:`._protocol`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from ...model import Usage
from ..native import Action, Call, CallOutput, EndMessage, Finished, Say, Used, merge_text

__all__ = [
    "COMMAND_TOOL",
    "FILE_TOOL",
    "CodexReader",
    "Message",
    "Response",
    "ServerRequest",
    "TurnStarted",
    "Withdrawn",
    "read_message",
]

COMMAND_TOOL = "exec_command"
FILE_TOOL = "apply_patch"


@attrs.frozen
class ServerRequest:
    """Codex asks omnigent something (an approval) and waits for the answer."""

    id: Any = attrs.field(hash=False)
    method: str
    params: Mapping[str, Any] = attrs.field(hash=False)


@attrs.frozen
class Response:
    """The answer to one of omnigent's requests: ``result``, or ``error`` (its message)."""

    id: Any = attrs.field(hash=False)
    result: Any = attrs.field(default=None, hash=False)
    error: str | None = None


@attrs.frozen
class Withdrawn:
    """Codex no longer waits for the answer to its request ``id`` (an interrupt)."""

    id: Any = attrs.field(hash=False)


@attrs.frozen
class TurnStarted:
    """The id of the turn being run (from ``turn/started``)."""

    turn_id: str


Message = Action | ServerRequest | Response | Withdrawn | TurnStarted


def read_message(raw: Mapping[str, Any]) -> ServerRequest | Response | dict[str, Any] | None:
    """A JSON-RPC message: a server request, a response, or a notification (as is)."""
    method = raw.get("method")
    if isinstance(method, str):
        if "id" in raw:
            params = raw.get("params")
            return ServerRequest(raw["id"], method, params if isinstance(params, Mapping) else {})
        return dict(raw)
    if "id" in raw:
        error = raw.get("error")
        if isinstance(error, Mapping):
            return Response(raw["id"], error=str(error.get("message") or "error"))
        return Response(raw["id"], raw.get("result"))
    return None


class CodexReader:
    """The messages of one thread's turn in, actions out.

    Notifications of other turns (what was left from an earlier one) are ignored once
    the turn's id is known; file changes are remembered so an approval request — which
    names only the item — can say what would change.
    """

    def __init__(self, thread_id: str) -> None:
        self.thread_id = thread_id
        self.turn_id: str | None = None
        self.changes: dict[str, list[dict[str, Any]]] = {}
        self._streamed: set[str] = set()
        self._error: str | None = None
        self._total: Any = None  # the thread's total usage as last reported

    def feed(self, batch: Sequence[Mapping[str, Any]]) -> list[Message]:
        out: list[Any] = []
        for raw in batch:
            message = read_message(raw)
            if isinstance(message, ServerRequest | Response):
                out.append(message)
            elif isinstance(message, dict):
                out.extend(self._notification(message["method"], message.get("params")))
        merged: list[Message] = merge_text(out)  # type: ignore[assignment]
        return merged

    def _ours(self, params: Mapping[str, Any]) -> bool:
        if params.get("threadId") not in (None, self.thread_id):
            return False
        turn = params.get("turnId")
        return self.turn_id is None or turn is None or turn == self.turn_id

    def _notification(self, method: str, params: Any) -> list[Any]:
        if not isinstance(params, Mapping) or not self._ours(params):
            return []
        if method == "serverRequest/resolved":
            return [Withdrawn(params.get("requestId"))]
        if method == "turn/started":
            turn = params.get("turn")
            if isinstance(turn, Mapping) and isinstance(turn.get("id"), str):
                self.turn_id = self.turn_id or turn["id"]
                return [TurnStarted(turn["id"])]
            return []
        if method == "turn/completed":
            return self._completed(params.get("turn"))
        if method == "error" and not params.get("willRetry"):
            error = params.get("error")
            if isinstance(error, Mapping) and isinstance(error.get("message"), str):
                self._error = error["message"]
            return []
        if method == "thread/tokenUsage/updated":
            return self._used(params.get("tokenUsage"))
        if method == "item/agentMessage/delta":
            item_id, delta = params.get("itemId"), params.get("delta")
            if isinstance(item_id, str) and isinstance(delta, str) and delta:
                self._streamed.add(item_id)
                return [Say(item_id, delta)]
            return []
        item = params.get("item")
        if not isinstance(item, Mapping) or not isinstance(item.get("id"), str):
            return []
        if method == "item/started":
            return self._started(item)
        if method == "item/completed":
            return self._item_completed(item)
        return []

    def _used(self, usage: Any) -> list[Any]:
        if not isinstance(usage, Mapping) or usage.get("total") == self._total:
            return []
        self._total = usage.get("total")
        last = usage.get("last")
        if not isinstance(last, Mapping):
            return []
        counts: list[int] = []
        for key in ("inputTokens", "outputTokens", "cachedInputTokens"):
            value = last.get(key)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                return []
            counts.append(value)
        return [Used(Usage.of_call(*counts))]

    def _completed(self, turn: Any) -> list[Any]:
        if not isinstance(turn, Mapping) or turn.get("id") != self.turn_id:
            return []
        status = turn.get("status")
        if status == "completed":
            return [EndMessage(), Finished()]
        error = turn.get("error")
        message = error.get("message") if isinstance(error, Mapping) else None
        why = message or self._error or f"the turn ended {status}"
        return [EndMessage(), Finished(f"Codex: {why}")]

    def _started(self, item: Mapping[str, Any]) -> list[Any]:
        kind, item_id = item.get("type"), item["id"]
        if kind == "commandExecution":
            arguments = {"command": item.get("command"), "cwd": item.get("cwd")}
            return [Call(item_id, COMMAND_TOOL, json.dumps(arguments))]
        if kind == "fileChange":
            changes = _changes(item.get("changes"))
            self.changes[item_id] = changes
            return [Call(item_id, FILE_TOOL, json.dumps({"changes": changes}))]
        return []

    def _item_completed(self, item: Mapping[str, Any]) -> list[Any]:
        kind, item_id = item.get("type"), item["id"]
        if kind == "agentMessage":
            text = item.get("text")
            if item_id not in self._streamed and isinstance(text, str) and text:
                return [Say(item_id, text), EndMessage()]
            return [EndMessage()]
        if kind == "commandExecution":
            return [CallOutput(item_id, _command_output(item))]
        if kind == "fileChange":
            self.changes.pop(item_id, None)
            return [CallOutput(item_id, _file_output(item))]
        return []


def _changes(raw: Any) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for change in raw if isinstance(raw, list) else ():
        if isinstance(change, Mapping):
            kind = change.get("kind")
            kind = kind.get("type") if isinstance(kind, Mapping) else kind
            diff = change.get("diff")
            entry = {"path": change.get("path"), "kind": kind}
            if isinstance(diff, str):
                entry["diff"] = diff if len(diff) <= 4000 else diff[:3999] + "…"
            out.append(entry)
    return out


def _command_output(item: Mapping[str, Any]) -> str:
    status = item.get("status")
    output = item.get("aggregatedOutput")
    text = output if isinstance(output, str) else ""
    if status == "declined":
        return "Error: the command was declined and did not run"
    code = item.get("exitCode")
    if status == "failed" or (isinstance(code, int) and code != 0):
        return f"Error: exit code {code}\n{text}".rstrip()
    return text


def _file_output(item: Mapping[str, Any]) -> str:
    status = item.get("status")
    if status == "declined":
        return "Error: the file change was declined and not applied"
    if status == "failed":
        return "Error: the file change failed"
    changes = _changes(item.get("changes"))
    marks = {"add": "A", "delete": "D", "update": "M"}
    lines = [f"{marks.get(str(c['kind']), '?')} {c['path']}" for c in changes]
    return "Applied:\n" + "\n".join(lines) if lines else "Applied."
