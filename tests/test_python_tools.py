"""A spec's own Python tools (``tools.python``): offered to the agents that name them,
under the function's name, with a schema from the signature and docstring; sync ones in
a thread and async ones on the loop, both cancelled with their turn; a client's spec
names only what the operator allowed (nothing else is imported); a module beside an
operator's spec file imports with no ``PYTHONPATH``."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio
import yaml

import omnigent
from omnigent.core.tools import ToolAllowlist
from omnigent.model import FunctionCallOutputItem

from .http_helpers import open_server

TOOLS_MODULE = '''
import threading
import trio
from typing import Literal

RELEASE = threading.Event()
STARTED = threading.Event()


def add(a: int, b: int = 2) -> int:
    """Add two integers.

    Args:
        a: the first.
        b: the second, 2 if not given.
    """
    return a + b


async def shout(text: str, style: Literal["loud", "quiet"] = "loud") -> str:
    """Say it again."""
    await trio.sleep(0)
    return text.upper() if style == "loud" else text.lower()


def stuck() -> str:
    """Wait for the test to let go."""
    STARTED.set()
    RELEASE.wait(30)
    return "released"


async def forever() -> str:
    """Never returns."""
    await trio.sleep_forever()
    return "never"


def boom() -> str:
    """Fails."""
    raise ValueError("no luck")
'''


@pytest.fixture
def tools_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A module of tools with a name of its own, importable for this test only."""
    name = f"fc_tools_{os.getpid()}_{abs(hash(tmp_path)) % 10_000_000}"
    (tmp_path / f"{name}.py").write_text(TOOLS_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name
    module = sys.modules.pop(name, None)
    if module is not None:
        module.RELEASE.set()


def spec(
    name: str, module: str, tools: list[str], script: list[Any] | None = None
) -> dict[str, Any]:
    config: dict[str, Any] = {"harness": "scripted", "script": script or [{"say": "done"}]}
    return {
        "name": name,
        "executor": {"type": "omnigent", "config": config},
        "tools": {"python": [f"{module}:{t}" for t in tools]},
    }


async def collect_turn(events: Any) -> list[Any]:
    return [event async for event in events]


def outputs(events: list[Any]) -> list[str]:
    return [
        e.item.output
        for e in events
        if e.type == "response.output_item.done" and isinstance(e.item, FunctionCallOutputItem)
    ]


async def test_tools_are_offered_to_the_agent_that_names_them(tools_module: str) -> None:
    calls = [
        {"call": "add", "args": {"a": 40}},
        {"call": "shout", "args": {"text": "hi"}},
        {"call": "shout", "args": {"text": "hi", "style": "shrill"}},
        {"call": "boom"},
    ]
    with trio.fail_after(20):
        async with omnigent.open_runtime() as rt:
            agent = await rt.create_agent(
                spec("calc", tools_module, ["add", "shout", "boom"], calls)
            )
            other = await rt.create_agent(spec("other", tools_module, [], [{"call": "add"}]))
            session = await rt.create_session(agent.id)
            async with rt.open_turn_stream(session.id, "go") as (_, events):
                done = await collect_turn(events)
            assert outputs(done) == [
                "42",
                "HI",
                "Error: invalid arguments for shout: argument 'style' must be one of "
                '"loud", "quiet", got str',
                "Error: boom failed: no luck",
            ]
            offered = {t.name: t for t in await rt.session_tools(session.id)}
            assert offered["add"].description == "Add two integers."
            assert offered["add"].parameters == {
                "type": "object",
                "properties": {
                    "a": {"type": "integer", "description": "the first."},
                    "b": {
                        "type": "integer",
                        "description": "the second, 2 if not given.",
                        "default": 2,
                    },
                },
                "required": ["a"],
            }
            assert offered["shout"].parameters["properties"]["style"]["enum"] == ["loud", "quiet"]
            # Another agent's session is not offered them.
            elsewhere = await rt.create_session(other.id)
            assert "add" not in {t.name for t in await rt.session_tools(elsewhere.id)}
            async with rt.open_turn_stream(elsewhere.id, "go") as (_, events):
                [refused] = outputs(await collect_turn(events))
            assert refused.startswith("Error: unknown tool 'add'")


async def test_a_name_that_clashes_is_refused(tools_module: str) -> None:
    with trio.fail_after(20):
        async with omnigent.open_runtime() as rt:
            with pytest.raises(omnigent.SpecError) as twice:
                await rt.create_agent(
                    {"name": "a", "tools": {"python": [f"{tools_module}:add", "os.path:add"]}}
                )
            assert [(d.loc, d.msg) for d in twice.value.details] == [
                (
                    "tools.python[1]",
                    f"tool 'add' clashes with '{tools_module}:add', also named 'add'",
                )
            ]
            with pytest.raises(omnigent.SpecError) as builtin:
                await rt.create_agent({"name": "a", "tools": {"python": ["mod:sys_os_read"]}})
            assert builtin.value.details[0].loc == "tools.python[0]"
            assert "omnigent's own" in builtin.value.details[0].msg

            def add(x: int) -> int:
                return x

            rt.register_tool(add)
            with pytest.raises(omnigent.SpecError) as registered:
                await rt.create_agent(spec("b", tools_module, ["add"]))
            assert registered.value.details[0].msg == (
                "tool 'add' clashes with a tool registered on the runtime"
            )
            with pytest.raises(omnigent.SpecError) as missing:
                await rt.create_agent({"name": "c", "tools": {"python": ["no_such_module_x:f"]}})
            assert missing.value.details[0].loc == "tools.python[0]"
            assert "no_such_module_x" in missing.value.details[0].msg
            with pytest.raises(omnigent.SpecError):
                await rt.create_agent({"name": "d", "tools": {"python": ["not a reference"]}})


async def test_sync_and_async_tools_end_with_their_turn(tools_module: str) -> None:
    with trio.fail_after(20):
        async with omnigent.open_runtime() as rt:
            agent = await rt.create_agent(
                spec("waits", tools_module, ["stuck", "forever"], [{"call": "stuck"}])
            )
            looping = await rt.create_agent(
                spec("loops", tools_module, ["forever"], [{"call": "forever"}])
            )
            module = sys.modules.get(tools_module)
            session = await rt.create_session(agent.id)
            async with rt.open_turn_stream(session.id, "go") as (_, events):
                async for event in events:
                    if event.type == "response.output_item.done":
                        module = sys.modules[tools_module]
                        await trio.to_thread.run_sync(module.STARTED.wait, 10)
                        # The thread cannot be interrupted: the turn ends without it.
                        assert await rt.interrupt(session.id)
                    if event.type == "response.cancelled":
                        break
            assert module is not None
            module.RELEASE.set()
            session = await rt.create_session(looping.id)
            async with rt.open_turn_stream(session.id, "go") as (_, events):
                async for event in events:
                    if event.type == "response.output_item.done":
                        assert await rt.interrupt(session.id)
                    if event.type == "response.cancelled":
                        break


async def test_a_clients_spec_names_only_what_the_operator_allowed(tools_module: str) -> None:
    client_spec = spec("calc", tools_module, ["add"], [{"call": "add", "args": {"a": 1}}])
    with trio.fail_after(20):
        async with open_server() as server:
            answer = await server.client.post("/v1/agents", json=client_spec)
            assert answer.status_code == 422, answer.text
            [detail] = answer.json()["error"]["details"]
            assert detail["loc"] == "tools.python[0]"
            assert "serve --tool-module" in detail["msg"]
            assert tools_module not in sys.modules  # nothing was imported
            sub = {"name": "outer", "sub_agents": [client_spec]}
            nested = await server.client.post("/v1/agents", json=sub)
            assert nested.json()["error"]["details"][0]["loc"] == "sub_agents[0].tools.python[0]"
            # The operator's own spec may name it.
            await server.runtime.create_agent(client_spec)
        async with open_server(runtime_options={"tool_modules": [tools_module]}) as server:
            session = await server.session(client_spec)
            async with server.runtime.open_turn_stream(session, "go") as (_, events):
                assert outputs(await collect_turn(events)) == ["3"]
            imported = spec("imp", "os.path", ["join"])  # os.path's join is posixpath's
            refused = await server.client.post("/v1/agents", json=imported)
            assert refused.status_code == 422


def test_the_module_beside_an_operators_spec_imports(tmp_path: Path) -> None:
    """``function: mypol:check`` and ``tools.python: [mytools:add]`` find the modules
    beside the spec, from another directory, with no PYTHONPATH (issue 31)."""
    folder = tmp_path / "agents"
    folder.mkdir()
    (folder / "mytools.py").write_text("def add(a: int, b: int) -> int:\n    return a + b\n")
    (folder / "mypol.py").write_text(
        textwrap.dedent(
            """
            def check(event):
                if event["type"] == "tool_call" and event["data"]["name"] == "add":
                    return {"result": "ALLOW"}
                return {"result": "UNSPECIFIED"}
            """
        )
    )
    path = folder / "calc.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "name": "calc",
                "executor": {
                    "config": {
                        "harness": "scripted",
                        "script": [
                            {"call": "add", "args": {"a": 1, "b": 2}},
                            {"say": "1 + 2 is 3."},
                        ],
                    }
                },
                "tools": {"python": ["mytools:add"]},
                "policies": [{"name": "mine", "type": "function", "function": "mypol:check"}],
            }
        )
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["OMNIGENT_HOME"] = str(tmp_path / "home")
    repo = Path(__file__).resolve().parent.parent
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from omnigent.cli import main; sys.exit(main())",
            "run",
            str(path),
            "what is 1 + 2?",
        ],
        cwd=elsewhere,
        env={**env, "PYTHONPATH": str(repo)},  # omnigent itself, not the spec's folder
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "1 + 2 is 3.\n"
    assert '→ add({"a": 1, "b": 2})\n← 3\n' in done.stderr


def test_the_allowlist_checks_module_names() -> None:
    with pytest.raises(omnigent.InvalidInput) as bad:
        ToolAllowlist(modules=["not a module"])
    assert bad.value.details[0].loc == "tool_modules"
