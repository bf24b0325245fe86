"""The fuzzing rig: a real ``omnigent serve``, a person who declines every request for
approval, and the checks every answer must pass (no internal detail, the envelope)."""

from __future__ import annotations

import builtins
import json
import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import attrs
import httpx
import trio

FUZZ_AGENT = "fuzz-target-3c9e"
"""The agent the fuzzed sessions run: a name the fuzzer will not make up and overwrite."""

SPEC = {
    "name": FUZZ_AGENT,
    "executor": {"type": "omnigent", "config": {"harness": "scripted", "script": [{"say": "hi"}]}},
    # `policies/evaluate` on Bash asks a person: the decliner answers.
    "policies": [{"name": "ask_bash", "type": "ask_tools", "tools": ["Bash"]}],
}


@attrs.frozen
class Served:
    """A running server and the resources the fuzzer's requests are pointed at."""

    url: str
    home: Path
    agent_ids: tuple[str, ...]
    session_ids: tuple[str, ...]
    file_ids: tuple[str, ...]


@contextmanager
def serve(root: Path) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """``omnigent serve`` on loopback port 0 with the fuzz agent; stopped with SIGINT.

    The server finds no programs (``PATH`` is an empty folder), and its model endpoint
    is a closed port: whatever spec the fuzzer registers, nothing it names can run.
    """
    agents, home, empty = root / "agents", root / "home", root / "bin"
    for folder in (agents, home, empty):
        folder.mkdir()
    (agents / "fuzz.json").write_text(json.dumps(SPEC))
    env = {
        "PATH": str(empty),
        "HOME": str(home),
        "OMNIGENT_HOME": str(home),
        "OPENAI_BASE_URL": "http://127.0.0.1:9/v1",
        "OPENAI_API_KEY": "fuzz",
        "PYTHONPATH": os.pathsep.join(sys.path),
    }
    command = [sys.executable, "-m", "omnigent", "serve", "--port", "0"]
    command += ["--db", f"sqlite:///{root / 'fuzz.db'}", "--agents", str(agents)]
    with (root / "server.log").open("wb") as log:
        server = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=log, env=env, cwd=home)
    try:
        assert server.stdout is not None
        line = server.stdout.readline().decode()
        assert line.startswith("omnigent serving on http://"), line
        yield line.split(" on ", 1)[1].strip(), server
    finally:
        server.send_signal(signal.SIGINT)
        try:
            server.wait(timeout=20)
        finally:
            if server.returncode is None:
                server.kill()
                server.wait()
            if server.stdout is not None:
                server.stdout.close()


def prepare(url: str, home: Path, sessions: int = 3) -> Served:
    """Sessions of the fuzz agent (one with a child) and an uploaded file."""
    with httpx.Client(base_url=url, timeout=10) as client:
        agent = client.get("/v1/agents").json()["data"][0]["id"]
        made = [
            client.post("/v1/sessions", json={"agent_id": agent, "title": f"s{i}"}).json()["id"]
            for i in range(sessions)
        ]
        child = {"agent_id": agent, "parent_session_id": made[0]}
        made.append(client.post("/v1/sessions", json=child).json()["id"])
        png = b"\x89PNG\r\n\x1a\n" + b"x" * 32
        upload = client.post("/v1/files", files={"file": ("f.png", png, "image/png")})
        return Served(url, home, (agent,), tuple(made), (upload.json()["id"],))


