"""No code runs because a client asked: function policies only from the operator.

Each attack runs against a real ``omnigent serve`` subprocess. A function policy names
a Python callable, so before the fix any caller who could register an agent could name
``sys:exit`` (the server stopped: the ``SystemExit`` from the worker thread passed every
``except Exception``), ``subprocess:getoutput`` (a shell), or a module whose import runs
code (``unittest.__main__:main``, run at ``POST /v1/agents``). Now only what the
operator allowed may run — ``serve --policy-module``, the ``omnigent.policies``
entry-point group, ``serve --policies FILE`` — anything else is ``422`` with nothing
imported, and a policy that raises anything denies.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import httpx
import pytest
import trio

pytestmark = [
    pytest.mark.filterwarnings(r"ignore:Async generator '(httpx|httpcore)\.:ResourceWarning"),
]

EVALUATE = "/v1/sessions/{}/policies/evaluate"
CALL = {"event": {"type": "PHASE_TOOL_CALL", "data": {"name": "Bash", "arguments": {}}}}

# A module the operator allowed. ``getoutput`` is imported into it, not defined there.
OPERATOR_MODULE = """
import os
from subprocess import getoutput

def deny_bash(event):
    if event["data"]["name"] == "Bash":
        return {"result": "DENY", "reason": "no shell"}
    return {"result": "ALLOW"}

def exits(event):
    raise SystemExit(3)

def interrupts(event):
    raise KeyboardInterrupt

class Guard:
    @staticmethod
    def check(event):
        return {"result": "DENY", "reason": "guarded"}
"""
# Import-time code: if it ever runs, it leaves a file behind.
MARKER_MODULE = """
import pathlib, os
pathlib.Path(os.environ["MARKER_FILE"]).write_text("imported")

def check(event):
    return {"result": "DENY", "reason": "default policy"}
