"""What a policy judges, and its two wire forms: the one place the spellings meet.

:class:`PolicyEvent` is one tool call or one tool result in omnigent's own terms
(``data.tool_name``, ``data.tool_input``, ``data.tool_output``). Two spellings reach it
from outside, and both are read here and nowhere else:

* **The original omnigent's**, which harnesses and hooks written for it send to
  ``POST /sessions/{id}/policies/evaluate``::

      {"type": "PHASE_TOOL_CALL", "target": "", "data": {"name": "Bash",
       "arguments": {"command": "date"}}, "context": {}}
      {"type": "PHASE_TOOL_RESULT", "data": {"result": "..."},
       "request_data": {"name": "Bash", "args": {"command": "date"}}, "context": {}}

* **omnigent's own**: ``data: {tool_name, tool_input?, tool_output?}``.

:func:`parse_policy_event` accepts either (a field given in both spellings is refused,
so the two can never disagree); ``type`` may also be the function form
(``tool_call``/``tool_result``); ``target`` is accepted and not used (omnigent judges
the session's own calls). :meth:`PolicyEvent.to_dict` is the other direction: the
original's event that a ``function`` policy receives, so a policy written for the
original works unchanged::

    {"type": "tool_call" | "tool_result",
     "data": {"name": ..., "arguments": {...}, "result": ...},   # result: tool_result only
     "request_data": {...}, "context": {...}}

Error handling: :func:`parse_policy_event` raises
:class:`~omnigent.errors.InvalidInput` naming every bad field; building a
:class:`PolicyEvent` without a tool name raises it too.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, Final, Literal, TypeAlias

import attrs

from ...errors import ErrorDetail, InvalidInput
from ...model import structure, wire_schema

__all__ = [
    "PHASE_TOOL_CALL",
    "PHASE_TOOL_RESULT",
    "PolicyEvent",
    "PolicyPhase",
    "WirePolicyEvent",
    "parse_policy_event",
]

PHASE_TOOL_CALL: Final = "PHASE_TOOL_CALL"
PHASE_TOOL_RESULT: Final = "PHASE_TOOL_RESULT"
PolicyPhase: TypeAlias = Literal["PHASE_TOOL_CALL", "PHASE_TOOL_RESULT"]

# The function form of each phase, as the original omnigent hands it to a policy.
_FUNCTION_TYPES: Final[dict[str, str]] = {
    PHASE_TOOL_CALL: "tool_call",
    PHASE_TOOL_RESULT: "tool_result",
}
_PHASES: Final[dict[str, PolicyPhase]] = {
    PHASE_TOOL_CALL: PHASE_TOOL_CALL,
    PHASE_TOOL_RESULT: PHASE_TOOL_RESULT,
    "tool_call": PHASE_TOOL_CALL,
    "tool_result": PHASE_TOOL_RESULT,
}
# omnigent's name for each field of ``data``, and the original's.
_SPELLINGS: Final = (("tool_name", "name"), ("tool_input", "arguments"), ("tool_output", "result"))
_CANONICAL: Final = frozenset(own for own, _ in _SPELLINGS)
_ORIGINAL: Final = frozenset(original for _, original in _SPELLINGS)


@attrs.frozen
class PolicyEvent:
    """What a policy judges: one tool call, or one tool result.

    ``data`` holds ``tool_name`` (required), ``tool_input`` and, at the result phase,
    ``tool_output``; other keys pass through to function policies untouched.
    ``request_data`` and ``context`` are free-form and read only by function policies.
    """

    type: PolicyPhase = attrs.field(
        validator=attrs.validators.in_((PHASE_TOOL_CALL, PHASE_TOOL_RESULT))
    )
    data: Mapping[str, Any] = attrs.field(hash=False)
    request_data: Mapping[str, Any] | None = attrs.field(default=None, hash=False)
    context: Mapping[str, Any] | None = attrs.field(default=None, hash=False)

    def __attrs_post_init__(self) -> None:
        # Without a name, tool policies would silently match nothing: refuse instead.
        if not isinstance(self.data.get("tool_name"), str):
            raise InvalidInput.at("data.tool_name", "required string")

    @property
    def tool_name(self) -> str:
        name: str = self.data["tool_name"]
        return name

    @property
    def tool_input(self) -> dict[str, Any]:
        """The call's arguments (``{}`` when none were given)."""
        arguments = self.data.get("tool_input")
        return dict(arguments) if isinstance(arguments, Mapping) else {}

    def to_dict(self) -> dict[str, Any]:
        """The original omnigent's event, as a function policy receives it.

        A deep copy the function may mutate. ``data`` has ``name``, ``arguments`` and
        (for ``tool_result``) ``result``, plus any other keys the event carried;
        ``request_data`` defaults to the call (``{"name", "args"}``) at the result
        phase and to ``{}`` otherwise; ``context`` defaults to ``{}``.
        """
        extra = {k: v for k, v in self.data.items() if k not in _CANONICAL}
        data: dict[str, Any] = {**extra, "name": self.tool_name, "arguments": self.tool_input}
        at_result = self.type == PHASE_TOOL_RESULT
        if at_result:
            data["result"] = self.data.get("tool_output")
        if self.request_data is not None:
            request_data: dict[str, Any] = dict(self.request_data)
        elif at_result:
            request_data = {"name": self.tool_name, "args": self.tool_input}
        else:
            request_data = {}
        event = {
            "type": _FUNCTION_TYPES[self.type],
            "data": data,
            "request_data": request_data,
            "context": dict(self.context or {}),
        }
        return copy.deepcopy(event)


