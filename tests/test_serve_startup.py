"""What ``omnigent serve`` imports before its first answer (``benchmarks/startup.py``).

A server's start is mostly imports; what it does not need before it answers is
imported on first use: the harness packages (a session on the harness), ACP (the
first ``/v1/ws`` socket), the OpenAPI document and the MCP endpoint (their first
request), PyYAML (the first YAML read), the model client's transport (httpcore, the
CA certificates: the first model call), the sandbox (the first sandboxed command,
terminal, MCP server or session), the runner itself (the server imports only
the link's wire, :mod:`omnigent.link`), JSON-RPC and the server's side of a runner's
work (:mod:`omnigent.transports.runner.remote`: the first runner that connects), the
command line's client and turn modules (never, under ``serve``), the placed calls'
classes (:mod:`omnigent.core.runtime._placed_calls`: the first call on live work), the
shared ownership of a cluster store (:mod:`omnigent.core.cluster.shared`: never on
SQLite), ``gzip`` (the console's first page), the routes' request bodies
(:mod:`omnigent.transports.http._bodies`: each route's first request), a session's
tool set and the tools it offers (:mod:`omnigent.core.tools.session`: the first
session's tools), cattrs (the wire converter: the first value structured or
unstructured).
This test runs a real ``omnigent serve`` in a fresh interpreter, asks ``GET /health``
once it listens, and lists what was imported by then, so a module-level import that
drags one of them back in fails here rather than silently slowing every start.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import attrs
import httpx
import pytest
import trio
from werkzeug.routing import Rule

import omnigent
from omnigent.outbound import DeferredTransport
from omnigent.transports.http import create_app

# Imported on first use, never before the first answer of a plain ``serve``.
DEFERRED = (
    "omnigent.client",
    "omnigent.core.cluster.shared",
    "omnigent.core.runtime._placed_calls",
    "omnigent.core.tools.session",
    "omnigent.cli._records",
    "omnigent.cli._run",
    "omnigent.cli._turn",
    "omnigent.harnesses.agents_sdk",
    "omnigent.harnesses.bridge",
    "omnigent.harnesses.claude",
    "omnigent.harnesses.codex",
    "omnigent.harnesses.external",
    "omnigent.harnesses.loop",
    "omnigent.harnesses.native",
    "omnigent.harnesses.pi",
    "omnigent.harnesses.scripted",
    "omnigent.processes.sandbox",
    "omnigent.rpc",
    "omnigent.runner",
    "omnigent.spec._yaml_loader",
    "omnigent.transports.acp",
    "omnigent.transports.http._answers",
    "omnigent.transports.http._bodies",
    "omnigent.transports.http._openapi",
    "omnigent.transports.mcp",
    "omnigent.transports.runner.remote",
    "cattrs",
    "certifi",
    "gzip",
    "httpcore",
    "prometheus_client",
    "trio_websocket",
    "yaml",
)

# Runs ``omnigent serve`` in this process; once it prints its address, a thread asks
# /health, writes the modules imported by then, and stops the server with SIGINT.
PROGRAM = """
import json, os, signal, sys, threading, urllib.request
from omnigent.cli import main

out, real = sys.argv[1], sys.stdout

def first_answer(url):
    with urllib.request.urlopen(url + "/health", timeout=30) as answer:
        status = answer.status
    with open(out, "w") as f:
        json.dump({"status": status, "modules": sorted(sys.modules)}, f)
    os.kill(os.getpid(), signal.SIGINT)

class Watch:
    def write(self, text):
        if "omnigent serving on " in text:
            url = text.split("omnigent serving on ", 1)[1].split()[0]
            threading.Thread(target=first_answer, args=(url,), daemon=True).start()
        return real.write(text)

    def flush(self):
        real.flush()

sys.stdout = Watch()
sys.exit(main(["serve", "--port", "0", "--db", sys.argv[2]]))
"""


def test_serve_answers_before_importing_what_it_does_not_need(tmp_path: Path) -> None:
    found = tmp_path / "modules.json"
    env = {**os.environ, "OMNIGENT_HOME": str(tmp_path / "home")}
    env.pop("OMNIGENT_DB", None)
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM, str(found), f"sqlite:///{tmp_path / 'serve.db'}"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    answered = json.loads(found.read_text())
    assert answered["status"] == 200
    loaded = set(answered["modules"])
    assert "omnigent.transports.http" in loaded  # it did serve
    early = sorted(m for m in loaded if m.startswith(DEFERRED))
    assert early == []


async def test_a_deferred_transport_is_made_by_the_first_request() -> None:
    """The runtime's model client costs nothing until a turn calls a model: its
    transport (httpx's own, which loads the CA certificates) is made then, once."""
    made: list[httpx.MockTransport] = []

    def make() -> httpx.MockTransport:
        made.append(httpx.MockTransport(lambda request: httpx.Response(200, text="ok")))
        return made[-1]

    with trio.fail_after(10):
        async with httpx.AsyncClient(transport=DeferredTransport(make)) as client:
            assert made == []
            assert (await client.get("http://model.test/")).text == "ok"
            assert (await client.get("http://model.test/")).text == "ok"
            assert len(made) == 1
        unused = DeferredTransport(make)
        await unused.aclose()  # never made: nothing to close
        assert len(made) == 1 and not unused.made


async def test_routes_compile_their_url_builders_when_first_used(
    rt: omnigent.Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Werkzeug compiled two URL builders per route as it was added (10 ms of a
    server's start); omnigent builds no URL from its routes, so they are compiled by
    the first URL built — and then built as before."""
    compiled: list[str] = []
    real = Rule._get_func_code

    def counted(code: Any, name: str) -> Any:
        compiled.append(name)
        return real(code, name)

    monkeypatch.setattr(Rule, "_get_func_code", staticmethod(counted))
    # No await below: nothing here can hang.
    app = create_app(rt)
    assert len(list(app.url_map.iter_rules())) > 30
    assert compiled == []
    urls = app.url_map.bind("localhost")
    endpoint, values = urls.match("/v1/sessions/conv_x", method="GET")
    assert values == {"session_id": "conv_x"}
    assert compiled == []  # matching needs no builder
    assert urls.build(endpoint, {"session_id": "conv_y"}) == "/v1/sessions/conv_y"
    assert urls.build(endpoint, {"session_id": "conv_z", "x": "1"}) == ("/v1/sessions/conv_z?x=1")
    assert len(compiled) == 1  # the one builder that was asked for, once


def test_health_written_out_is_the_wire_form() -> None:
    """``Health.to_dict`` skips the converter (so the first ``/health`` imports no
    cattrs): it must say exactly what the converter would."""
    from omnigent.model import Health, unstructure

    for answer in (Health("ok", "srv_1", "sqlite"), Health("unavailable", "", "postgresql")):
        assert answer.to_dict() == unstructure(answer)
        assert list(answer.to_dict()) == [f.name for f in attrs.fields(Health)]
