"""Every ``sh`` and ``python`` block of ``docs/`` runs (see ``tests/docs_runner.py``).

One test per page; ``test_every_page_with_blocks_is_run`` fails when a page gains its
first runnable block without a test here. Each test checks what its page promises (the
answer a comment names, the file a command writes) beside the exit status. The README
runs in ``tests/test_readme.py``. The commands of ``docs/benchmarks.md`` take minutes
each: they are checked to name a benchmark that exists and options it takes, not run.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from pathlib import Path

import httpx
import pytest

from .docs_runner import REPO, Page, Sandbox, blocks, pages_with_runnable_blocks

pytestmark = pytest.mark.timeout(300)

TESTED = {
    "benchmarks.md",
    "cli.md",
    "client.md",
    "console.md",
    "editors.md",
    "elicitations.md",
    "harnesses.md",
    "http.md",
    "library.md",
    "policies.md",
    "subagents.md",
    "terminals.md",
    "testing.md",
    "tools.md",
}


def test_every_page_with_blocks_is_run() -> None:
    assert pages_with_runnable_blocks() == TESTED


@pytest.fixture
def sandbox(tmp_path: Path) -> Sandbox:
    return Sandbox(tmp_path)


def test_cli(sandbox: Sandbox) -> None:
    ran = sandbox.shell(Page("cli.md"))
    assert ran.stdout.endswith("\nYou said: hello\n"), ran.stdout
    for script in (
        ".local/share/bash-completion/completions/omnigent",
        ".zfunc/_omnigent",
        ".config/fish/completions/omnigent.fish",
    ):
        assert (sandbox.home / script).stat().st_size > 1000, script


def test_testing(sandbox: Sandbox) -> None:
    page = Page(
        "testing.md",
        # Two model requests for `await fake.wait_requests(2)` to find (block 1).
        between={
            0: (
                "import httpx\n"
                "fake = FakeAnthropic()\n"
                "fake.reply_text('one'); fake.reply_text('two')\n"
                "async with httpx.AsyncClient(transport=fake.transport()) as http:\n"
                "    for _ in range(2):\n"
                "        await http.post('http://fake/v1/messages', json={'model': 'm', "
                "'max_tokens': 9, 'messages': [{'role': 'user', 'content': 'hi'}]})\n"
            ),
        },
    )
    sandbox.notebook(page)
    ran = sandbox.shell(page)
    assert ran.stdout.endswith("Hello from a scripted model.\n"), ran.stdout


def test_tools(sandbox: Sandbox) -> None:
    (sandbox.root / "README.md").write_text("line one\nline two\n")
    assert sandbox.notebook(Page("tools.md")).stdout == "line one\nline two\n"


def test_subagents(sandbox: Sandbox) -> None:
    notebook = sandbox.notebook(Page("subagents.md"))
    assert "counter apples completed" in notebook.stdout
    shell = sandbox.shell(Page("subagents.md"))
    children = json.loads(shell.stdout.strip().splitlines()[-1])["data"]
    assert sorted(child["title"] for child in children) == [
        "counter:apples",
        "counter:pears",
        "slow:report",
    ]


def test_console(sandbox: Sandbox) -> None:
    # The screenshots command runs this checkout's own browser tests.
    setup = f"ln -s {REPO / 'tests'} tests; cp {REPO / 'pyproject.toml'} .; mkdir -p docs/console"
    ran = sandbox.shell(Page("console.md", setup=setup))
    assert "\n<!doctype html>\n" in ran.stdout, ran.stdout
    shots = sorted(p.name for p in (sandbox.root / "docs" / "console").iterdir())
    assert "sessions-laptop.png" in shots and "approvals-phone.png" in shots


def test_policies(sandbox: Sandbox) -> None:
    [module] = [code for code in blocks("policies.md", "python") if "mypkg/policies.py" in code]
    package = sandbox.root / "mypkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "policies.py").write_text(module)
    sandbox.notebook(
        Page(
            "policies.md",
            between={
                3: (
                    "assert check({'type': 'tool_call', 'data': {'arguments': "
                    "{'command': 'rm -rf /'}}})['result'] == 'DENY'\n"
                    "assert ask_for_bash({'type': 'tool_call', 'data': {'name': 'Bash'}})"
                    "['result'] == 'ASK'"
                )
            },
        )
    )
    ran = sandbox.shell(Page("policies.md"))
    assert '"name":"careful"' in ran.stdout.replace(" ", ""), ran.stdout


def test_benchmarks(sandbox: Sandbox) -> None:
    """Each command names a benchmark that exists and compiles, with options it reads
    (running them takes minutes each)."""
    commands = [
        "python " + line.split("#", 1)[0].split("python ", 1)[1].strip()
        for code in blocks("benchmarks.md", "sh")
        for line in code.splitlines()
        if "python benchmarks/" in line
    ]
    assert len(commands) >= 18
    for command in commands:
        script = sandbox.root / shlex.split(command.split("python ", 1)[1])[0]
        source = script.read_text(encoding="utf-8")
        compile(source, str(script), "exec")
        for option in re.findall(r"(--[a-z][a-z-]+)", command):
            assert f'"{option}"' in source, f"{command}: {script.name} reads no {option}"


# A runtime and a session for the fragments of the library pages, and a person who
# answers what the session asks (`rt.elicit` waits for one).
RUNTIME_PRELUDE = """
import contextlib, json, httpx, omnigent
from omnigent.model import ElicitationParams
__stack__ = contextlib.AsyncExitStack()
rt = __rt__ = await __stack__.enter_async_context(omnigent.open_runtime())
__nursery__ = await __stack__.enter_async_context(trio.open_nursery())
text = '''
name: coder
executor: {type: omnigent, config: {harness: scripted, script: [{say: "done"}]}}
'''
__agent__ = await rt.create_agent(omnigent.AgentSpec.from_yaml(text))
session_id = owner_session_id = (await rt.create_session(__agent__.id)).id
child_session_id = (await rt.create_session(__agent__.id, parent_session_id=session_id)).id
elicitation_id = "elicit_0"
params = ElicitationParams(mode="form", message="Your name?", phase="tool_call")

