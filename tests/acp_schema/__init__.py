"""The ACP v1 JSON schema, vendored, and a check of every message omnigent sends.

``schema.json`` and ``schema.unstable.json`` are ACP's own files at the tag
``schema-v1.21.0`` of github.com/agentclientprotocol/agent-client-protocol (commit
272bf799f35a258c6a4107a0410ed361e83683d3, ``schema/v1/``); ``meta.json`` names its
methods. ``VERSION`` says so too. The stable schema decides everything but the one
unstable method omnigent answers (``session/fork``), which the unstable schema decides
(and ``initialize``'s answer, valid by both: it advertises ``fork``).

:class:`AcpSchema` checks one message in the agent-to-client direction: a response
against the ``…Response`` type of the method it answers (an error against ``Error``),
a request or notification against the type of its method. ``_``-prefixed extension
methods have no schema (ACP leaves them open) and are checked as JSON-RPC only. Beyond
the schema (which never forbids extra keys), every object key must be one some branch
of its schema declares, so a misspelt field (``messageID``) fails too.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import referencing
import referencing.jsonschema

HERE = Path(__file__).parent
VERSION = (HERE / "VERSION").read_text().split()[0]
UNSTABLE_METHODS = frozenset({"session/fork"})


class SchemaViolation(AssertionError):
    """A message omnigent sent does not conform to the ACP schema."""


def _load(name: str) -> dict[str, Any]:
    schema: dict[str, Any] = json.loads((HERE / name).read_text())
    return schema


class _Schema:
    """One schema file: validators per ``$defs`` type, and the method → type maps."""

    def __init__(self, name: str) -> None:
        self.document = _load(name)
        self.uri = f"urn:acp:{name}"
        resource = referencing.Resource.from_contents(
            self.document, default_specification=referencing.jsonschema.DRAFT202012
        )
        self.registry: referencing.Registry[Any] = referencing.Registry().with_resource(
            self.uri, resource
        )
        self.defs: dict[str, Any] = self.document["$defs"]
        # (side, method, "Request" | "Response" | "Notification") -> type name
        self.types: dict[tuple[str, str, str], str] = {}
        for type_name, schema in self.defs.items():
            method, side = schema.get("x-method"), schema.get("x-side")
            if method is None:
                continue
            for kind in ("Request", "Response", "Notification"):
                if type_name.endswith(kind):
                    self.types[(side, method, kind)] = type_name

    @cache  # noqa: B019 - the two schemas live as long as the test process
    def validator(self, type_name: str) -> jsonschema.Draft202012Validator:
        ref = {"$ref": f"{self.uri}#/$defs/{type_name}"}
        return jsonschema.Draft202012Validator(ref, registry=self.registry)

    def check(self, type_name: str, instance: Any, where: str, *, keys: bool = True) -> None:
        errors = sorted(self.validator(type_name).iter_errors(instance), key=str)
        if errors:
            first = errors[0]
            path = "/".join(str(p) for p in first.absolute_path)
            raise SchemaViolation(
                f"{where}: not a valid {type_name} (schema {VERSION}) at /{path}: "
                f"{first.message}\n{json.dumps(instance)[:2000]}"
            )
        unknown = keys and self._unknown_keys(instance, {"$ref": f"#/$defs/{type_name}"}, "")
        if unknown:
            raise SchemaViolation(
                f"{where}: keys {type_name} (schema {VERSION}) does not declare: {unknown}\n"
                f"{json.dumps(instance)[:2000]}"
            )

    # -- keys no branch declares ---------------------------------------------------

    def _resolve(self, schema: Any) -> Any:
        seen = 0
        while isinstance(schema, dict) and "$ref" in schema and seen < 50:
            name = schema["$ref"].rsplit("/", 1)[-1]
            extra = {k: v for k, v in schema.items() if k != "$ref"}
            schema = {**self.defs[name], **extra} if extra else self.defs[name]
            seen += 1
        return schema

    def _branches(self, schema: Any) -> list[dict[str, Any]]:
        """Every object schema ``schema`` may stand for (through $ref/allOf/anyOf/oneOf)."""
        out: list[dict[str, Any]] = []
        stack = [schema]
        while stack:
            current = self._resolve(stack.pop())
            if not isinstance(current, dict):
                continue
            out.append(current)
            for key in ("allOf", "anyOf", "oneOf"):
                stack.extend(current.get(key, ()))
        return out

    def _unknown_keys(self, instance: Any, schema: Any, path: str) -> list[str]:
        branches = self._branches(schema)
        found: list[str] = []
        if isinstance(instance, dict):
            if any(b.get("additionalProperties") is True for b in branches):
                return []
            if any(b.get("type") in ("object", ["object", "null"]) and "properties" not in b
                   and not b.get("allOf") and not b.get("anyOf") and not b.get("oneOf")
                   for b in branches):  # fmt: skip
                return []  # an open object (a JSON Schema, rawInput, content)
            declared: dict[str, list[Any]] = {}
            for branch in branches:
                for key, sub in branch.get("properties", {}).items():
                    declared.setdefault(key, []).append(sub)
            if not declared:
                return []
            for key, value in instance.items():
                if key not in declared:
                    found.append(f"{path}/{key}")
                    continue
                found.extend(self._unknown_keys(value, {"anyOf": declared[key]}, f"{path}/{key}"))
        elif isinstance(instance, list):
            items = [b["items"] for b in branches if isinstance(b.get("items"), dict)]
            if items:
                for index, value in enumerate(instance):
                    found.extend(self._unknown_keys(value, {"anyOf": items}, f"{path}/{index}"))
        return found


@cache
def _stable() -> _Schema:
    return _Schema("schema.json")


@cache
def _unstable() -> _Schema:
    return _Schema("schema.unstable.json")


class AcpSchema:
    """Checks the messages one connection's agent sends (see the module docstring).

    The requests the client sent are remembered by id (:meth:`client_sent`), so the
    agent's answer is checked against the type of the method it answers.
    """

    def __init__(self) -> None:
        self._asked: dict[Any, str] = {}
        self.checked = 0

    def client_sent(self, message: dict[str, Any]) -> None:
        if "method" in message and "id" in message:
            self._asked[message["id"]] = message["method"]

    def agent_sent(self, message: Any) -> None:
        """Raise :class:`SchemaViolation` unless ``message`` is a valid ACP message."""
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            raise SchemaViolation(f"not a JSON-RPC 2.0 message: {message!r}")
        self.checked += 1
        stable = _stable()
        if "method" not in message:
            self._response(message)
            return
        method = message["method"]
        params = message.get("params")
        if method.startswith("_"):
            return  # an extension: ACP leaves it open
        kind = "Request" if "id" in message else "Notification"
        if kind == "Request":
            stable.check("RequestId", message["id"], f"{method} id")
        side = "protocol" if method.startswith("$/") else "client"
        type_name = stable.types.get((side, method, kind))
        if type_name is None:
            raise SchemaViolation(f"the agent sent {method!r}, which ACP v1 has no {kind} for")
        stable.check(type_name, params, f"{kind} {method}")

    def _response(self, message: dict[str, Any]) -> None:
        stable = _stable()
        if "id" not in message or ("result" in message) == ("error" in message):
            raise SchemaViolation(f"neither a request, a notification nor a response: {message}")
        method = self._asked.pop(message["id"], None)
        if message["id"] is not None:
            stable.check("RequestId", message["id"], "response id")
        if "error" in message:
            stable.check("Error", message["error"], f"error answering {method}")
            return
        if method is None:
            raise SchemaViolation(f"a result for no request the client sent: {message}")
        if method.startswith("_"):
            return
        unstable = method in UNSTABLE_METHODS
        schema = _unstable() if unstable else stable
        type_name = schema.types.get(("agent", method, "Response"))
        if type_name is None:
            raise SchemaViolation(f"a result for {method!r}, which ACP v1 does not define")
        where = f"result of {method}"
        if method == "initialize":
            # It advertises the unstable methods too: valid by the stable schema, and
            # every key declared by the unstable one (sessionCapabilities.fork).
            stable.check(type_name, message["result"], where, keys=False)
            _unstable().check(type_name, message["result"], where)
            return
        schema.check(type_name, message["result"], where)


class CheckedStream:
    """A client's message stream that checks everything the agent sends on it.

    Wraps the client side's :class:`~omnigent.rpc.MessageStream`:
    each message received (the agent's) goes through :meth:`AcpSchema.agent_sent`, each
    one sent (the client's) is remembered for the answer. A violation raises in the
    client's read loop, so the test using the connection fails with it.
    """

    def __init__(self, inner: Any, schema: AcpSchema | None = None) -> None:
        self._inner = inner
        self.schema = schema or AcpSchema()

    async def receive(self) -> Any:
        raw = await self._inner.receive()
        if isinstance(raw, str | bytes):
            self.schema.agent_sent(json.loads(raw))
        return raw

    async def send(self, text: str) -> None:
        self.schema.client_sent(json.loads(text))
        await self._inner.send(text)
