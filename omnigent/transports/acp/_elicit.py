"""Elicitations that want an answer's *content* as ACP ``elicitation/create`` forms (pure).

An approval (a policy's ASK, a hook's permission request) is a yes or no: it goes to
the client as ``session/request_permission``. An elicitation whose answer carries
content — a form an MCP server asks to be filled (``requestedSchema``), or Claude Code's
``AskUserQuestion`` — goes as a form-mode ``elicitation/create`` when the client
advertised ``elicitation.form``; otherwise it falls back to ``session/request_permission``
(accepting it then sends no content).

ACP's forms are MCP's restricted schema: a flat object whose properties are strings
(single-select enums with ``enum`` or ``oneOf``), numbers, integers, booleans, or
arrays of string choices. :func:`form_params` keeps exactly the keywords that schema
names and refuses (``None``: fall back) a schema with anything it cannot express.
``AskUserQuestion`` becomes one property per question, keyed by the question's text —
the shape its answers go back to Claude Code in.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from ...model import ElicitationParams, ElicitationRequest

__all__ = ["form_params", "read_form_answer"]

log = logging.getLogger("omnigent.transports.acp")

_COMMON = ("title", "description")
_KEEP = {
    "string": (*_COMMON, "minLength", "maxLength", "pattern", "format", "default", "enum"),
    "number": (*_COMMON, "minimum", "maximum", "default"),
    "integer": (*_COMMON, "minimum", "maximum", "default"),
    "boolean": (*_COMMON, "default"),
    "array": (*_COMMON, "minItems", "maxItems", "default"),
}
_FORMATS = frozenset({"email", "uri", "date", "date-time"})
_ACTIONS = frozenset({"accept", "decline", "cancel"})


def form_params(
    request: ElicitationRequest, session_id: str, tool_call_id: str | None
) -> dict[str, Any] | None:
    """``elicitation/create`` params for ``request``, or ``None`` to ask for permission."""
    params = request.params
    schema = _questions_schema(params) if params.ask_user_question is not None else None
    if schema is None and params.requestedSchema is not None:
        schema = _restricted(params.requestedSchema)
    if schema is None:
        return None
    out: dict[str, Any] = {
        "sessionId": session_id,
        "mode": "form",
        "message": params.message,
        "requestedSchema": schema,
        "_meta": {"omnigent": {"elicitationId": request.elicitation_id, "phase": params.phase}},
    }
    if tool_call_id is not None:
        out["toolCallId"] = tool_call_id
    return out


def read_form_answer(result: Any) -> tuple[str, dict[str, Any] | None]:
    """``(action, content)`` from an ``elicitation/create`` result.

    An unknown action (or no answer) is ``decline``: fail closed.
    """
    action = result.get("action") if isinstance(result, Mapping) else None
    if action not in _ACTIONS:
        log.warning("an elicitation answer omnigent does not understand (declined): %r", result)
        return "decline", None
    content = result.get("content") if action == "accept" else None
    return str(action), dict(content) if isinstance(content, Mapping) else None


def _restricted(schema: Mapping[str, Any]) -> dict[str, Any] | None:
    if schema.get("type", "object") != "object":
        return None
    properties = schema.get("properties")
    if not isinstance(properties, Mapping):
        return None
    kept: dict[str, Any] = {}
    for name, prop in properties.items():
        converted = _property(prop)
        if converted is None:
            return None
        kept[str(name)] = converted
    out: dict[str, Any] = {"type": "object", "properties": kept}
    required = schema.get("required")
    if isinstance(required, list) and all(isinstance(r, str) and r in kept for r in required):
        out["required"] = list(required)
    for key in ("title", "description"):
        if isinstance(schema.get(key), str):
            out[key] = schema[key]
    return out


def _property(prop: Any) -> dict[str, Any] | None:
    if not isinstance(prop, Mapping):
        return None
    kind = prop.get("type")
    keep = _KEEP.get(kind) if isinstance(kind, str) else None
    if keep is None:
        return None
    out: dict[str, Any] = {"type": kind}
    for key in keep:
        if prop.get(key) is not None:
            out[key] = prop[key]
    if "format" in out and out["format"] not in _FORMATS:
        del out["format"]
    if kind == "string" and isinstance(prop.get("oneOf"), list):
        options = [_option(o) for o in prop["oneOf"]]
        if any(o is None for o in options):
            return None
        out["oneOf"] = options
    if kind == "array":
        items = _choices(prop.get("items"))
        if items is None:
            return None
        out["items"] = items
    return out


def _option(option: Any) -> dict[str, Any] | None:
    if not isinstance(option, Mapping) or not isinstance(option.get("const"), str):
        return None
    title = option.get("title")
    out = {"const": option["const"], "title": title if isinstance(title, str) else option["const"]}
    if isinstance(option.get("description"), str):
        out["description"] = option["description"]
    return out


def _choices(items: Any) -> dict[str, Any] | None:
    """A multi-select's ``items``: ``{type: string, enum}`` or ``{anyOf: [options]}``."""
    if not isinstance(items, Mapping):
        return None
    if isinstance(items.get("enum"), list) and all(isinstance(e, str) for e in items["enum"]):
        return {"type": "string", "enum": list(items["enum"])}
    for key in ("anyOf", "oneOf"):
        if isinstance(items.get(key), list):
            options = [_option(o) for o in items[key]]
            return None if any(o is None for o in options) else {"anyOf": options}
    return None


def _questions_schema(params: ElicitationParams) -> dict[str, Any] | None:
    """``AskUserQuestion``'s questions as a form: one property per question text."""
    asked = params.ask_user_question or {}
    questions = asked.get("questions")
    if not isinstance(questions, list) or not questions:
        return None
    properties: dict[str, Any] = {}
    for question in questions:
        if not isinstance(question, Mapping) or not isinstance(question.get("question"), str):
            return None
        options = []
        for option in question.get("options") or []:
            label = option.get("label") if isinstance(option, Mapping) else option
            if not isinstance(label, str):
                return None
            entry: dict[str, Any] = {"const": label, "title": label}
            about = option.get("description") if isinstance(option, Mapping) else None
            if isinstance(about, str):
                entry["description"] = about
            options.append(entry)
        text = question["question"]
        header = question.get("header")
        prop: dict[str, Any] = {"title": header if isinstance(header, str) else text}
        prop["description"] = text
        if question.get("multiSelect"):
            prop.update(type="array", items={"anyOf": options})
        elif options:
            prop.update(type="string", oneOf=options)
        else:
            prop["type"] = "string"
        properties[text] = prop
    return {"type": "object", "properties": properties, "required": list(properties)}