async def __person__():
    async with rt.subscribe(session_id) as events:
        async for event in events:
            if event.type == "response.elicitation_request":
                await rt.resolve_elicitation(session_id, event.elicitation_id, "accept")

__nursery__.start_soon(__person__)

async def fetch(url: str) -> str:
    return "fetched " + url

class __Editor__:
    async def read(self, path: str) -> str:
        return "unsaved text"

editor = __Editor__()
"""
RUNTIME_POSTLUDE = "__nursery__.cancel_scope.cancel()\nawait __stack__.aclose()"


def test_library(sandbox: Sandbox) -> None:
    page = Page(
        "library.md",
        prelude=RUNTIME_PRELUDE,
        postlude=RUNTIME_POSTLUDE,
        between={0: "rt = __rt__  # block 0 opened (and closed) a runtime of its own"},
    )
    ran = sandbox.notebook(page)
    assert "done" in ran.stdout
    assert (sandbox.root / "agents.db").exists()


def test_elicitations(sandbox: Sandbox) -> None:
    prelude = (
        RUNTIME_PRELUDE.replace("__nursery__.start_soon(__person__)", "")
        + """
asker = await rt.create_agent({
    "name": "asker",
    "executor": {"config": {"harness": "scripted",
                            "script": [{"call": "sys_os_shell", "args": {"command": "ls"}}]}},
    "policies": [{"name": "ask_shell", "type": "ask_tools", "tools": ["sys_os_shell"],
                  "reason": "Approve shell"}],
})
session_id = (await rt.create_session(asker.id)).id
"""
    )
    ran = sandbox.notebook(Page("elicitations.md", prelude=prelude, postlude=RUNTIME_POSTLUDE))
    assert ran.stdout == "ask_shell: Approve shell\n"


def test_terminals(sandbox: Sandbox) -> None:
    launch = {
        "name": "term",
        "terminals": {"bash": {"command": "bash"}},
        "executor": {
            "config": {
                "harness": "scripted",
                "script": [
                    {"call": "sys_terminal_launch", "args": {"terminal": "bash", "session": "s1"}},
                    {
                        "call": "sys_terminal_send",
                        "args": {"terminal": "bash", "session": "s1", "text": "echo ok"},
                    },
                ],
            }
        },
    }
    prelude = f"""
import omnigent
import contextlib
__stack__ = contextlib.AsyncExitStack()
rt = await __stack__.enter_async_context(omnigent.open_runtime())
__agent__ = await rt.create_agent({launch!r})
session_id = (await rt.create_session(__agent__.id)).id
async with rt.open_turn_stream(session_id, "open it") as (_, __events__):
    async for _ in __events__:
        pass
"""
    ran = sandbox.notebook(
        Page("terminals.md", prelude=prelude, postlude="await __stack__.aclose()")
    )
    assert "ok" in ran.stdout
    with sandbox.server("--allow-command", "bash") as url:
        agent = httpx.post(f"{url}/v1/agents", json=launch, timeout=10).json()["id"]
        sid = httpx.post(f"{url}/v1/sessions", json={"agent_id": agent}, timeout=10).json()["id"]
        with httpx.stream(
            "POST",
            f"{url}/v1/sessions/{sid}/events?stream=true",
            json={"type": "message", "data": {"content": [{"type": "input_text", "text": "go"}]}},
            timeout=30,
        ) as turn:
            for _ in turn.iter_raw():
                pass
        page = Page("terminals.md", values={"conv_123": sid}, setup=f"H={url}")
        shell = sandbox.shell(page)
    assert '"id": "terminal_bash_s1"' in shell.stdout.replace('":"', '": "')


def test_harnesses(sandbox: Sandbox) -> None:
    prelude = (
        RUNTIME_PRELUDE
        + """
