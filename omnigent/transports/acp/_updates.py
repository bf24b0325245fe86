"""Session events as ACP ``session/update`` payloads (pure: no I/O, no Trio).

:class:`Translator` turns a batch of a session's events into what a relay must do:

==========================================  =============================================
omnigent event                              ACP
==========================================  =============================================
``response.output_text.delta``              ``agent_message_chunk`` (consecutive deltas
                                            of one message in a batch merged into one)
``output_item.done`` assistant message      ``agent_message_chunk``, only if it was not
                                            streamed (a harness that adds whole messages)
``output_item.done`` ``function_call``      ``tool_call`` (kind, title, ``rawInput``,
(``action_required``)                       locations, a diff for writes and edits)
``output_item.done`` ``function_call_output``  ``tool_call_update`` (``completed``, or
                                            ``failed`` for an ``Error: …`` output;
                                            content and ``rawOutput``)
``response.elicitation_request``            :class:`Ask`: a ``session/request_permission``
                                            (or a form ``elicitation/create``)
``response.elicitation_resolved``           :class:`Withdraw`: cancel that request
``session.info.updated``                    ``session_info_update`` (title), and
                                            :class:`ConfigChanged` when the model
                                            override changed (``config_option_update``)
a turn's terminal ``response.*`` carrying   :class:`UsageChanged`: the relay sends the
``response.usage``                          session's ``usage_update`` (it needs the
                                            stored sums and the model's window)
==========================================  =============================================

Everything else (statuses, ``response.*`` lifecycle, child summaries) is for the
prompt's answer, not for updates. :func:`replay_items` renders a stored history the
same way for ``session/load``.
"""

from __future__ import annotations

import json
import posixpath
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from typing import Any

import attrs

from ...model import (
    ElicitationRequest,
    ElicitationResolved,
    Event,
    FunctionCallItem,
    FunctionCallOutputItem,
    Item,
    MessageItem,
    OutputItemDone,
    OutputTextDelta,
    ResponseCancelled,
    ResponseCompleted,
    ResponseFailed,
    SessionInfoUpdated,
    Usage,
    item_text,
)
from ._content import acp_blocks
from ._outcomes import iso

__all__ = [
    "Ask",
    "ConfigChanged",
    "Translator",
    "Update",
    "UsageChanged",
    "Withdraw",
    "describe_call",
    "replay_items",
    "usage_update",
]

_TITLE_TEXT = 80
_OPEN_CALLS = 256


@attrs.frozen
class Update:
    """Send ``session/update`` with this ``update`` object."""

    payload: dict[str, Any]


@attrs.frozen
class Ask:
    """Ask the client about ``request``; ``tool_call`` is the ``toolCall`` to show."""

    request: ElicitationRequest
    tool_call: dict[str, Any]


@attrs.frozen
class Withdraw:
    """The elicitation was answered or withdrawn: cancel any request about it."""

    elicitation_id: str


@attrs.frozen
class ConfigChanged:
    """The session's model changed elsewhere: send the client its config options again."""


@attrs.frozen
class UsageChanged:
    """A turn reported usage: send the client the session's ``usage_update``."""


Out = Update | Ask | Withdraw | ConfigChanged | UsageChanged


def _short(text: str, limit: int = _TITLE_TEXT) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _absolute(path: Any, cwd: str | None) -> str | None:
    if not isinstance(path, str) or not path or "\x00" in path:
        return None
    if posixpath.isabs(path):
        return posixpath.normpath(path)
    return posixpath.normpath(posixpath.join(cwd, path)) if cwd else None


_KINDS = {
    "sys_os_read": ("read", "Read"),
    "sys_os_write": ("edit", "Write"),
    "sys_os_edit": ("edit", "Edit"),
    "sys_os_shell": ("execute", "Run"),
}


