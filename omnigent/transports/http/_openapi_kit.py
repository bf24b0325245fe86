"""The pieces of the OpenAPI document's operations, each schema taken from a type.

:class:`DocumentBuilder` turns the types a route structures and answers with into
request bodies, answers, the error envelope and SSE frame descriptions, through the
generator of :mod:`omnigent.model._schema`; :mod:`._openapi` lists the operations.
"""

from __future__ import annotations

from typing import Any

import attrs

from ...core import EVENT_DATA
from ...model import EVENT_CLASSES, Event, SchemaBuilder
from ._errors import ErrorEnvelope

__all__ = [
    "ELICITATION_ID",
    "HTML",
    "JSONRPC",
    "LIMIT",
    "NON_EMPTY",
    "SESSION_ID",
    "WAITS",
    "DocumentBuilder",
    "path_param",
    "query_param",
]

WAITS = " The request stays open until a person answers."
NON_EMPTY = {"type": "string", "minLength": 1}


def path_param(name: str) -> dict[str, Any]:
    return {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}


def query_param(name: str, schema: dict[str, Any], description: str = "") -> dict[str, Any]:
    out = {"name": name, "in": "query", "schema": schema}
    return {**out, "description": description} if description else out


SESSION_ID = [path_param("session_id")]
ELICITATION_ID = [*SESSION_ID, path_param("elicitation_id")]
LIMIT = query_param("limit", {"type": "integer", "minimum": 1, "maximum": 100})
HTML = {"content": {"text/html": {"schema": {"type": "string"}}}}
JSONRPC = {
    "type": "object",
    "required": ["jsonrpc"],
    "properties": {"jsonrpc": {"const": "2.0"}, "id": {"type": ["string", "integer", "null"]}},
}

_REASONS = {
    "400": "bad request",
    "401": "no identity (--auth header)",
    "403": "not allowed",
    "404": "not found",
    "405": "method not allowed",
    "409": "conflict",
    "413": "too large",
    "415": "unsupported content type",
    "421": "misdirected (unknown Host)",
    "422": "invalid input: `details` names each field",
    "503": "the server is shutting down",
}


class DocumentBuilder:
    """Pieces of operations, with every schema taken from the schema builder."""

    def __init__(self) -> None:
        self.schemas = SchemaBuilder()
        # Components not made from one class: the event body's branches, one per type.
        self.extra: dict[str, Any] = {}
        self._error = self.schemas.response(ErrorEnvelope)

    # -- bodies and answers ----------------------------------------------------------

    def body(self, tp: Any) -> dict[str, Any]:
        """A required JSON request body structured into ``tp``."""
        return {"required": True, "content": {"application/json": {"schema": self.request(tp)}}}

    def request(self, tp: Any) -> dict[str, Any]:
        return self.schemas.request(tp)

    def answer(self, status: str, description: str, tp: Any = None) -> dict[str, Any]:
        """A JSON answer built from ``tp`` (no body when ``tp`` is None)."""
        response: dict[str, Any] = {"description": description}
        if tp is not None:
            schema = tp if isinstance(tp, dict) else self.schemas.response(tp)
            response["content"] = {"application/json": {"schema": schema}}
        return {status: response}

    def any_of(self, *types: Any) -> dict[str, Any]:
        """One of several answers (a route whose answer depends on what was asked)."""
        return {"anyOf": [self.schemas.response(tp) for tp in types]}

    def errors(self, *statuses: str) -> dict[str, Any]:
        """The error envelope for each status; on ``422`` with its ``details``."""
        out: dict[str, Any] = {}
        for status in statuses:
            schema = self._error
            if status == "422":
                schema = {"allOf": [self._error, _WITH_DETAILS]}
            out[status] = {
                "description": _REASONS[status],
                "content": {"application/json": {"schema": schema}},
            }
        return out

    def events(self, description: str) -> dict[str, Any]:
        """A ``200 text/event-stream`` answer of session events (one per SSE frame).

        Described per frame with ``itemSchema`` (OpenAPI 3.2's way for a sequential
        media type; no ``schema``, which would describe the stream as a whole): ``id``
        is the event id, ``event`` its type,
        ``data`` the event as JSON; a stream that fails after it began ends with one
        ``event: error`` frame holding the error envelope.
        """
        event = self.schemas.response(Event)
        frames = [
            _frame({"enum": sorted(EVENT_CLASSES)}, event, with_id=True),
            _frame({"const": "error"}, self._error, with_id=False),
        ]
        media = {"itemSchema": {"oneOf": frames}}
        return {"200": {"description": description, "content": {"text/event-stream": media}}}

    def feed(self, description: str, snapshot: dict[str, Any]) -> dict[str, Any]:
        """A ``200 text/event-stream`` answer of the sessions feed (no frame ids).

        ``feed.snapshot`` and ``feed.synced`` carry only their ``type``;
        ``session.updated`` a ``session`` (``snapshot``), ``session.deleted`` a
        ``session_id``.
        """

        def data(kind: str, **fields: Any) -> dict[str, Any]:
            return {
                "type": "object",
                "properties": {"type": {"const": kind}, **fields},
                "required": ["type", *fields],
            }

        frames = [
            _frame({"const": "feed.snapshot"}, data("feed.snapshot"), with_id=False),
            _frame(
                {"const": "session.updated"},
                data("session.updated", session=snapshot),
                with_id=False,
            ),
            _frame({"const": "feed.synced"}, data("feed.synced"), with_id=False),
            _frame(
                {"const": "session.deleted"},
                data("session.deleted", session_id={"type": "string"}),
                with_id=False,
            ),
            _frame({"const": "error"}, self._error, with_id=False),
        ]
        media = {"itemSchema": {"oneOf": frames}}
        return {"200": {"description": description, "content": {"text/event-stream": media}}}

    def event_body(self) -> dict[str, Any]:
        """``{type, data}``: one branch per event type, ``data`` from its class."""
        mapping = {}
        for kind, cls in EVENT_DATA.items():
            data = self.request(cls)
            branch: dict[str, Any] = {
                "type": "object",
                "additionalProperties": False,
                "properties": {"type": {"const": kind}, "data": data},
                "required": ["type", "data"],
            }
            if all(f.default is not attrs.NOTHING for f in attrs.fields(cls)):
                # Nothing required: ``data`` may be left out, or null.
                branch["properties"]["data"] = {"anyOf": [data, {"type": "null"}]}
                branch["required"] = ["type"]
            name = "Post" + "".join(part.capitalize() for part in kind.split("_"))
            self.extra[name] = branch
            mapping[kind] = f"#/components/schemas/{name}"
        return {
            "required": True,
            "content": {
                "application/json": {
                    "schema": {
                        "oneOf": [{"$ref": ref} for ref in mapping.values()],
                        "discriminator": {"propertyName": "type", "mapping": mapping},
                    }
                }
            },
        }


_WITH_DETAILS = {"properties": {"error": {"required": ["details"]}}}


def _frame(event: dict[str, Any], data: dict[str, Any], *, with_id: bool) -> dict[str, Any]:
    properties: dict[str, Any] = {
        "event": {"type": "string", **event},
        "data": {
            "type": "string",
            "contentMediaType": "application/json",
            "contentSchema": data,
        },
    }
    required = ["event", "data"]
    if with_id:
        properties["id"] = {"type": "string", "pattern": "^[0-9]+$"}
        required.append("id")
    return {"type": "object", "properties": properties, "required": required}