# -- the wire ------------------------------------------------------------------------


# What :func:`_normalise` checks of ``data`` that a schema can say: the kinds of the
# fields it reads, in either spelling (which one is required depends on the phase).
_DATA_SCHEMA: Final = {
    "properties": {
        "name": {"type": "string"},
        "tool_name": {"type": "string"},
        "arguments": {"type": ["object", "null"]},
        "tool_input": {"type": ["object", "null"]},
    }
}


@attrs.frozen
class WirePolicyEvent:
    """A policy event as ``POST …/policies/evaluate`` carries it (either spelling).

    Its shape only: :func:`parse_policy_event` then checks ``type`` and ``data``.
    """

    type: str = attrs.field(metadata=wire_schema({"enum": list(_PHASES)}))
    data: dict[str, Any] = attrs.field(metadata=wire_schema(_DATA_SCHEMA))
    request_data: dict[str, Any] | None = None
    context: dict[str, Any] | None = None
    target: str | None = None  # the original sends it; omnigent does not use it


@attrs.frozen
class _WireCall:
    name: str | None = None
    arguments: dict[str, Any] | None = None


def parse_policy_event(obj: Any, *, root: str = "") -> PolicyEvent:
    """Validate a policy event in either spelling (see the module docstring) strictly.

    ``type`` is ``PHASE_TOOL_CALL``/``PHASE_TOOL_RESULT`` (or ``tool_call``/
    ``tool_result``). The tool's name is ``data.name`` or ``data.tool_name`` (at the
    result phase ``request_data.name`` will do); its arguments ``data.arguments`` or
    ``data.tool_input`` (at the result phase also ``request_data.args``), an object;
    the output ``data.result`` or ``data.tool_output``, required at the result phase
    and refused at the call phase. Other keys of ``data`` pass through.

    Args:
        obj: the decoded JSON value.
        root: a prefix for error paths (``"event"`` for the HTTP body's ``event``).

    Raises:
        InvalidInput: naming every bad field (``event.data.name``).
    """
    details: list[ErrorDetail] = []
    try:
        wire: WirePolicyEvent | None = structure(obj, WirePolicyEvent, root=root)
    except InvalidInput as exc:
        wire, details = None, list(exc.details)
    fields: Mapping[str, Any] = obj if isinstance(obj, Mapping) else {}
    raw_type = fields.get("type")
    phase = _PHASES.get(raw_type) if isinstance(raw_type, str) else None
    if isinstance(raw_type, str) and phase is None:
        expected = "PHASE_TOOL_CALL, PHASE_TOOL_RESULT, tool_call or tool_result"
        details.append(
            ErrorDetail(_at(root, "type"), f"must be one of {expected}, got {raw_type!r}")
        )
    data: dict[str, Any] = {}
    if isinstance(fields.get("data"), Mapping):
        request_data = fields.get("request_data")
        data, problems = _normalise(
            phase,
            fields["data"],
            request_data if isinstance(request_data, Mapping) else None,
            root,
        )
        details += problems
    if wire is None or phase is None or details:
        summary = "; ".join(f"{d.msg} @ {d.loc or '$'}" for d in details[:5])
        raise InvalidInput(f"invalid policy event: {summary}", details)
    return PolicyEvent(phase, data, wire.request_data, wire.context)