def describe_call(name: str, args: Any, cwd: str | None) -> dict[str, Any]:
    """``title``, ``kind``, ``rawInput`` and, for file tools, ``locations`` and a diff."""
    args = args if isinstance(args, dict) else {}
    kind, verb = _KINDS.get(name, ("other", ""))
    out: dict[str, Any] = {"kind": kind, "rawInput": args}
    if name == "sys_os_shell":
        out["title"] = f"Run: {_short(str(args.get('command', '')))}"
    elif name.startswith("sys_terminal_"):
        out["kind"] = "execute"
        out["title"] = f"Terminal: {name.removeprefix('sys_terminal_')}"
    elif name.startswith("mcp__"):
        server, _, tool = name.removeprefix("mcp__").partition("__")
        out["title"] = f"{server}: {tool}"
    elif verb:
        out["title"] = f"{verb} {_short(str(args.get('path', '')))}"
    else:
        out["title"] = name
    path = _absolute(args.get("path"), cwd) if name in _KINDS else None
    if path is not None:
        out["locations"] = [{"path": path}]
        diff = _diff(name, args, path)
        if diff is not None:
            out["content"] = [diff]
    return out


def _diff(name: str, args: dict[str, Any], path: str) -> dict[str, Any] | None:
    if name == "sys_os_write" and isinstance(args.get("content"), str):
        return {"type": "diff", "path": path, "oldText": None, "newText": args["content"]}
    old, new = args.get("oldText"), args.get("newText")
    if name == "sys_os_edit" and isinstance(old, str) and isinstance(new, str):
        return {"type": "diff", "path": path, "oldText": old, "newText": new}
    return None


def _arguments(call: FunctionCallItem) -> Any:
    try:
        return json.loads(call.arguments)
    except ValueError:
        return {"arguments": call.arguments}


def _tool_call(call: FunctionCallItem, cwd: str | None) -> dict[str, Any]:
    return {
        "sessionUpdate": "tool_call",
        "toolCallId": call.call_id,
        "status": "pending",
        **describe_call(call.name, _arguments(call), cwd),
    }


def _tool_result(output: FunctionCallOutputItem) -> dict[str, Any]:
    failed = output.output.startswith("Error:")
    return {
        "sessionUpdate": "tool_call_update",
        "toolCallId": output.call_id,
        "status": "failed" if failed else "completed",
        "content": [{"type": "content", "content": {"type": "text", "text": output.output}}],
        "rawOutput": output.output,
    }


def _chunk(kind: str, text: str, message_id: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"sessionUpdate": kind, "content": {"type": "text", "text": text}}
    if message_id is not None:
        out["messageId"] = message_id
    return out