from omnigent.harnesses import HarnessEnv
from omnigent.processes import open_process_manager
import os, pathlib
__processes__ = await __stack__.enter_async_context(open_process_manager(pathlib.Path("home")))
__http__ = await __stack__.enter_async_context(httpx.AsyncClient())
__spec__ = omnigent.AgentSpec.from_yaml(text)

async def __cwd__():
    return pathlib.Path.cwd()

env = HarnessEnv(session_id, __spec__, __spec__.executor.config, __http__,
                 processes=__processes__, working_directory=__cwd__)
child_env = dict(os.environ)
"""
    )
    [scaffold] = [
        i for i, code in enumerate(blocks("harnesses.md", "python")) if "run(turn)" in code
    ]
    page = Page(
        "harnesses.md", prelude=prelude, postlude=RUNTIME_POSTLUDE, own=frozenset({scaffold})
    )
    ran = sandbox.notebook(page)
    assert ran.stdout == '{"type": "user"}\n'
    # The scaffold's example, as a harness process a spec names, in a real turn.
    (sandbox.root / "my_harness.py").write_text(blocks("harnesses.md", "python")[scaffold])
    (sandbox.root / "notes.txt").write_text("a note\n")
    (sandbox.root / "mine.yaml").write_text(
        "name: mine\nexecutor: {config: {harness: external, command: [python, my_harness.py]}}\n"
    )
    done = subprocess.run(
        ["omnigent", "run", "mine.yaml", "hi", "--yes"],
        cwd=sandbox.root,
        env=sandbox.env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "you said: hi\n…\n", done.stdout
    assert '← {"path": "notes.txt", "content": "a note\\n"' in done.stderr


def test_client_and_editors(sandbox: Sandbox) -> None:
    (sandbox.root / "agent.yaml").write_text(
        (REPO / "examples" / "hello-scripted.yaml").read_text()
    )
    # The pages' project directory, inside the server's workspace (its directory).
    project = sandbox.root / "project"
    project.mkdir()
    values = {"/home/me/project": str(project)}
    with sandbox.server():
        client = sandbox.notebook(Page("client.md", values=values))
        editors = sandbox.notebook(Page("editors.md", values=values))
    assert client.stdout.startswith("Hello! I am a scripted omnigent agent.")
    assert "end_turn Hello! I am a scripted omnigent agent." in client.stdout
    assert editors.stdout == "Hello! I am a scripted omnigent agent. Nice to meet you.\n"


def test_http(sandbox: Sandbox) -> None:
    agents = sandbox.root / "agents"
    agents.mkdir()
    (agents / "greeter.yaml").write_text(
        "name: greeter\nexecutor: {config: {harness: scripted, script: [{say: hello}]}}\n"
    )
    png = b"\\x89PNG\\r\\n\\x1a\\n" + b"\\0" * 64
    (sandbox.root / "diagram.png").write_bytes(png)
    session_of = (
        "SESSION=$(curl -s $H/v1/sessions -H 'Content-Type: application/json' "
        """-d '{"agent_name": "greeter"}' | python -c 'import json, sys; """
        """print(json.load(sys.stdin)["id"])')"""
    )
    page = Page(
        "http.md",
        # The fuzzer, bounded for CI: 3 examples an operation, 2 s a live stream.
        values={
            "conv_123": "$SESSION",
            "--max-examples 50": "--max-examples 3",
            "--request-timeout 5": "--request-timeout 2",
        },
        shell_between={0: session_of},
    )
    ran = sandbox.shell(page, timeout=280)
    out = ran.stdout
    assert '{"status": "ok"' in out.replace('":"', '": "') or '"status":"ok"' in out
    assert "event: response.completed" in out
    assert '"resolved":true' in out.replace(" ", "")
    assert (sandbox.root / "copy.png").read_bytes() == png
    assert "passed" in out or "passed" in ran.stderr  # schemathesis ran
    with sandbox.server() as url:
        sid = httpx.post(f"{url}/v1/sessions", json={"agent_name": "greeter"}, timeout=10)
        assert sid.status_code == 404  # the hidden server starts with no agents
        agent = httpx.post(
            f"{url}/v1/agents",
            content=(agents / "greeter.yaml").read_bytes(),
            headers={"Content-Type": "application/yaml"},
            timeout=10,
        ).json()["id"]
        session = httpx.post(f"{url}/v1/sessions", json={"agent_id": agent}, timeout=10).json()
        body = {"type": "message", "data": {"content": [{"type": "input_text", "text": "hi"}]}}
        with httpx.stream(
            "POST", f"{url}/v1/sessions/{session['id']}/events?stream=true", json=body, timeout=30
        ) as turn:
            for _ in turn.iter_raw():
                pass
        follow = sandbox.notebook(Page("http.md", values={"conv_123": session["id"]}))
    assert "response.output_text.delta hello" in follow.stdout.replace("  ", " ")