"""
EXIT_AT_IMPORT = "raise SystemExit('bye from import')\n"


def scripted(name: str, script: list[Any] | None = None, **extra: Any) -> dict[str, Any]:
    config = {"harness": "scripted", "script": script or [{"say": "hi"}]}
    return {"name": name, "executor": {"type": "omnigent", "config": config}, **extra}


def function_policy(ref: str) -> dict[str, Any]:
    return {"name": "p", "type": "function", "function": ref}


@attrs.define
class Served:
    client: httpx.AsyncClient
    process: trio.Process
    marker: Path

    async def register(self, name: str, ref: str) -> httpx.Response:
        spec = scripted(name, policies=[function_policy(ref)])
        return await self.client.post("/v1/agents", json=spec)

    async def alive(self) -> bool:
        if self.process.returncode is not None:
            return False
        return bool((await self.client.get("/health")).json()["status"] == "ok")


def _plant(root: Path) -> None:
    """The modules (and an installed entry point) the server could import."""
    root.mkdir()
    (root / "operator_policies.py").write_text(OPERATOR_MODULE)
    (root / "import_marker.py").write_text(MARKER_MODULE)
    (root / "exit_at_import.py").write_text(EXIT_AT_IMPORT)
    (root / "ep_policies.py").write_text(
        "def guard(event):\n    return {'result': 'DENY', 'reason': 'from an entry point'}\n"
    )
    dist = root / "ep_policies-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: ep-policies\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[omnigent.policies]\nguard = ep_policies:guard\n")


async def _read_line(stream: trio.abc.ReceiveStream) -> str:
    line = b""
    while not line.endswith(b"\n"):
        chunk = await stream.receive_some(1)
        assert chunk, f"the server exited before printing its URL: {line!r}"
        line += chunk
    return line.decode()


@asynccontextmanager
async def omnigent_serve(tmp_path: Path, *args: str) -> AsyncIterator[Served]:
    """``omnigent serve --port 0 ARGS`` with the planted modules importable."""
    modules = tmp_path / "modules"
    _plant(modules)
    marker = tmp_path / "imported.marker"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(modules), os.environ.get("PYTHONPATH", "")]),
        "MARKER_FILE": str(marker),
        "OMNIGENT_HOME": str(tmp_path / "home"),
    }
    env.pop("OMNIGENT_DB", None)
    command = [sys.executable, "-m", "omnigent", "serve", "--port", "0", *args]
    command += ["--db", f"sqlite:///{tmp_path / 'o.db'}"]
    process = await trio.lowlevel.open_process(
        command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, cwd=tmp_path
    )
    try:
        assert process.stdout is not None
        line = await _read_line(process.stdout)
        assert line.startswith("omnigent serving on "), line
        url = line.split(" on ", 1)[1].strip()
        async with httpx.AsyncClient(base_url=url, timeout=10) as client:
            yield Served(client, process, marker)
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGINT)
            with trio.move_on_after(10):
                await process.wait()
        if process.returncode is None:
            process.kill()
            await process.wait()


def assert_refused(answer: httpx.Response, ref: str) -> None:
    assert answer.status_code == 422, answer.text
    error = answer.json()["error"]
    assert error["code"] == "invalid_spec"
    assert [d["loc"] for d in error["details"]] == ["policies[0].function"]
    assert ref in error["details"][0]["msg"]


@pytest.mark.parametrize(
    "ref",
    [
        "sys:exit",
        "builtins:exit",
        "subprocess:getoutput",
        "os.system",
        "unittest.__main__:main",
        "import_marker:check",  # importable, but nobody allowed it
        "operator_policies.deny_bash.__globals__",  # not through an allowed module either
    ],
)
async def test_a_reference_nobody_allowed_is_refused_and_nothing_runs(
    tmp_path: Path, ref: str
) -> None:
    with trio.fail_after(30):
        async with omnigent_serve(tmp_path) as served:
            # Another user's turn, running while the attack is made.
            other = (await served.client.post("/v1/agents", json=scripted("other"))).json()
            session = await served.client.post("/v1/sessions", json={"agent_id": other["id"]})
            sid = session.json()["id"]
            assert_refused(await served.register("evil", ref), ref)
            assert await served.alive()
            assert not served.marker.exists()  # nothing was imported
            body = {"type": "message", "data": {"content": [{"type": "input_text", "text": "x"}]}}
            async with served.client.stream(
                "POST", f"/v1/sessions/{sid}/events?stream=true", json=body
            ) as turn:
                streamed = b"".join([chunk async for chunk in turn.aiter_raw()])
            assert b"event: response.completed" in streamed  # unaffected
            agents = (await served.client.get("/v1/agents")).json()["data"]
            assert [a["name"] for a in agents] == ["other"]  # the spec was not stored


async def test_yaml_bodies_are_refused_the_same_way(tmp_path: Path) -> None:
    with trio.fail_after(30):
        async with omnigent_serve(tmp_path) as served:
            spec = (
                "name: evil\nexecutor: {type: omnigent, config: {harness: scripted}}\n"
                "policies: [{name: p, type: function, function: 'sys:exit'}]\n"
            )
            answer = await served.client.post(
                "/v1/agents", content=spec, headers={"Content-Type": "application/yaml"}
            )
            assert_refused(answer, "sys:exit")
            assert await served.alive()


@pytest.mark.parametrize(
    "ref",
    [
        "operator_policies:getoutput",  # imported into the allowed module, defined elsewhere
        "operator_policies:os.system",  # through a module
        "operator_policies:__builtins__",  # a dunder
        "operator_policies:deny_bash.__call__",
    ],
)
async def test_an_allowed_module_admits_only_its_own_callables(tmp_path: Path, ref: str) -> None:
    with trio.fail_after(30):
        async with omnigent_serve(tmp_path, "--policy-module", "operator_policies") as served:
            answer = await served.register("sneaky", ref)
            assert answer.status_code == 422, answer.text
            assert answer.json()["error"]["details"][0]["loc"] == "policies[0].function"
            assert await served.alive()


async def test_an_allowed_module_works(tmp_path: Path) -> None:
    with trio.fail_after(30):
        async with omnigent_serve(tmp_path, "--policy-module", "operator_policies") as served:
            for name, ref in [
                ("a", "operator_policies:deny_bash"),
                ("b", "operator_policies.deny_bash"),
                ("c", "operator_policies:Guard.check"),
            ]:
                answer = await served.register(name, ref)
                assert answer.status_code == 201, answer.text
                created = await served.client.post("/v1/sessions", json={"agent_name": name})
                sid = created.json()["id"]
                verdict = await served.client.post(EVALUATE.format(sid), json=CALL)
                assert verdict.json()["result"] == "POLICY_ACTION_DENY", verdict.text


@pytest.mark.parametrize("attr", ["exits", "interrupts"])
async def test_a_policy_that_exits_or_interrupts_denies_and_the_server_lives(
    tmp_path: Path, attr: str
) -> None:
    with trio.fail_after(30):
        async with omnigent_serve(tmp_path, "--policy-module", "operator_policies") as served:
            spec = scripted(
                "fragile",
                [{"call": "sys_os_shell", "args": {"command": "echo ran > ran.txt"}}],
                policies=[function_policy(f"operator_policies:{attr}")],
            )
            assert (await served.client.post("/v1/agents", json=spec)).status_code == 201
            sid = (await served.client.post("/v1/sessions", json={"agent_name": "fragile"})).json()[
                "id"
            ]
            verdict = await served.client.post(EVALUATE.format(sid), json=CALL)
            assert verdict.status_code == 200, verdict.text
            assert verdict.json()["result"] == "POLICY_ACTION_DENY"
            assert verdict.json()["reason"].startswith("policy p failed: ")
            # In a turn, too: the tool is refused, the turn ends, the server goes on.
            body = {"type": "message", "data": {"content": [{"type": "input_text", "text": "x"}]}}
            async with served.client.stream(
                "POST", f"/v1/sessions/{sid}/events?stream=true", json=body
            ) as turn:
                streamed = b"".join([chunk async for chunk in turn.aiter_raw()])
            assert b"Error: denied by policy p: policy p failed" in streamed
            assert b"event: response.completed" in streamed
            assert not list((tmp_path / "home").rglob("ran.txt"))
            assert await served.alive()


async def test_an_allowed_module_that_exits_when_imported_is_refused(tmp_path: Path) -> None:
    with trio.fail_after(30):
        async with omnigent_serve(tmp_path, "--policy-module", "exit_at_import") as served:
            answer = await served.register("bye", "exit_at_import:check")
            assert answer.status_code == 422, answer.text
            assert "cannot load" in answer.json()["error"]["details"][0]["msg"]
            assert await served.alive()


async def test_an_entry_point_is_allowed_by_name(tmp_path: Path) -> None:
    with trio.fail_after(30):
        async with omnigent_serve(tmp_path) as served:
            for name, ref in [("by-name", "guard"), ("by-value", "ep_policies:guard")]:
                answer = await served.register(name, ref)
                assert answer.status_code == 201, answer.text
                sid = (await served.client.post("/v1/sessions", json={"agent_name": name})).json()[
                    "id"
                ]
                verdict = await served.client.post(EVALUATE.format(sid), json=CALL)
                assert verdict.json() == {
                    "result": "POLICY_ACTION_DENY",
                    "reason": "from an entry point",
                }


async def test_the_operators_policies_file_may_name_any_module(tmp_path: Path) -> None:
    policies = tmp_path / "policies.yaml"
    policies.write_text("- {name: server, type: function, function: 'import_marker:check'}\n")
    with trio.fail_after(30):
        async with omnigent_serve(tmp_path, "--policies", str(policies)) as served:
            sid = (
                await served.client.post(
                    "/v1/sessions",
                    json={
                        "agent_id": (
                            await served.client.post("/v1/agents", json=scripted("plain"))
                        ).json()["id"]
                    },
                )
            ).json()["id"]
            verdict = await served.client.post(EVALUATE.format(sid), json=CALL)
            assert verdict.json() == {"result": "POLICY_ACTION_DENY", "reason": "default policy"}
            assert served.marker.exists()  # the operator's module, imported on purpose