class Decliner:
    """A person watching the sessions who declines every elicitation at once.

    Hooks and policy evaluations hold their request until someone answers; without
    this, a valid fuzzed request would wait out the request timeout. Runs its own Trio
    loop in a thread (the fuzzer is synchronous): one task per session streams its
    events and resolves each ``response.elicitation_request`` under the session that
    owns it. Leaving the context cancels the loop and joins the thread.
    """

    def __init__(self, url: str, session_ids: Sequence[str]) -> None:
        self._url = url
        self._session_ids = tuple(session_ids)
        self._ready = threading.Event()
        self._token: trio.lowlevel.TrioToken | None = None
        self._scope: trio.CancelScope | None = None
        self._thread = threading.Thread(target=trio.run, args=(self._main,), daemon=True)
        self._failure: BaseException | None = None
        self.declined = 0

    def __enter__(self) -> Decliner:
        self._thread.start()
        assert self._ready.wait(timeout=20), "the decliner did not start"
        if self._failure is not None:
            raise self._failure
        return self

    def __exit__(self, *exc: object) -> None:
        if self._token is not None and self._scope is not None:
            with suppress(trio.RunFinishedError):
                trio.from_thread.run_sync(self._scope.cancel, trio_token=self._token)
        self._thread.join(timeout=20)
        assert not self._thread.is_alive(), "the decliner did not stop"

    async def _main(self) -> None:
        try:
            with trio.CancelScope() as scope:
                self._scope, self._token = scope, trio.lowlevel.current_trio_token()
                async with (
                    httpx.AsyncClient(base_url=self._url, timeout=None) as client,
                    trio.open_nursery() as nursery,
                ):
                    for session_id in self._session_ids:
                        await nursery.start(self._watch, client, session_id)
                    self._ready.set()
        except BaseException as exc:  # reported to the test thread, then re-raised
            self._failure = exc
            raise
        finally:
            self._ready.set()

    async def _watch(
        self,
        client: httpx.AsyncClient,
        session_id: str,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        async with client.stream("GET", f"/v1/sessions/{session_id}/stream") as stream:
            assert stream.status_code == 200
            task_status.started()
            buffer = b""
            async for chunk in stream.aiter_raw():
                buffer += chunk
                *frames, buffer = buffer.split(b"\n\n")
                for frame in frames:
                    await self._answer(client, session_id, frame.decode())

    async def _answer(self, client: httpx.AsyncClient, session_id: str, frame: str) -> None:
        if "event: response.elicitation_request\n" not in frame:
            return
        data = json.loads(frame.split("data: ", 1)[1])
        owner = data["params"].get("target_session_id") or session_id
        if owner != session_id:
            return  # its owner's watcher answers it
        url = f"/v1/sessions/{owner}/elicitations/{data['elicitation_id']}/resolve"
        answer = await client.post(url, json={"action": "decline"})
        assert answer.status_code == 202, answer.text
        self.declined += 1


# -- what no answer may contain ----------------------------------------------------------

_EXCEPTIONS = sorted(
    name
    for name, value in vars(builtins).items()
    if isinstance(value, type) and issubclass(value, BaseException) and len(name) > 5
)
_LEAKS = [
    re.compile(r"Traceback \(most recent call last\)"),
    re.compile(r'File "[^"]+", line \d+'),
    re.compile(r"[\w./-]+\.py\b"),
    re.compile(r"site-packages|/usr/lib/python|/work/|/root/|/tmp/|/home/"),
    re.compile(r"\b(?:{})\b".format("|".join(_EXCEPTIONS))),
    re.compile(r"\b(?:cattrs|attrs|quart|werkzeug|hypercorn|sqlite3|psycopg)\.\w+"),
    re.compile(r"\b\w+(?:Error|Exception)(?:Group)?\b"),
]


def leaks(body: str, sent: str) -> list[str]:
    """Internal detail in an answer: a traceback, a file path, an exception class name.

    What the request itself carried is not a leak (a 422 names the bad value it got).
    """
    found = []
    for pattern in _LEAKS:
        for match in pattern.finditer(body):
            if match.group(0) not in sent:
                found.append(match.group(0))
    return found


def sent_text(case: Any) -> str:
    """Everything the request carried, as text (for :func:`leaks`)."""
    parts: list[Any] = [case.path_parameters, case.query, case.headers, case.body]
    return json.dumps(parts, default=repr, ensure_ascii=False) + repr(parts)
