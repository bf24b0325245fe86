"""The web console's browser tests: a real ``omnigent serve`` and a real headless Chromium.

The server is a subprocess (``python -m omnigent serve --port 0``) with scripted agents
from a folder, on a SQLite file; the browser is Debian's ``chromium`` driven by
Playwright for Python (``executable_path``: ``playwright install`` cannot download
a browser here). One server and one browser per test module; each test opens a fresh
browser context (cheap) and its pages. Every page is watched: a request to anywhere but
the server's own address fails the test, and so does anything the page logs as an
error or throws. Every wait is bounded (Playwright's timeouts, pytest-timeout).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

CHROMIUM = os.environ.get("OMNIGENT_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
LAPTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}
WAIT_MS = 10_000


def scripted(name: str, script: list[Any] | None = None, **extra: Any) -> dict[str, Any]:
    config: dict[str, Any] = {"harness": "scripted"}
    if script is not None:
        config["script"] = script
    config.update(extra.pop("config", {}))
    return {"name": name, "executor": {"type": "omnigent", "config": config}, **extra}


def words(count: int, word: str = "word") -> str:
    return " ".join(f"{word}{n}" for n in range(count))


# The agents every console test server registers (serve --agents).
AGENTS: list[dict[str, Any]] = [
    scripted(
        "greeter",
        [{"say": "Hello from the greeter, streamed word by word."}],
        description="Answers every message with a greeting",
    ),
    scripted(
        "asker",
        [
            {"call": "sys_os_shell", "args": {"command": "echo tool-ran-$((6*7))"}},
            {"say": "The shell step is over."},
        ],
        description="Runs one shell command, with approval",
        policies=[
            {"name": "ask_shell", "type": "ask_tools", "tools": ["sys_os_shell"], "reason": "ok?"}
        ],
    ),
    scripted(
        "parent",
        config={
            "turns": [
                [
                    {
                        "call": "sys_session_send",
                        "args": {"agent": "kid", "title": "chore", "args": "go"},
                    },
                    {"say": "Dispatched the chore."},
                ],
                [{"say": "The chore came back."}],  # woken by the kid's result
            ]
        },
        description="Hands a chore to a sub-agent",
        sub_agents=[scripted("kid", [{"sleep": 1.5}, {"say": "Chore done."}])],
        tools={"agents": ["kid"]},
    ),
    scripted("sleeper", [{"sleep": 60}], description="Takes a minute"),
    scripted(
        "failer",
        [{"say": "About to fail."}, {"fail": "the scripted step failed on purpose"}],
        description="Fails every turn",
    ),
    # About 5,000 events in its first turn (109 answers of 45 word deltas, each with its
    # item), a short answer on every later one.
    scripted(
        "bulk",
        config={
            "turns": [
                [{"say": words(45, f"w{n}x")} for n in range(109)],
                [{"say": "Following the stream after five thousand events."}],
            ]
        },
        description="A long first turn",
    ),
]


def write_agents(folder: Path, extra: list[dict[str, Any]] | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for spec in [*AGENTS, *(extra or [])]:
        (folder / f"{spec['name']}.json").write_text(json.dumps(spec))
    return folder


@contextmanager
def running_server(
    tmp: Path, *args: str, extra_agents: list[dict[str, Any]] | None = None
) -> Iterator[str]:
    """``omnigent serve`` on 127.0.0.1 port 0 with :data:`AGENTS` (and ``extra_agents``);
    yields its URL. Its ``$OMNIGENT_HOME`` is ``tmp/home``."""
    agents = write_agents(tmp / "agents", extra_agents)
    env = {**os.environ, "OMNIGENT_HOME": str(tmp / "home")}
    command = [sys.executable, "-m", "omnigent", "serve", "--port", "0"]
    command += ["--db", f"sqlite:///{tmp / 'console.db'}", "--agents", str(agents), *args]
    with _announced(command, "omnigent serving on ", env) as url:
        yield url


@contextmanager
def running_mock_llm() -> Iterator[str]:
    """``omnigent mock-llm --port 0`` (echoes the last user message, reports usage);
    yields its base URL (``…/v1``)."""
    command = [sys.executable, "-m", "omnigent", "mock-llm", "--port", "0"]
    with _announced(command, "omnigent mock-llm serving on ") as url:
        yield url


@contextmanager
def _announced(
    command: list[str], announcement: str, env: dict[str, str] | None = None
) -> Iterator[str]:
    """Run ``command`` until the block ends (SIGINT, then SIGKILL after 15 s); yields
    the address its first line gives after ``announcement`` (printed once it listens)."""
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.startswith(announcement), line
        yield line[len(announcement) :].strip()
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=15)
        finally:
            if process.returncode is None:
                process.kill()
                process.wait()
            if process.stdout is not None:
                process.stdout.close()


def have_browser() -> bool:
    return shutil.which(CHROMIUM) is not None or Path(CHROMIUM).exists()


@contextmanager
def running_browser() -> Iterator[Any]:
    """Headless Chromium (one per test module), with a fresh user-data-dir."""
    if not have_browser():
        if os.environ.get("CI") or os.environ.get("OMNIGENT_REQUIRE_BROWSER"):
            pytest.fail(f"{CHROMIUM} is missing (.ci/run installs Debian's chromium)")
        pytest.skip(f"{CHROMIUM} is not installed")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        # launch_persistent_context would tie the profile to one context; a plain
        # launch gets a fresh temporary profile, and each context is a clean one.
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


class Watched:
    """A browser context whose pages may reach only ``base`` and must log no error."""

    def __init__(self, browser: Any, base: str, **options: Any) -> None:
        self.base = base
        self.context = browser.new_context(base_url=base, **options)
        self.context.set_default_timeout(WAIT_MS)
        self.problems: list[str] = []
        self.context.route("**/*", self._route)

    def _route(self, route: Any) -> None:
        url = route.request.url
        if url.startswith(self.base + "/") or url == self.base:
            route.continue_()
        else:
            self.problems.append(f"request left the server: {url}")
            route.abort()

    def page(self, path: str = "/") -> Any:
        page = self.context.new_page()
        page.on("console", self._console)
        page.on("pageerror", lambda error: self.problems.append(f"page error: {error}"))
        page.goto(path)
        return page

    def _console(self, message: Any) -> None:
        if message.type in ("error", "assert"):
            self.problems.append(f"console {message.type}: {message.text}")

    def close(self) -> None:
        self.context.close()
        assert not self.problems, self.problems


@contextmanager
def watched(browser: Any, base: str, **options: Any) -> Iterator[Watched]:
    context = Watched(browser, base, **options)
    try:
        yield context
    finally:
        context.close()


def api(base: str, method: str, path: str, **options: Any) -> Any:
    """A call on the server's API (as a program: no Origin)."""
    answer = httpx.request(method, f"{base}/v1{path}", timeout=10, **options)
    assert answer.status_code < 300, answer.text
    return answer.json()