class Translator:
    """Translates one session's events for one connection; see the module docstring.

    Args:
        cwd: the session's working directory, for absolute paths in ``locations``.
        model_override: the session's as the client last heard it.
    """

    def __init__(self, cwd: str | None, model_override: str | None = None) -> None:
        self.cwd = cwd
        self.model_override = model_override
        self._streamed: set[str] = set()
        # Tool calls still waiting for their output: call id -> (name, arguments).
        self._calls: OrderedDict[str, tuple[str, Any]] = OrderedDict()

    def translate(self, events: Sequence[Event]) -> list[Out]:
        out: list[Out] = []
        pending: OutputTextDelta | None = None
        parts: list[str] = []

        def flush() -> None:
            nonlocal pending
            if pending is not None:
                out.append(Update(_chunk("agent_message_chunk", "".join(parts), pending.item_id)))
                pending = None
                parts.clear()

        for event in events:
            if isinstance(event, OutputTextDelta):
                if pending is not None and pending.item_id != event.item_id:
                    flush()
                pending = pending or event
                parts.append(event.delta)
                self._streamed.add(event.item_id)
                continue
            flush()
            out.extend(self._other(event))
        flush()
        return out

    def _other(self, event: Event) -> list[Out]:
        if isinstance(event, OutputItemDone):
            return self._item(event.item)
        if isinstance(event, ElicitationRequest):
            return [Ask(event, self.permission_tool_call(event))]
        if isinstance(event, ElicitationResolved):
            return [Withdraw(event.elicitation_id)]
        if isinstance(event, SessionInfoUpdated):
            return self._session_updated(event)
        if isinstance(event, ResponseCompleted | ResponseFailed | ResponseCancelled):
            return [UsageChanged()] if event.response.usage is not None else []
        return []

    def _session_updated(self, event: SessionInfoUpdated) -> list[Out]:
        info = {
            "sessionUpdate": "session_info_update",
            "title": event.title,
            "updatedAt": iso(event.created_at),
        }
        out: list[Out] = [Update(info)]
        if event.model_override != self.model_override:
            self.model_override = event.model_override
            out.append(ConfigChanged())
        return out

    def _item(self, item: Item) -> list[Out]:
        if isinstance(item, MessageItem):
            streamed = item.id in self._streamed
            self._streamed.discard(item.id)
            text = item_text(item)
            if item.role != "assistant" or streamed or not text:
                return []
            return [Update(_chunk("agent_message_chunk", text, item.id))]
        if isinstance(item, FunctionCallItem):
            if item.status != "action_required":
                return []
            self._calls[item.call_id] = (item.name, _arguments(item))
            while len(self._calls) > _OPEN_CALLS:
                self._calls.popitem(last=False)
            return [Update(_tool_call(item, self.cwd))]
        self._calls.pop(item.call_id, None)
        return [Update(_tool_result(item))]

    def is_open_call(self, call_id: str) -> bool:
        """Whether ``call_id`` is a tool call the client was told of, still waiting."""
        return call_id in self._calls

    def find_call(self, tool_name: str | None, tool_input: Any) -> str | None:
        """The open tool call an elicitation is about (same tool, same arguments)."""
        for call_id, (name, args) in reversed(self._calls.items()):
            if name == tool_name and (tool_input is None or args == tool_input):
                return call_id
        return None

    def permission_tool_call(self, request: ElicitationRequest) -> dict[str, Any]:
        """The ``toolCall`` of a ``session/request_permission`` about ``request``.

        A request about one of this session's open tool calls names it; any other (a
        child session's, a hook's, an ``mcp_elicitation``) gets its own id and a title
        from the elicitation.
        """
        params = request.params
        described = describe_call(params.tool_name or "", params.tool_input, self.cwd)
        call_id = None
        if params.target_session_id is None:
            call_id = self.find_call(params.tool_name, params.tool_input)
        if params.tool_name is None:
            described["title"] = _short(params.message) or "Permission"
        return {"toolCallId": call_id or request.elicitation_id, "status": "pending", **described}


def replay_items(items: Iterable[Item], cwd: str | None) -> list[dict[str, Any]]:
    """The ``session/update`` payloads that replay a stored history (``session/load``)."""
    out: list[dict[str, Any]] = []
    for item in items:
        if isinstance(item, MessageItem):
            kind = {"user": "user_message_chunk", "assistant": "agent_message_chunk"}.get(item.role)
            if kind is None:
                continue
            for block in acp_blocks(item.content):
                out.append({"sessionUpdate": kind, "content": block, "messageId": item.id})
        elif isinstance(item, FunctionCallItem):
            out.append(_tool_call(item, cwd))
        else:
            out.append(_tool_result(item))
    return out


def usage_update(usage: Usage, window: int) -> dict[str, Any]:
    """The ``usage_update`` of a session whose model calls used ``usage`` (its stored
    sum) in a model with a ``window``-token context: ``used`` is what the last call
    left in context (its input and output), ``cost`` the session's cumulative cost,
    when any call was priced (US dollars: the price table's currency)."""
    out: dict[str, Any] = {
        "sessionUpdate": "usage_update",
        "used": usage.context_tokens,
        "size": window,
    }
    if usage.cost_usd is not None:
        out["cost"] = {"amount": round(usage.cost_usd, 9), "currency": "USD"}
    return out
