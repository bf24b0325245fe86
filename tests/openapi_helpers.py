"""Checking real requests and answers against the OpenAPI document (jsonschema)."""

from __future__ import annotations

import json
import re
from typing import Any

import httpx
import jsonschema

from omnigent.transports.http._openapi import openapi_document

DOCUMENT = openapi_document()
_VALIDATOR = jsonschema.Draft202012Validator


def schema_validator(schema: dict[str, Any]) -> jsonschema.Draft202012Validator:
    """A validator for ``schema`` whose ``#/components/...`` refs resolve in the document."""
    return _VALIDATOR({**schema, "components": DOCUMENT["components"]})


def operation(method: str, url_path: str) -> tuple[str, dict[str, Any]]:
    """The documented path template matching ``url_path``, and its operation."""
    for template, item in DOCUMENT["paths"].items():
        pattern = "^" + re.sub(r"\\\{[^/]+?\\\}", "[^/]+", re.escape(template)) + "$"
        if re.match(pattern, url_path) and method.lower() in item:
            return template, item[method.lower()]
    raise AssertionError(f"{method} {url_path} is not in the document")


def request_schema(method: str, url_path: str, media: str = "application/json") -> dict[str, Any]:
    _, op = operation(method, url_path)
    schema: dict[str, Any] = op["requestBody"]["content"][media]["schema"]
    return schema


def body_allowed(method: str, url_path: str, body: Any) -> bool:
    """Whether the document's request schema for the operation accepts ``body``."""
    return schema_validator(request_schema(method, url_path)).is_valid(body)


def assert_conforms(response: httpx.Response) -> Any:
    """The answer's status is documented for its operation and its body matches.

    Returns the decoded JSON body (``None`` for a body that is not JSON).
    """
    request = response.request
    template, op = operation(request.method, request.url.path)
    status = str(response.status_code)
    where = f"{request.method} {template} -> {status}"
    assert status in op["responses"], f"{where} is not documented: {response.text[:300]}"
    documented = op["responses"][status].get("content", {})
    media = response.headers.get("content-type", "").split(";")[0].strip()
    if not documented:
        return None
    assert media in documented, f"{where}: {media} is not one of {sorted(documented)}"
    if media != "application/json":
        return None
    body = response.json()
    errors = list(schema_validator(documented[media]["schema"]).iter_errors(body))
    assert not errors, f"{where}: {[e.message for e in errors[:3]]}\n{json.dumps(body)[:600]}"
    return body


def assert_frames_conform(method: str, url_path: str, raw: bytes) -> list[dict[str, Any]]:
    """Every SSE frame of a stream matches the operation's ``itemSchema``.

    Returns each frame's decoded ``data``.
    """
    _, op = operation(method, url_path)
    media = op["responses"]["200"]["content"]["text/event-stream"]
    frames = schema_validator(media["itemSchema"])
    payloads = []
    for block in raw.decode().split("\n\n"):
        fields: dict[str, str] = {}
        for line in block.split("\n"):
            if line and not line.startswith(":"):
                name, _, value = line.partition(": ")
                fields[name] = value
        if "data" not in fields:
            continue
        errors = [e.message for e in frames.iter_errors(fields)]
        assert not errors, f"frame {fields.get('event')}: {errors[:3]}"
        data = json.loads(fields["data"])
        # contentSchema is an annotation to jsonschema: check the payload ourselves.
        branch = next(
            b for b in media["itemSchema"]["oneOf"] if frames_match(b, fields.get("event"))
        )
        content = branch["properties"]["data"]["contentSchema"]
        errors = [e.message for e in schema_validator(content).iter_errors(data)]
        assert not errors, f"frame {fields.get('event')}: {errors[:3]}\n{fields['data'][:600]}"
        payloads.append(data)
    return payloads


def frames_match(branch: dict[str, Any], event: str | None) -> bool:
    return schema_validator(branch["properties"]["event"]).is_valid(event)
