"""Direct runs of the native agents, the baseline of ``native_turns.py``.

Each function drives one CLI (or the Agents SDK) the way a program would without
omnigent — the same protocol the harness speaks, the same fake model server, no
runtime in between — and times two short text turns from the moment the process is
asked for: the first (spawn, start-up, the answer) and a later one (same process).
Each time is measured twice: to the first streamed text, and to the turn's end.

The drivers of the tests are reused (``tests/claude_driver.py``,
``tests/codex_driver.py``); pi gets its provider from a ``models.json`` in a private
agent directory (no omnigent extension), and the Agents SDK runs in a child Python
of its own, reporting ``time.monotonic()`` (one clock for every process here).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import trio

from tests.claude_driver import claude_env, open_claude_session
from tests.codex_driver import open_codex_app_server
from tests.native_helpers import JsonLines, claude_binary, codex_binary, open_process, pi_binary

__all__ = ["direct_agents", "direct_claude", "direct_codex", "direct_pi", "timings"]

Timings = dict[str, float]


def timings(start: float, first: float, end: float, prefix: str) -> Timings:
    return {f"{prefix} to first text": first - start, f"{prefix} turn": end - start}


class _FirstText:
    """Remembers when the first streamed text of a turn was seen."""

    def __init__(self) -> None:
        self.at: float | None = None

    def seen(self) -> None:
        if self.at is None:
            self.at = time.monotonic()


async def direct_claude(url: str, root: Path, model: str) -> Timings:
    binary = claude_binary()
    assert binary is not None, "pip install 'omnigent[claude]'"
    work = root / "work"
    work.mkdir(parents=True, exist_ok=True)
    out: Timings = {}
    start = time.monotonic()
    args = ("--include-partial-messages", "--model", model)
    async with open_claude_session(
        binary, *args, cwd=work, env=claude_env(url, root), stderr_to=root / "stderr"
    ) as claude:
        await claude.initialize()
        for prefix in ("first", "later"):
            first = _FirstText()

            async def watch(message: dict[str, Any], first: _FirstText = first) -> None:
                event = message.get("event") if message["type"] == "stream_event" else None
                if isinstance(event, dict) and event.get("type") == "content_block_delta":
                    first.seen()

            await claude.turn("hi", watch=watch)
            end = time.monotonic()
            assert first.at is not None
            out.update(timings(start, first.at, end, prefix))
            start = time.monotonic()
    return out


async def direct_codex(url: str, root: Path, model: str) -> Timings:
    binary = codex_binary()
    assert binary is not None, "pip install 'omnigent[codex]'"
    work = root / "work"
    work.mkdir(parents=True, exist_ok=True)
    out: Timings = {}
    start = time.monotonic()
    async with open_codex_app_server(
        binary, base_url=url, home=root / "home", cwd=work, stderr_to=root / "stderr"
    ) as codex:
        thread = await codex.start_thread(work, model=model)
        for prefix in ("first", "later"):
            first = _FirstText()

            async def watch(message: dict[str, Any], first: _FirstText = first) -> None:
                if message.get("method") == "item/agentMessage/delta":
                    first.seen()

            await codex.turn(thread, "hi", watch=watch)
            end = time.monotonic()
            assert first.at is not None
            out.update(timings(start, first.at, end, prefix))
            start = time.monotonic()
    return out


async def direct_pi(url: str, root: Path, model: str) -> Timings:
    binary = pi_binary()
    assert binary is not None, "npm install -g @mariozechner/pi-coding-agent"
    agent_dir, work = root / "agent", root / "work"
    agent_dir.mkdir(parents=True, exist_ok=True)
    work.mkdir(parents=True, exist_ok=True)
    provider = {
        "baseUrl": url,
        "api": "openai-completions",
        "apiKey": "BENCH_KEY",
        "models": [{"id": model}],
    }
    (agent_dir / "models.json").write_text(json.dumps({"providers": {"bench": provider}}))
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(root),
        "PI_CODING_AGENT_DIR": str(agent_dir),
        "PI_OFFLINE": "1",
        "BENCH_KEY": "sk-bench",
    }
    command = [str(binary), "--mode", "rpc", "--no-extensions", "--no-skills"]
    command += ["--no-prompt-templates", "--no-themes", "--provider", "bench", "--model", model]
    command += ["--session-dir", str(root / "sessions")]
    out: Timings = {}
    start = time.monotonic()
    async with open_process(command, cwd=work, env=env, stderr_to=root / "stderr") as pi:
        assert pi.stdin is not None and pi.stdout is not None
        lines = JsonLines(pi.stdout)
        for prefix in ("first", "later"):
            await pi.stdin.send_all(b'{"type": "prompt", "message": "hi"}\n')
            first: float | None = None
            while True:
                message = await lines.receive()
                update = message.get("assistantMessageEvent")
                text = isinstance(update, dict) and update.get("type") == "text_delta"
                if first is None and text:
                    first = time.monotonic()
                if message.get("type") == "agent_end":
                    break
            end = time.monotonic()
            assert first is not None
            out.update(timings(start, first, end, prefix))
            start = time.monotonic()
    return out


_SDK_RUN = """
import asyncio, json, sys, time
from agents import AsyncOpenAI, OpenAIProvider, RunConfig, Runner, set_tracing_disabled
from tests.harnesses.sdk_agents import assistant
set_tracing_disabled(True)

async def main(url, model):
    client = AsyncOpenAI(base_url=url, api_key="sk-bench")
    provider = OpenAIProvider(openai_client=client, use_responses=False)
    config = RunConfig(model=model, model_provider=provider, tracing_disabled=True)
    history = []
    for prefix in ("first", "later"):
        if prefix == "later":
            print(json.dumps({"start": time.monotonic()}), flush=True)
        first = None
        result = Runner.run_streamed(assistant, history + [{"role": "user", "content": "hi"}],
                                     run_config=config)
        async for event in result.stream_events():
            data = getattr(event, "data", None)
            if first is None and getattr(data, "type", "") == "response.output_text.delta":
                first = time.monotonic()
        history = result.to_input_list()
        print(json.dumps({"first": first, "end": time.monotonic()}), flush=True)

asyncio.run(main(sys.argv[1], sys.argv[2]))
"""


async def direct_agents(url: str, root: Path, model: str) -> Timings:
    await trio.Path(root).mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path), OPENAI_AGENTS_DISABLE_TRACING="1")
    start = time.monotonic()
    done = await trio.run_process(
        [sys.executable, "-c", _SDK_RUN, url, model],
        capture_stdout=True,
        stderr=subprocess.DEVNULL,
        env=env,
        cwd=root,
    )
    reports = [json.loads(line) for line in done.stdout.splitlines()]
    first, later_start, later = reports
    out = timings(start, first["first"], first["end"], "first")
    out.update(timings(later_start["start"], later["first"], later["end"], "later"))
    return out
