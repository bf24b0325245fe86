"""``omnigent stdio`` in a subprocess, driven by the official ACP client.

The official client (``agent-client-protocol``) is asyncio-based: it runs in its own
process (``acp_official_driver.py``), once for the module, and reports what it saw;
each test checks one flow of that run. A few raw checks of the process itself follow.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import trio
import yaml

import omnigent

from .acp_schema import HERE as SCHEMAS
from .acp_schema import AcpSchema
from .external_helpers import wait_gone

DRIVER = Path(__file__).with_name("acp_official_driver.py")
ASK_SHELL = [{"name": "ask_shell", "type": "ask_tools", "tools": ["sys_os_shell"], "reason": "ok?"}]


def _spec(name: str, script: list[Any], **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "executor": {"type": "omnigent", "config": {"harness": "scripted", "script": script}},
        **extra,
    }


def write_specs(folder: Path) -> dict[str, str]:
    """The three agents the driver uses, as spec files in ``folder``."""
    specs = {
        "talker": _spec("talker", [{"say": "hello from omnigent"}]),
        "sleeper": _spec("sleeper", [{"say": "working on it"}, {"sleep": 30}]),
        "asker": _spec(
            "asker",
            [{"call": "sys_os_shell", "args": {"command": "echo approved"}}],
            policies=ASK_SHELL,
        ),
        "adder": _spec("adder", [{"call": "mcp__calc__add", "args": {"a": 40, "b": 2}}]),
    }
    paths = {}
    for name, spec in specs.items():
        path = folder / f"{name}.yaml"
        path.write_text(yaml.safe_dump(spec))
        paths[name] = str(path)
    return paths


def run_driver(kind: str, config: dict[str, Any]) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, str(DRIVER), kind, json.dumps(config)],
        capture_output=True,
        timeout=180,
        check=False,
        env={**os.environ, "OMNIGENT_HOME": config["home"]},
    )
    assert done.returncode == 0, done.stderr.decode()[-4000:]
    report: dict[str, Any] = json.loads(done.stdout)
    return report


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("acp-stdio")
    work = root / "project"
    work.mkdir()
    config = {
        "specs": write_specs(root),
        "db": f"sqlite:///{root / 'acp.db'}",
        "home": str(root / "home"),
        "cwd": str(work),
        "mcp": {
            "command": sys.executable,
            "args": [str(Path(__file__).parent / "harnesses" / "mcp_server.py")],
            "pid": str(root / "mcp.pid"),
            "pid_off": str(root / "mcp-off.pid"),
        },
    }
    return {**run_driver("stdio", config), "config": config}


def test_initialize_over_stdio(report: dict[str, Any]) -> None:
    answer = report["initialize"]
    assert answer["protocolVersion"] == 1
    assert answer["agentInfo"]["name"] == "omnigent"
    assert answer["agentCapabilities"]["loadSession"] is True
    assert answer["agentCapabilities"]["promptCapabilities"]["embeddedContext"] is True
    assert answer["agentCapabilities"]["sessionCapabilities"]["list"] == {}


def test_a_prompt_streams_and_a_two_mebibyte_line_is_read(report: dict[str, Any]) -> None:
    assert report["prompt"] == {"stopReason": "end_turn", "text": "hello from omnigent"}
    assert report["big"] == {"stopReason": "end_turn"}


def test_list_shows_the_session_of_that_directory(report: dict[str, Any]) -> None:
    assert report["list"] == [report["session"]]
    assert report["list_other_cwd"] == []


def test_load_in_a_second_process_replays_the_history(report: dict[str, Any]) -> None:
    load = report["load"]
    assert load["user"] == ["hello", "y" * 20]
    assert load["agent"] == "hello from omnigent" * 2
    assert load["after"] == "end_turn"


def test_cancel_is_answered_cancelled_within_the_bound(report: dict[str, Any]) -> None:
    cancel = report["cancel"]
    assert cancel["stopReason"] == "cancelled"
    # The contract says 100 ms; the margin is for a loaded CI machine.
    assert cancel["seconds"] < 0.5, cancel


def test_permissions_allow_reject_and_always(report: dict[str, Any]) -> None:
    permissions = report["permissions"]
    assert [o["tool"] for o in permissions["outcomes"]] == [
        "completed",  # allow_once
        "failed",  # reject_once: denied by the policy
        "completed",  # allow_always
        "completed",  # remembered: nobody asked
    ]
    assert all(o["stopReason"] == "end_turn" for o in permissions["outcomes"])
    assert len(permissions["asked"]) == 3
    asked = permissions["asked"][0]
    assert asked["title"] == "Run: echo approved"
    assert asked["options"] == ["allow_once", "allow_always", "reject_once", "reject_always"]


def test_cancel_withdraws_a_pending_permission_request(report: dict[str, Any]) -> None:
    cancel = report["cancel_while_asking"]
    assert cancel["stopReason"] == "cancelled"
    assert cancel["seconds"] < 0.5, cancel


def test_the_editors_stdio_mcp_server_serves_the_session(report: dict[str, Any]) -> None:
    mcp = report["mcp"]
    caps = report["mcp_capabilities"]
    assert (caps["http"], caps["sse"]) == (True, False)
    assert mcp["stopReason"] == "end_turn"
    assert mcp["meta"] is None  # nothing ignored
    done = [u for u in mcp["tool"] if u.get("status") == "completed"]
    assert done and '"42"' in json.dumps(done), mcp["tool"]


async def test_the_mcp_server_is_gone_once_the_editor_disconnected(
    report: dict[str, Any],
) -> None:
    pid = _read_pid(report["config"]["mcp"]["pid"])
    await wait_gone(pid, timeout=0.1)  # omnigent stopped it before it exited


def _read_pid(path: str) -> int:
    return int(Path(path).read_text())


def test_with_no_client_mcp_the_servers_are_ignored_and_named(report: dict[str, Any]) -> None:
    off = report["mcp_off"]
    assert off["meta"] == {"omnigent": {"ignoredMcpServers": ["Calc"]}}
    assert (off["capabilities"]["http"], off["capabilities"]["sse"]) == (False, False)
    assert off["stopReason"] == "end_turn"
    assert not Path(report["config"]["mcp"]["pid_off"]).exists()  # never started


# -- the process itself ---------------------------------------------------------------


def _stdio(*args: str, stdin: bytes = b"", home: Path) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "omnigent", "stdio", *args],
        input=stdin,
        capture_output=True,
        timeout=60,
        check=False,
        env={**os.environ, "OMNIGENT_HOME": str(home)},
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("name: BAD\nbogus: 1\n", "invalid AgentSpec"),
        ("name: [unclosed\n", "invalid YAML"),
        (None, "cannot read agent spec"),
    ],
)
def test_an_unusable_spec_exits_2_with_one_message_on_stderr(
    tmp_path: Path, text: str | None, message: str
) -> None:
    spec = tmp_path / "agent.yaml"
    if text is not None:
        spec.write_text(text)
    done = _stdio("--agent", str(spec), home=tmp_path)
    assert done.returncode == 2
    assert done.stdout == b""
    stderr = done.stderr.decode()
    assert stderr.startswith("Error: ") and stderr.count("Error:") == 1
    assert message in stderr and "Traceback" not in stderr


def test_stdout_carries_only_protocol_messages_and_logs_go_to_stderr(tmp_path: Path) -> None:
    spec = tmp_path / "agent.yaml"
    spec.write_text(yaml.safe_dump(_spec("talker", [{"say": "hi"}])))
    lines = [
        {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}},
        {"jsonrpc": "2.0", "id": 1, "method": "nope"},
    ]
    stdin = b"".join(json.dumps(m).encode() + b"\n" for m in lines) + b"not json\n"
    done = _stdio("--agent", str(spec), "--db", f"sqlite:///{tmp_path / 'o.db'}", home=tmp_path)
    assert done.returncode == 0  # no input at all: it just ends
    done = subprocess.run(
        [sys.executable, "-m", "omnigent", "-vv", "stdio", "--agent", str(spec)],
        input=stdin,
        capture_output=True,
        timeout=60,
        check=False,
        env={**os.environ, "OMNIGENT_HOME": str(tmp_path)},
    )
    assert done.returncode == 0, done.stderr
    for line in done.stdout.splitlines():
        assert json.loads(line)["jsonrpc"] == "2.0"
    assert b"DEBUG" in done.stderr or b"INFO" in done.stderr  # the logs went here


def test_the_spec_files_own_function_policies_are_allowed(tmp_path: Path) -> None:
    spec = _spec("guarded", [{"say": "hi"}])
    spec["policies"] = [{"name": "mine", "type": "function", "function": "json:dumps"}]
    path = tmp_path / "agent.yaml"
    path.write_text(yaml.safe_dump(spec))
    hello = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}}
    command = [sys.executable, "-c", _SLOW_CLIENT, str(path), json.dumps(hello)]
    done = subprocess.run(
        command,
        capture_output=True,
        timeout=60,
        check=False,
        env={**os.environ, "OMNIGENT_HOME": str(tmp_path)},
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["result"]["protocolVersion"] == 1
    broken = tmp_path / "broken.yaml"
    spec["policies"][0]["function"] = "no_such_module_anywhere:check"
    broken.write_text(yaml.safe_dump(spec))
    refused = _stdio("--agent", str(broken), home=tmp_path)
    assert refused.returncode == 2 and refused.stdout == b""
    assert refused.stderr.decode().startswith("Error: ")


# Sends one line to `omnigent stdio`, reads one answer, then closes stdin.
_SLOW_CLIENT = """
import subprocess, sys
agent = subprocess.Popen(
    [sys.executable, "-m", "omnigent", "stdio", "--agent", sys.argv[1]],
    stdin=subprocess.PIPE, stdout=subprocess.PIPE,
)
agent.stdin.write(sys.argv[2].encode() + b"\\n")
agent.stdin.flush()
sys.stdout.write(agent.stdout.readline().decode())
agent.stdin.close()
sys.exit(agent.wait(30))
"""


def test_the_protocol_keeps_fds_0_and_1_to_itself(tmp_path: Path) -> None:
    code = (
        "import os\n"
        "from omnigent.transports.acp import protocol_fds\n"
        "with protocol_fds() as (fd_in, fd_out):\n"
        "    os.write(1, b'stray\\n')\n"
        "    print('printed')\n"
        "    assert os.read(0, 10) == b''\n"
        "    os.write(fd_out, b'protocol\\n')\n"
        "    assert os.read(fd_in, 10) == b'input\\n'\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], input=b"input\n", capture_output=True, timeout=30, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == b"protocol\n"
    assert b"stray" in done.stderr and b"printed" in done.stderr


REPO = Path(__file__).resolve().parent.parent


def test_the_registry_manifest_runs_this_version_of_omnigent_stdio() -> None:
    folder = REPO / "examples" / "acp-registry" / "omnigent"
    manifest = json.loads((folder / "agent.json").read_text())
    # The registry's own schema (agentclientprotocol/registry, agent.schema.json).
    registry_schema = json.loads((SCHEMAS / "registry-agent.schema.json").read_text())
    jsonschema.Draft7Validator(registry_schema).validate(manifest)
    assert manifest["id"] == folder.name
    assert manifest["version"] == omnigent.__version__
    uvx = manifest["distribution"]["uvx"]
    assert uvx["package"] == f"omnigent=={omnigent.__version__}"
    assert uvx["args"] == ["stdio"]  # the project's .omnigent/agent.yaml, else the built-in
    assert (folder / "icon.svg").read_text().startswith("<svg")


def test_the_registry_check_finds_an_authentication_method(tmp_path: Path) -> None:
    """The registry lists only agents whose ``initialize`` offers an agent or terminal
    auth method: its CI runs the manifest's command in an empty sandbox and sends this."""
    args = json.loads((REPO / "examples/acp-registry/omnigent/agent.json").read_text())[
        "distribution"
    ]["uvx"]["args"]
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": 1,
            "clientInfo": {"name": "ACP Registry Validator", "version": "1.0.0"},
            "clientCapabilities": {
                "terminal": True,
                "fs": {"readTextFile": True, "writeTextFile": True},
                "_meta": {"terminal_output": True, "terminal-auth": True},
            },
        },
    }
    sandbox = tmp_path / "sandbox"
    sandbox.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "OMNIGENT_"))}
    done = subprocess.run(
        [sys.executable, "-m", "omnigent", *args],
        input=json.dumps(initialize).encode() + b"\n",
        capture_output=True,
        timeout=60,
        cwd=sandbox,
        env={**env, "HOME": str(tmp_path / "home"), "TERM": "dumb"},
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    answer = json.loads(done.stdout.splitlines()[0])
    schema = AcpSchema()
    schema.client_sent(initialize)
    schema.agent_sent(answer)
    methods = answer["result"]["authMethods"]
    assert methods and all(m.get("type", "agent") in ("agent", "terminal") for m in methods)


async def test_without_agent_it_serves_the_project_agent_else_the_built_in(
    tmp_path: Path,
) -> None:
    project = tmp_path / "project"
    (project / ".omnigent").mkdir(parents=True)
    spec = {"name": "mine", "executor": {"type": "omnigent", "config": {"harness": "scripted"}}}
    (project / ".omnigent" / "agent.yaml").write_text(yaml.safe_dump(spec))
    for cwd, name in ((project, "mine"), (tmp_path, "coder")):
        db = "sqlite:///" + str(cwd / "o.db")
        command = [sys.executable, "-m", "omnigent", "stdio", "--db", db]
        lines = [
            {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}},
            {"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": str(cwd)}},
        ]
        with trio.fail_after(60):
            done = await trio.run_process(
                command,
                stdin=b"".join(json.dumps(m).encode() + b"\n" for m in lines),
                capture_stdout=True,
                capture_stderr=True,
                cwd=cwd,
                env={**os.environ, "OMNIGENT_HOME": str(tmp_path / "home")},
            )
        answers = {m["id"]: m for m in map(json.loads, done.stdout.splitlines()) if "id" in m}
        sid = answers[1]["result"]["sessionId"]
        async with omnigent.open_runtime(db) as rt:
            assert (await rt.get_session(sid)).agent_name == name


def test_the_editor_example_is_a_valid_spec() -> None:
    spec = omnigent.AgentSpec.load(REPO / "examples" / "editor-agent.yaml")
    assert {p.name for p in spec.policies} == {"ask_shell", "ask_writes"}
