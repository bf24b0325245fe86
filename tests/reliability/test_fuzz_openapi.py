"""Fuzz the HTTP API from its own OpenAPI document (schemathesis) on a real ``omnigent serve``.

Every operation of ``/v1/openapi.json`` gets requests generated from the document —
valid ones, and ones the document forbids — sent over loopback to a server subprocess.
Every answer must be documented for its status and match the schema (``5xx`` never);
a body the document forbids must be refused; no answer may carry a traceback, a file
path or an exception class name; every ``4xx`` is the ``{"error": {"code",
"message"}}`` envelope, with ``details`` (``loc``/``msg``) on ``422``.

Bounded and reproducible: a fixed seed, derandomized generation, no example
database, a fixed number of examples per operation and a per-request timeout. Path
parameters are pointed at real sessions, agents and files for part of the cases
(chosen from the generated value, so the choice is reproducible too), so the fuzzer
reaches past the ``404``.
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import schemathesis
from schemathesis.checks import not_a_server_error
from schemathesis.config import SchemathesisConfig
from schemathesis.specs.openapi.checks import (
    allow_header_conformance,
    content_type_conformance,
    negative_data_rejection,
    response_schema_conformance,
    status_code_conformance,
    unsupported_method,
)

from omnigent.transports.http._openapi import openapi_document

from .fuzz_helpers import Decliner, Served, leaks, prepare, sent_text, serve

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "20"))
TIMEOUT = 5.0
TAIL = 0.3

CONFIG = SchemathesisConfig.from_str(
    f"""
seed = {os.environ.get("FUZZ_SEED", "20261201")}
request-timeout = {TIMEOUT}
max-stream-events = 3
generation.max-examples = {EXAMPLES}
generation.deterministic = true
generation.database = "none"
phases.stateful.enabled = false
"""
)
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    negative_data_rejection,
    unsupported_method,  # a method a path does not have: 405 with ``Allow``
    allow_header_conformance,
]
# Not ``positive_data_acceptance``: a body the document allows may still be refused
# for the state it meets (an unknown id, a cross-field rule the document leaves to the
# server), and that is by design.
# Answers in a protocol of their own: MCP's JSON-RPC errors, the WebSocket upgrade.
_OWN_ERRORS = {("POST", "/v1/sessions/{session_id}/mcp")}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("fuzz")
    with serve(root) as (url, _server):
        ready = prepare(url, root)
        with Decliner(url, ready.session_ids):
            yield ready
    log = (root / "server.log").read_text()
    assert "Traceback" not in log, log[-4000:]


# The document as the app builds it (the served one is the same: checked below).
# Loaded here rather than from the running server: schemathesis' lazy ``from_fixture``
# does not run under pytest 9.
schema = schemathesis.openapi.from_dict(openapi_document(), config=CONFIG)


def _pick(options: tuple[str, ...], generated: Any) -> str | None:
    """One of ``options`` for most generated values, None (keep it) for the rest."""
    index = zlib.crc32(repr(generated).encode()) % (len(options) + 1)
    return options[index] if index < len(options) else None


def _target(case: Any, served: Served) -> None:
    """Point some path parameters (and agent ids) at real resources, reproducibly."""
    params = case.path_parameters or {}
    pools = {
        "session_id": served.session_ids,
        "agent_id": served.agent_ids,
        "file_id": served.file_ids,
    }
    for name, pool in pools.items():
        if isinstance(params.get(name), str) and (real := _pick(pool, params[name])):
            params[name] = real
    deleting = case.method == "DELETE" and case.path == "/v1/sessions/{session_id}"
    if deleting and params.get("session_id") in served.session_ids:
        params["session_id"] = _fresh_session(served)  # keep the targets alive
    body = case.body
    creating = case.path == "/v1/sessions" and case.method == "POST" and isinstance(body, dict)
    if creating and isinstance(body.get("agent_id"), str):
        body["agent_id"] = _pick(served.agent_ids, body) or body["agent_id"]


def _fresh_session(served: Served) -> str:
    body = {"agent_id": served.agent_ids[0]}
    answer = httpx.post(f"{served.url}/v1/sessions", json=body, timeout=TIMEOUT)
    assert answer.status_code == 201, answer.text
    session_id: str = answer.json()["id"]
    return session_id


def _timeout(case: Any) -> float:
    # A live stream never ends: what it replays arrives at once, then it only tails.
    live = ("/v1/sessions/{session_id}/stream", "/v1/feed")
    return TAIL if case.path in live else TIMEOUT


@schema.parametrize()
def test_fuzz_the_api_from_its_document(case: Any, served: Served) -> None:
    _target(case, served)
    response = case.call(base_url=served.url, timeout=_timeout(case))
    case.validate_response(response, checks=CHECKS)
    text = response.content.decode("utf-8", "replace")
    found = leaks(text, sent_text(case))
    assert not found, f"{case.method} {case.path} -> {response.status_code}: {found}\n{text[:500]}"
    if 400 <= response.status_code < 500 and (case.method, case.path) not in _OWN_ERRORS:
        _assert_envelope(response, f"{case.method} {case.formatted_path}")


def _assert_envelope(response: Any, request: str) -> None:
    where = f"{request} -> {response.status_code}"
    content_type = (response.headers.get("content-type") or [""])[0]
    assert content_type.startswith("application/json"), f"{where}: {content_type}"
    error = response.json().get("error")
    assert isinstance(error, dict), f"{where}: {response.text[:300]}"
    assert isinstance(error.get("code"), str) and isinstance(error.get("message"), str), where
    if response.status_code == 422:
        details = error.get("details")
        assert isinstance(details, list) and details, f"{where}: {response.text[:300]}"
        for detail in details:
            assert set(detail) == {"loc", "msg"}, where
            assert isinstance(detail["loc"], str) and isinstance(detail["msg"], str), where


def test_the_rig_fuzzed_the_served_document_and_reached_real_sessions(served: Served) -> None:
    with httpx.Client(base_url=served.url, timeout=TIMEOUT) as client:
        assert client.get("/v1/openapi.json").json() == openapi_document()
        # The targeting must keep pointing at live sessions, or the fuzz only meets 404s.
        for session_id in served.session_ids:
            assert client.get(f"/v1/sessions/{session_id}").status_code == 200


def test_the_leak_check_sees_internals_but_not_what_was_sent() -> None:
    trace = 'Traceback (most recent call last):\n  File "/srv/app/x.py", line 3, in f\nKeyError'
    assert len(leaks(trace, "")) >= 3
    assert leaks("unknown event type 'FooError' (expected one of: message)", "'FooError'") == []
    assert leaks("invalid input: expected string, got number @ data.text", "{}") == []