def _at(root: str, path: str) -> str:
    return f"{root}.{path}" if root else path


def _normalise(
    phase: PolicyPhase | None,
    given: Mapping[str, Any],
    request_data: Mapping[str, Any] | None,
    root: str,
) -> tuple[dict[str, Any], list[ErrorDetail]]:
    """``data`` in omnigent's spelling, and what is wrong with it (``phase`` may be
    unknown when ``type`` itself is bad: the checks that need it are skipped)."""
    details: list[ErrorDetail] = []
    data = {k: v for k, v in given.items() if k not in _CANONICAL and k not in _ORIGINAL}
    for own, original in _SPELLINGS:
        if own in given and original in given:
            problem = f"give {original} or {own}, not both"
            details.append(ErrorDetail(_at(root, f"data.{own}"), problem))
            data[own] = given[own]
        elif own in given or original in given:
            data[own] = given[own] if own in given else given[original]
    at_result = phase == PHASE_TOOL_RESULT
    request_problems: list[ErrorDetail] = []
    if at_result and request_data is not None:
        request_problems = _from_request(data, request_data, _at(root, "request_data"))
        details += request_problems
    if "tool_name" not in data:
        if not request_problems:  # else the bad request_data.name says it already
            details.append(ErrorDetail(_at(root, "data.name"), "required field missing"))
    elif not isinstance(data["tool_name"], str):
        problem = _type_error("string", data["tool_name"])
        details.append(ErrorDetail(_at(root, f"data.{_sent(given, 0)}"), problem))
    arguments = data.get("tool_input")
    if arguments is not None and not isinstance(arguments, dict):
        problem = _type_error("object", arguments)
        details.append(ErrorDetail(_at(root, f"data.{_sent(given, 1)}"), problem))
    if at_result and "tool_output" not in data:
        details.append(ErrorDetail(_at(root, "data.result"), "required field missing"))
    if phase == PHASE_TOOL_CALL and "tool_output" in data:
        where = _at(root, f"data.{_sent(given, 2)}")
        details.append(ErrorDetail(where, "only valid at PHASE_TOOL_RESULT"))
    return data, details


def _sent(given: Mapping[str, Any], index: int) -> str:
    """The spelling of field ``index`` of :data:`_SPELLINGS` that the caller used."""
    own, original = _SPELLINGS[index]
    return own if own in given else original


def _from_request(
    data: dict[str, Any], request_data: Mapping[str, Any], where: str
) -> list[ErrorDetail]:
    """At the result phase, the call's name and arguments may come from ``request_data``."""
    known = {"name": request_data.get("name")}
    arguments = request_data.get("args", request_data.get("arguments"))
    if arguments is not None:
        known["arguments"] = arguments
    try:
        call = structure(known, _WireCall, root=where)
    except InvalidInput as exc:
        # ``args`` is the original's key: name the one the caller sent.
        key = "args" if "args" in request_data else "arguments"
        return [
            ErrorDetail(d.loc.replace(f"{where}.arguments", f"{where}.{key}"), d.msg)
            for d in exc.details
        ]
    if call.name is not None:
        data.setdefault("tool_name", call.name)
    if call.arguments is not None:
        data.setdefault("tool_input", call.arguments)
    return []


def _type_error(expected: str, value: Any) -> str:
    names = {bool: "boolean", int: "number", float: "number", str: "string", list: "array"}
    found = "null" if value is None else names.get(type(value), "object")
    return f"expected {expected}, got {found}"
