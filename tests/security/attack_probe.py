"""The attack probe behind the table in ``docs/security.md``: each attack tried against a
real ``omnigent serve`` on loopback, as a hostile client and a harsh operator would.

    python -m tests.security.attack_probe            # from the repository root

Every attempt is counted *held* when the server refused it the documented way and
nothing it protects changed; the script prints one Markdown row per attack (attempts,
held, notes) and exits 1 if any attempt was not held. It is not part of the suite
(it takes a few minutes and hundreds of MiB); the regression tests beside it pin each
defect it once found.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import stat
import sys
import time
import traceback
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import attrs
import httpx
import trio
import trio_websocket

import omnigent
from omnigent.client import RpcError, open_acp_websocket
from omnigent.outbound import GuardedTransport, UrlAllowList
from omnigent.tools import sys_os_read, sys_os_write

from ..external_helpers import alive
from .serve_helpers import ALICE, BOB, IDENTITY, Served, open_serve, run_cli, scripted
from .test_containment import Swapper
from .test_outbound import fixed_server, reply

EVIL = "http://evil.example"
SECRET = "probe-secret-4242"
MIB = 1 << 20


@attrs.define
class Row:
    attack: str
    tried: int = 0
    held: int = 0
    notes: list[str] = attrs.field(factory=list)
    failures: list[str] = attrs.field(factory=list)

    def check(self, ok: bool, what: str) -> None:
        self.tried += 1
        if ok:
            self.held += 1
        else:
            self.failures.append(what)


def message(text: str) -> dict[str, Any]:
    return {"type": "message", "data": {"content": [{"type": "input_text", "text": text}]}}


async def run_turn(served: Served, client: httpx.AsyncClient, session: str, text: str) -> str:
    async with client.stream(
        "POST", f"/v1/sessions/{session}/events?stream=true", json=message(text)
    ) as stream:
        return (await stream.aread()).decode()


# -- the fence: cross-site requests and DNS rebinding -----------------------------------


async def cross_site(tmp: Path) -> Row:
    row = Row(
        "CSRF (foreign Origin, scheme, null, Sec-Fetch-Site, simple bodies) and DNS rebinding"
    )
    async with open_serve(tmp) as served:
        agent = await served.agent(scripted("a"))
        sid = await served.session(agent_id=agent)
        s = f"/v1/sessions/{sid}"
        routes = [
            ("POST", "/v1/agents"),
            ("POST", "/v1/sessions"),
            ("PATCH", s),
            ("DELETE", s),
            ("POST", f"{s}/events"),
            ("PUT", f"{s}/permissions"),
            ("DELETE", f"{s}/permissions/bob"),
            ("POST", f"{s}/elicitations/elicit_x/resolve"),
            ("POST", f"{s}/hooks/permission-request"),
            ("POST", f"{s}/hooks/codex-elicitation-request"),
            ("POST", f"{s}/policies/evaluate"),
            ("POST", "/v1/files"),
            ("POST", f"/approve/{sid}/elicit_x"),
        ]
        variants = [
            {"Origin": EVIL},
            {"Origin": served.url.replace("http://", "https://")},
            {"Origin": "null"},
            {"Sec-Fetch-Site": "cross-site"},
            {"Sec-Fetch-Site": "same-site"},
            {"Content-Type": "text/plain"},
            {"Content-Type": "application/x-www-form-urlencoded", "Origin": EVIL},
        ]
        for method, path in routes:
            for headers in variants:
                # No browser header: a browser sends a simple body without asking, but
                # only to a route that reads one; a DELETE without Origin is a program.
                browser = "Origin" in headers or "Sec-Fetch-Site" in headers
                if not browser and method == "DELETE":
                    continue
                body = json.dumps(scripted("evil")) if "text" in str(headers) else "{}"
                h = {"Content-Type": "application/json", **headers}
                answer = await served.client.request(method, path, content=body, headers=h)
                ok = answer.status_code in (403, 415) or (
                    path.startswith("/approve") and answer.status_code == 415
                )
                row.check(ok, f"{method} {path} {headers} -> {answer.status_code}")
        for host in ("attacker.example", f"attacker.example:{served.port}", "127.0.0.1.nip.io"):
            for method, path in [("GET", "/health"), ("GET", "/v1/agents"), *routes[:6]]:
                answer = await served.client.request(method, path, headers={"Host": host})
                row.check(answer.status_code == 421, f"Host {host} {method} {path}")
        upgrade = {
            "Connection": "Upgrade",
            "Upgrade": "websocket",
            "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
            "Sec-WebSocket-Version": "13",
        }
        for extra, want in (
            ({"Origin": EVIL}, 403),
            ({"Origin": served.url.replace("http://", "https://")}, 403),
            ({"Sec-Fetch-Site": "cross-site"}, 403),
            ({"Host": "attacker.example"}, 421),
        ):
            async with httpx.AsyncClient(timeout=10) as one:
                answer = await one.get(f"{served.url}/v1/ws", headers={**upgrade, **extra})
            row.check(answer.status_code == want, f"ws {extra} -> {answer.status_code}")
        agents = (await served.client.get("/v1/agents")).json()["data"]
        row.check([a["name"] for a in agents] == ["a"], f"agents changed: {agents}")
        row.check((await served.client.get(s)).status_code == 200, "the session was deleted")
    return row


# -- bounded parsing --------------------------------------------------------------------


def deep(levels: int) -> Any:
    value: Any = 1
    for _ in range(levels):
        value = {"a": value}
    return value


async def deep_json(tmp: Path) -> Row:
    row = Row("Deep JSON and YAML (65 to 100,000 levels, every body)")
    async with open_serve(tmp) as served:
        agent = await served.agent(scripted("a", [{"say": "alive"}]))
        sid = await served.session(agent_id=agent)
        s = f"/v1/sessions/{sid}"
        for levels in (65, 100, 500, 5_000, 100_000):
            d = deep(levels)
            content = [{"type": "input_text", "text": "x"}]
            bodies = [
                ("POST", "/v1/agents", {**scripted("d"), "metadata": d}),
                ("POST", "/v1/sessions", {"agent_id": agent, "labels": d}),
                ("PATCH", s, {"labels": d}),
                ("POST", f"{s}/events", {"type": "message", "data": {"content": d}}),
                (
                    "POST",
                    f"{s}/events",
                    {"type": "mcp_elicitation", "data": {"message": "m", "requestedSchema": d}},
                ),
                ("POST", f"{s}/elicitations/elicit_x/resolve", {"action": "accept", "content": d}),
                ("POST", f"{s}/hooks/permission-request", {"tool_name": "x", "tool_input": d}),
                (
                    "POST",
                    f"{s}/policies/evaluate",
                    {
                        "event": {
                            "type": "PHASE_TOOL_CALL",
                            "data": {"tool_name": "x", "tool_input": d},
                        }
                    },
                ),
                ("PUT", f"{s}/permissions", {"user_id": d, "level": 1}),
                (
                    "POST",
                    "/v1/sessions",
                    {
                        "agent_id": agent,
                        "initial_items": [
                            {
                                "type": "message",
                                "data": {"role": "user", "content": content, "x": d},
                            }
                        ],
                    },
                ),
            ]
            for method, url, body in bodies:
                try:
                    raw = json.dumps(body)
                except RecursionError:
                    raw = '{"metadata": ' + '{"a": ' * levels + "1" + "}" * levels + "}"
                answer = await served.client.request(
                    method, url, content=raw, headers={"Content-Type": "application/json"}
                )
                row.check(answer.status_code == 422, f"{levels} {url} -> {answer.status_code}")
            text = "name: d\nmetadata: " + "[" * levels + "1" + "]" * levels + "\n"
            answer = await served.client.post(
                "/v1/agents", content=text, headers={"Content-Type": "application/yaml"}
            )
            row.check(answer.status_code in (413, 422), f"yaml {levels} -> {answer.status_code}")
        row.check("alive" in await run_turn(served, served.client, sid, "hi"), "the session died")
    return row


async def keep_alive(tmp: Path) -> Row:
    row = Row("Keep-alive after an early answer (404, 413, 415 on a large body)")
    from .test_bounded_parsing import HEALTH, _exchange, _post

    async with open_serve(tmp) as served:
        big = b"x" * (2 * MIB)
        for request in (
            _post("/v1/nowhere", big),
            _post("/v1/agents", big),
            _post("/v1/agents", big, "text/plain"),
            _post("/v1/sessions/conv_x/events", big, "text/plain"),
        ):
            for _ in range(3):
                stream = await trio.open_tcp_stream("127.0.0.1", served.port)
                async with stream:
                    async with trio.open_nursery() as nursery:
                        nursery.start_soon(stream.send_all, request)
                        first = b""
                        while b"\r\n\r\n" not in first:
                            first += await stream.receive_some(65536)
                    head, _, rest = first.partition(b"\r\n\r\n")
                    length = int(
                        next(
                            line.split(b":", 1)[1]
                            for line in head.split(b"\r\n")
                            if line.lower().startswith(b"content-length")
                        )
                    )
                    while len(rest) < length:
                        rest += await stream.receive_some(65536)
                    try:
                        again = await _exchange(stream, HEALTH)
                        row.check(b" 200 " in again.split(b"\r\n", 1)[0], "health")
                    except AssertionError:
                        row.check(b"connection: close" in head.lower(), "closed without saying")
    return row


# -- round three: the ten defects and the minor ones --------------------------------------


async def workspace_fence(tmp: Path) -> Row:
    row = Row(
        "Workspace fence: ACP cwd over /v1/ws (new, load, resume, fork), links, $OMNIGENT_HOME"
    )
    root = tmp / "projects"
    (root / "p").mkdir(parents=True)
    (root / "up").symlink_to("/")
    (root / "etc").symlink_to("/etc")
    options = ("--auth", "header", "--workspace-root", str(root))
    async with open_serve(tmp, *options) as served:
        async with served.as_user(ALICE) as alice:
            await served.agent(scripted("default"), alice)
        cwds = [
            "/",
            "/etc",
            "/root",
            "/tmp",
            str(served.home),
            str(served.home / "workspaces"),
            str(tmp),
            str(root / "up"),
            str(root / "up" / "etc"),
            str(root / "etc"),
            str(root / ".." / ".."),
            str(root / "p" / ".." / ".."),
            "/proc/self/cwd",
            "/proc/1/root",
        ]
        async with open_acp_websocket(served.url, headers={IDENTITY: ALICE}) as client:
            made = await client.call("session/new", {"cwd": str(root / "p"), "mcpServers": []})
            for cwd in cwds:
                for method, params in (
                    ("session/new", {"cwd": cwd, "mcpServers": []}),
                    *(
                        (method, {"sessionId": made["sessionId"], "cwd": cwd, "mcpServers": []})
                        for method in ("session/load", "session/resume", "session/fork")
                    ),
                ):
                    try:
                        await client.call(method, params)
                        row.check(False, f"{method} {cwd} accepted")
                    except RpcError as exc:
                        row.check(exc.code == -32602, f"{method} {cwd}: {exc.code}")
        async with served.as_user(ALICE) as alice:
            listed = (await alice.get("/v1/sessions")).json()["data"]
        row.check(len(listed) == 1, f"{len(listed)} sessions made")
    return row


async def ssrf(tmp: Path) -> Row:
    row = Row("SSRF through client specs (base_url, mcp_servers[].url), the guard, error bodies")
    targets = [
        "http://169.254.169.254/latest/meta-data",
        "http://[fd00:ec2::254]/",
        "http://127.0.0.1:22/",
        "http://localhost:6767/v1",
        "http://[::1]:80/",
        "http://0.0.0.0/",
        "http://10.0.0.1/",
        "http://2130706433/",
        "http://0x7f000001/",
        "http://127.1/",
        "http://[::ffff:127.0.0.1]/",
        "http://metadata.google.internal/",
        "http://user@127.0.0.1/",
    ]
    async with fixed_server(lambda _: reply("500 Internal", f"<html>{SECRET}</html>".encode())) as (
        port,
        _hits,
    ):
        internal = f"http://127.0.0.1:{port}/v1"
        async with open_serve(tmp, "--allow-model-url", internal) as served:
            for url in targets:
                model = {
                    "name": "m",
                    "executor": {
                        "type": "omnigent",
                        "config": {"harness": "loop", "model": "x", "base_url": url},
                    },
                }
                mcp = scripted("c", mcp_servers=[{"name": "m", "url": url, "headers": {"X": "y"}}])
                for spec in (model, mcp):
                    answer = await served.client.post("/v1/agents", json=spec)
                    row.check(answer.status_code == 422, f"{url} -> {answer.status_code}")
            spec = {
                "name": "leak",
                "executor": {
                    "type": "omnigent",
                    "config": {
                        "harness": "loop",
                        "model": "x",
                        "base_url": internal,
                        "api_key": "k",
                    },
                },
            }
            agent = await served.agent(spec)
            sid = await served.session(agent_id=agent)
            text = await run_turn(served, served.client, sid, "hi")
            row.check("response.failed" in text and SECRET not in text, "the error body came back")
    # The guard itself: rebinding and redirects (through the transport the server uses).
    async with fixed_server(lambda _: reply("200 OK", SECRET.encode())) as (inner, hits):
        async with fixed_server(
            lambda _: reply("302 Found", headers=f"Location: http://127.0.0.1:{inner}/x\r\n")
        ) as (outer, _):
            for resolved in (
                ["127.0.0.1"],
                ["10.1.2.3"],
                ["169.254.169.254"],
                ["::1"],
                ["0.0.0.0"],
            ):

                async def rebound(host: str, port: int, found: list[str] = resolved) -> list[str]:
                    return found

                transport = GuardedTransport(
                    UrlAllowList([f"http://models.example:{inner}/"]), resolve=rebound
                )
                async with httpx.AsyncClient(transport=transport) as http:
                    try:
                        await http.get(f"http://models.example:{inner}/v1")
                        row.check(False, f"rebound to {resolved}")
                    except httpx.ConnectError:
                        row.check(True, "")
            allow = UrlAllowList([f"http://127.0.0.1:{outer}/"])
            async with httpx.AsyncClient(
                transport=GuardedTransport(allow), follow_redirects=True
            ) as http:
                try:
                    await http.get(f"http://127.0.0.1:{outer}/go")
                    row.check(False, "redirect followed")
                except httpx.ConnectError:
                    row.check(True, "")
        row.check(not hits, "the internal server was reached")
    return row


async def secrets(tmp: Path) -> Row:
    row = Row("Secrets in specs: another user's download (bundle), spec, list; logs (repr)")
    from .test_secrets import SECRETS, _download, alice_spec

    options = (
        "--auth",
        "header",
        "--allow-mcp-url",
        "http://127.0.0.1:9/",
        "--allow-command",
        "sh",
        "--allow-env",
        "DEPLOY",
    )
    spec = {**alice_spec(), "metadata": {"github_token": SECRET, "nested": {"password": SECRET}}}
    async with (
        open_serve(tmp, *options) as served,
        served.as_user(ALICE) as alice,
        served.as_user(BOB) as bob,
    ):
        agent = await served.agent(spec, alice)
        written = await _download(served, bob, agent, "dl")
        for secret in (*SECRETS, SECRET):
            row.check(secret not in written, f"download: {secret}")
        for path in ("/v1/agents", f"/v1/agents/{agent}", f"/v1/agents/{agent}/spec"):
            answer = await bob.get(path)
            for secret in (*SECRETS, SECRET):
                row.check(answer.status_code == 200 and secret not in answer.text, path)
    shown = repr(omnigent.AgentSpec.from_dict(spec))
    for secret in (*SECRETS, SECRET):
        row.check(secret not in shown, f"repr: {secret}")
    return row


ESCAPES = {
    "setsid": "setsid sleep 300 &",
    "setsid -f": "setsid -f sleep 300",
    "nohup in a subshell": "(nohup sleep 300 >/dev/null 2>&1 &)",
    "GNU timeout": "timeout 600 sleep 300 &",
    "double fork": "( ( sleep 300 & ) & )",
    "disown": "sleep 300 & disown",
    "python daemon": (
        "python3 -c 'import os,time\nif os.fork()==0:\n os.setsid()\n if os.fork()==0: "
        "time.sleep(300)' &"
    ),
    "ignores SIGTERM": "setsid sh -c 'trap \"\" TERM; sleep 300' &",
}


def probe_pids(marker: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        with contextlib.suppress(OSError):
            environ = Path(f"/proc/{entry}/environ").read_bytes()
            if f"PROBE_MARK={marker}".encode() in environ and alive(int(entry)):
                found.append(int(entry))
    return found


async def process_escape(tmp: Path, mode: str) -> Row:
    row = Row(f"Processes escaping the shell tool ({mode}): tool return, stop, shutdown, kill -9")
    os.environ["OMNIGENT_PROCESS_TREES"] = mode
    try:
        for moment in ("return", "stop", "shutdown", "kill -9"):
            marker = f"{mode}-{moment}-{time.monotonic_ns()}"
            body = "; ".join(ESCAPES.values())
            tail = "" if moment == "return" else "; sleep 300"
            command = f"export PROBE_MARK={marker}; {body}{tail}"
            call = {"tool": "sys_os_shell", "args": {"command": command, "timeout": 600}}
            steps = (
                [{"call": "sys_call_async", "args": call}]
                if moment != "return"
                else [{"call": "sys_os_shell", "args": {"command": command}}]
            )
            spec = scripted("esc", steps, async_enabled=True)
            (tmp / moment.replace(" ", "")).mkdir()
            async with open_serve(tmp / moment.replace(" ", "")) as served:
                agent = await served.agent(spec)
                sid = await served.session(agent_id=agent)
                await served.client.post(f"/v1/sessions/{sid}/events", json=message("go"))
                with trio.move_on_after(20):
                    while len(probe_pids(marker)) < len(ESCAPES) and moment != "return":
                        await trio.sleep(0.05)
                if moment == "stop":
                    await served.client.post(
                        f"/v1/sessions/{sid}/events", json={"type": "stop_session", "data": {}}
                    )
                if moment == "kill -9":
                    served.process.send_signal(signal.SIGKILL)
                    await served.process.wait()
            if moment == "kill -9":
                (tmp / "restart").mkdir()
                async with open_serve(tmp / "restart"):
                    pass
            with trio.move_on_after(10):
                while probe_pids(marker):
                    await trio.sleep(0.05)
            left = probe_pids(marker)
            for name in ESCAPES:
                row.check(not left, f"{moment}: {name} ({left})")
            for pid in left:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
    finally:
        del os.environ["OMNIGENT_PROCESS_TREES"]
    return row


def rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) // 1024
    return 0


async def memory(tmp: Path) -> Row:
    row = Row("Memory per byte: 20 MiB messages, and RSS over 60 large messages")
    async with open_serve(tmp) as served:
        agent = await served.agent(scripted("a", [{"say": "ok"}]))
        sid = await served.session(agent_id=agent)
        big = "x" * (20 * MIB)
        answer = await served.client.post(
            f"/v1/sessions/{sid}/events", json=message(big), timeout=60
        )
        row.check(answer.status_code == 413, f"events {answer.status_code}")
        initial = [
            {
                "type": "message",
                "data": {"role": "user", "content": [{"type": "input_text", "text": big}]},
            }
        ]
        answer = await served.client.post(
            "/v1/sessions", json={"agent_id": agent, "initial_items": initial}, timeout=60
        )
        row.check(answer.status_code == 413, f"initial_items {answer.status_code}")
        pid = served.process.pid
        before = rss(pid)
        text = "y" * (7 * MIB)
        for index in range(60):
            session = sid if index % 2 else await served.session(agent_id=agent)
            await run_turn(served, served.client, session, text)
        await trio.sleep(2)
        after = rss(pid)
        row.notes.append(f"RSS {before} → {after} MiB after 60 × 7 MiB messages")
        # The history cache holds up to 128 MiB; 60 messages once kept ~1,500.
        row.check(after - before < 350, f"RSS grew {after - before} MiB")
    return row


async def private_files(tmp: Path) -> Row:
    row = Row("Private files: $OMNIGENT_HOME, omnigent.db (+wal), workspaces, tool output")
    old = os.umask(0o022)
    try:
        spec = scripted("w", [{"call": "sys_os_write", "args": {"path": "f.txt", "content": "x"}}])
        async with open_serve(tmp, make_home=False) as served:
            agent = await served.agent(spec)
            sid = await served.session(agent_id=agent)
            await run_turn(served, served.client, sid, "go")
            ws = served.home / "workspaces" / sid / "workspace"
            for path, want in (
                (served.home, 0o700),
                (served.home / "omnigent.db", 0o600),
                (served.home / "omnigent.db-wal", 0o600),
                (served.home / "omnigent.db.lock", 0o600),
                (served.home / "workspaces", 0o700),
                (ws, 0o700),
                (ws / "f.txt", 0o600),
            ):
                mode = stat.S_IMODE(path.stat().st_mode)
                row.check(mode & 0o077 == 0, f"{path.name} {mode:o} (want {want:o})")
    finally:
        os.umask(old)
    return row


async def yaml_values(tmp: Path) -> Row:
    row = Row("YAML a JSON store cannot hold (HTTP 422, serve --agents exit 2)")
    head = "name: y\nexecutor: {type: omnigent, config: {harness: scripted}}\n"
    values = [
        "2024-05-01",
        "2024-05-01T10:00:00Z",
        "!!timestamp 2001-12-14",
        "!!binary aGk=",
        "!!set {a, b}",
        "!!omap [{a: 1}]",
        "!!pairs [{a: 1}]",
        ".nan",
        ".inf",
        "-.inf",
        "9" * 5000,
        "{1: x}",
        "{2024-01-01: x}",
        "{[1, 2]: x}",
        "!!python/object:os.system x",
    ]
    async with open_serve(tmp) as served:
        for value in values:
            answer = await served.client.post(
                "/v1/agents",
                content=head + f"metadata: {{v: {value}}}\n",
                headers={"Content-Type": "application/yaml"},
            )
            row.check(answer.status_code == 422, f"{value[:20]} -> {answer.status_code}")
        row.check((await served.client.get("/health")).status_code == 200, "health")
    for value in values[:4]:
        folder = tmp / f"agents-{len(row.failures)}-{abs(hash(value))}"
        folder.mkdir()
        (folder / "y.yaml").write_text(head + f"metadata: {{v: {value}}}\n")
        done = await run_cli(
            "serve", "--port", "0", "--db", f"sqlite:///{folder / 'o.db'}", "--agents", str(folder)
        )
        err = done.stderr.decode()
        row.check(
            done.returncode == 2 and err.startswith("Error:") and "Traceback" not in err, err[:200]
        )
    return row


async def sub_agent_policies(tmp: Path) -> Row:
    row = Row("Function policies inside sub_agents (any depth)")
    async with open_serve(tmp) as served:
        for ref in (
            "sys:exit",
            "os:system",
            "subprocess:getoutput",
            "unittest.__main__:main",
            "builtins:eval",
        ):
            for depth in (1, 2, 3):
                spec: dict[str, Any] = {
                    **scripted("leaf"),
                    "policies": [{"name": "p", "type": "function", "function": ref}],
                }
                for level in range(depth):
                    spec = {**scripted(f"s{level}"), "sub_agents": [spec]}
                answer = await served.client.post("/v1/agents", json=spec)
                row.check(answer.status_code == 422, f"{ref} at {depth} -> {answer.status_code}")
        row.check((await served.client.get("/health")).status_code == 200, "alive")
    return row


async def minor(tmp: Path) -> Row:
    row = Row("Minor: client env names, WebSocket message size and connection cap, purge")
    async with open_serve(tmp, "--allow-command", "tool") as served:
        for name in (
            "LD_PRELOAD",
            "LD_LIBRARY_PATH",
            "NODE_OPTIONS",
            "PYTHONPATH",
            "BASH_ENV",
            "PATH",
        ):
            for spec in (
                scripted("e", mcp_servers=[{"name": "m", "command": ["tool"], "env": {name: "x"}}]),
                scripted("e", terminals={"t": {"command": "tool", "env": {name: "x"}}}),
            ):
                answer = await served.client.post("/v1/agents", json=spec)
                row.check(answer.status_code == 422, f"{name} -> {answer.status_code}")
        await served.agent(scripted("default"))
        url = served.url.replace("http://", "ws://") + "/v1/ws"
        async with trio_websocket.open_websocket_url(url) as ws:
            await ws.send_message("x" * (16 * MIB + 1))
            try:
                await ws.get_message()
                row.check(False, "a 16 MiB + 1 message was read")
            except trio_websocket.ConnectionClosed as exc:
                row.check(exc.reason.code == 1009, f"closed {exc.reason}")
        from .test_websocket_bounds import _upgrade

        async with contextlib.AsyncExitStack() as stack:
            for _ in range(32):
                await stack.enter_async_context(trio_websocket.open_websocket_url(url))
            status, _ = await _upgrade(served.port)
            row.check(status == 503, f"33rd socket {status}")
    (tmp / "purge").mkdir()
    write = [{"call": "sys_os_write", "args": {"path": "f.txt", "content": "x"}}]
    async with open_serve(tmp / "purge", "--purge-workspaces") as served:
        agent = await served.agent(scripted("w", write))
        sid = await served.session(agent_id=agent)
        await run_turn(served, served.client, sid, "go")
        folder = served.home / "workspaces" / sid
        made = (folder / "workspace" / "f.txt").exists()
        await served.client.delete(f"/v1/sessions/{sid}")
        row.check(made and not folder.exists(), f"purge: made {made}, left {folder.exists()}")
    return row


async def symlink_swaps(tmp: Path) -> Row:
    row = Row("Symlink swaps under the file tools (renameat2 exchange)")
    work, outside = tmp / "work", tmp / "outside"
    (work / "d").mkdir(parents=True)
    outside.mkdir()
    (work / "d" / "f.txt").write_text("inside\n")
    (outside / "f.txt").write_text("SECRET\n")
    (work / "swap").symlink_to(outside, target_is_directory=True)
    with Swapper(work) as swapper:
        for _ in range(900):
            read = await sys_os_read(work, {"path": "d/f.txt"})
            row.check("SECRET" not in read, "read escaped")
            await sys_os_write(work, {"path": "d/f.txt", "content": "inside\n"})
            row.check((outside / "f.txt").read_text() == "SECRET\n", "write escaped")
    row.notes.append(f"{swapper.swaps} swaps")
    return row


MALFORMED: list[str | bytes] = [
    "",
    "{",
    "[]",
    "[1, 2]",
    "null",
    "42",
    '"x"',
    "NaN",
    '{"jsonrpc": "2.0", "id": 1, "method": "x", "params": NaN}',
    '{"jsonrpc": "1.0", "id": 1, "method": "initialize"}',
    '{"jsonrpc": "2.0", "id": {}, "method": "initialize"}',
    '{"jsonrpc": "2.0", "id": 1.5e400, "method": "initialize"}',
    '{"jsonrpc": "2.0", "id": 1, "method": 7}',
    '{"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": []}',
    '{"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": 7}}',
    '{"jsonrpc": "2.0", "id": 1, "method": "session/prompt", '
    '"params": {"sessionId": "conv_x", "prompt": [{"type": "audio"}]}}',
    '{"jsonrpc": "2.0", "id": 1, "method": "nope"}',
    '{"jsonrpc": "2.0", "method": "nope"}',
    '{"jsonrpc": "2.0", "id": 1, "method": "session/load", '
    '"params": {"sessionId": "../../x", "cwd": "/", "mcpServers": []}}',
    '{"jsonrpc": "2.0", "id": 1, "method": "x", "params": ' + "[" * 200 + "]" * 200 + "}",
    '"\\ud800"',
    b"\xff\xfe\x00",
    '{"jsonrpc": "2.0", "id": 1, "method": "$/cancel_request", "params": {"requestId": []}}',
    '{"jsonrpc": "2.0", "id": 1, "result": {}}',
    '{"jsonrpc": "2.0", "id": 99, "error": {"code": 1, "message": "x"}}',
]


async def malformed_acp(tmp: Path) -> Row:
    row = Row("Malformed ACP over /v1/ws (each answered, the socket stays up)")
    async with open_serve(tmp) as served:
        await served.agent(scripted("default"))
        url = served.url.replace("http://", "ws://") + "/v1/ws"
        async with trio_websocket.open_websocket_url(url) as ws:
            init = json.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": 0,
                    "method": "initialize",
                    "params": {"protocolVersion": 1},
                }
            )
            await ws.send_message(init)
            await ws.get_message()
            for frame in MALFORMED:
                await ws.send_message(frame)
            ping = json.dumps(
                {"jsonrpc": "2.0", "id": "ping", "method": "session/list", "params": {}}
            )
            await ws.send_message(ping)
            answers = []
            with trio.move_on_after(20):
                while True:
                    answer = json.loads(await ws.get_message())
                    answers.append(answer)
                    if answer.get("id") == "ping":
                        break
            row.check(answers and answers[-1].get("id") == "ping", "the socket stopped answering")
            errors = [a for a in answers if "error" in a]
            for _ in range(len(MALFORMED) - 4):  # responses and notifications get none
                row.check(bool(errors and errors.pop()), "an unanswered frame")
    return row


async def sharing(tmp: Path) -> Row:
    row = Row("Sharing fence over HTTP, WebSocket and lists (bob on alice's session)")
    async with open_serve(tmp, "--auth", "header") as served:
        async with served.as_user(ALICE) as alice, served.as_user(BOB) as bob:
            agent = await served.agent(scripted("default", [{"say": "hi"}]), alice)
            sid = await served.session(alice, agent_id=agent)
            s = f"/v1/sessions/{sid}"
            for method, path, body in (
                ("GET", s, None),
                ("GET", f"{s}/items", None),
                ("GET", f"{s}/child_sessions", None),
                ("GET", f"{s}/permissions", None),
                ("GET", f"{s}/resources", None),
                ("GET", f"{s}/elicitations/elicit_x", None),
                ("PATCH", s, {"title": "x"}),
                ("DELETE", s, None),
                ("POST", f"{s}/events", message("x")),
                ("PUT", f"{s}/permissions", {"user_id": BOB, "level": 3}),
                ("POST", f"{s}/elicitations/elicit_x/resolve", {"action": "accept"}),
                (
                    "POST",
                    f"{s}/policies/evaluate",
                    {"event": {"type": "PHASE_TOOL_CALL", "data": {"name": "x"}}},
                ),
                ("POST", "/v1/sessions", {"agent_id": agent, "parent_session_id": sid}),
            ):
                answer = await bob.request(method, path, json=body)
                row.check(answer.status_code == 404, f"{method} {path} -> {answer.status_code}")
            listed = (await bob.get("/v1/sessions")).json()["data"]
            row.check(not listed, "listed")
            answer = await bob.get(f"/v1/sessions?after={sid}")
            row.check(answer.status_code == 422, "after cursor")
        async with open_acp_websocket(served.url, headers={IDENTITY: BOB}) as client:
            for method, params in (
                ("session/load", {"sessionId": sid, "cwd": "/tmp", "mcpServers": []}),
                ("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "x"}]}),
                ("_omnigent/session/info", {"sessionId": sid}),
            ):
                try:
                    await client.call(method, params)
                    row.check(False, f"{method} answered")
                except RpcError as exc:
                    row.check(exc.code in (-32002, -32602), f"{method} {exc.code}")
    return row


# -- doors added this round: runners, forks, metrics -------------------------------------

RUNNER_TOKEN = "probe-runner-token-0123456789abcdef"
UPGRADE = {
    "Connection": "Upgrade",
    "Upgrade": "websocket",
    "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
    "Sec-WebSocket-Version": "13",
}
RUNNER_CWDS = [
    "/",
    "/etc",
    "..",
    "../..",
    "a/../../..",
    "/proc/self/root/etc",
    "out",
    "out/etc",
]


async def upgrade(url: str, headers: dict[str, str]) -> httpx.Response:
    """A WebSocket upgrade request on a connection of its own (refused ones close it)."""
    async with httpx.AsyncClient(timeout=10) as one:
        return await one.get(url, headers=headers)


def _items_outputs(items: list[dict[str, Any]]) -> list[str]:
    return [i["output"] for i in items if i["type"] == "function_call_output"]


async def runner_door(tmp: Path) -> Row:
    row = Row("Runner door (token, fence) and a runner's os_env.cwd outside its workspace")
    from ..runners.rig import open_runners

    path = "/v1/runners/connect?name=probe"
    agents = tmp / "agents"
    agents.mkdir()
    read = [
        {"call": "sys_os_read", "args": {"path": "passwd"}},
        {"call": "sys_os_read", "args": {"path": "secret.txt"}},
        {"call": "sys_os_write", "args": {"path": "probe-escaped.txt", "content": "x"}},
    ]
    for index, cwd in enumerate(RUNNER_CWDS):  # the operator's own specs may name any cwd
        spec = {**scripted(f"cwd{index}", read), "os_env": {"cwd": cwd}}
        (agents / f"cwd{index}.yaml").write_text(json.dumps(spec))
    async with open_serve(tmp, "--runner-token", RUNNER_TOKEN, "--agents", str(agents)) as served:
        for authorization in (
            None,
            "Bearer",
            "Bearer wrong",
            f"Bearer {RUNNER_TOKEN}x",
            f"Bearer {RUNNER_TOKEN[:-1]}",
            f"Basic {RUNNER_TOKEN}",
            RUNNER_TOKEN,
            f"Bearer {RUNNER_TOKEN.upper()}",
        ):
            headers = dict(UPGRADE)
            if authorization is not None:
                headers["Authorization"] = authorization
            answer = await upgrade(served.url + path, headers)
            row.check(answer.status_code == 401, f"{authorization!r} -> {answer.status_code}")
        good = {**UPGRADE, "Authorization": f"Bearer {RUNNER_TOKEN}"}
        for extra, want in (({"Origin": EVIL}, 403), ({"Host": "attacker.example"}, 421)):
            answer = await upgrade(served.url + path, {**good, **extra})
            row.check(answer.status_code == want, f"runner {extra} -> {answer.status_code}")
        # A runner's workspace, with a link out and a secret beside it.
        place = tmp / "runner"
        (place / "workspace").mkdir(parents=True)
        (place / "workspace" / "out").symlink_to("/")
        (place / "secret.txt").write_text(SECRET)
        (tmp / "secret.txt").write_text(SECRET)
        listed = (await served.client.get("/v1/agents")).json()["data"]
        ids = {a["name"]: a["id"] for a in listed}
        # A client's spec may name a relative cwd: the link is the runner's to refuse.
        ids["client-out"] = await served.agent(
            {**scripted("client-out", read), "os_env": {"cwd": "out"}}
        )
        async with open_runners() as runners:
            await runners.start(place, served.url, "probe", token=RUNNER_TOKEN)
            for name, agent in sorted(ids.items()):
                sid = await served.session(agent_id=agent, runner_id="probe")
                await run_turn(served, served.client, sid, "go")
                items = (await served.client.get(f"/v1/sessions/{sid}/items")).json()["data"]
                outputs = _items_outputs(items)
                row.check(len(outputs) == 3, f"{name}: {len(outputs)} outputs")
                for output in outputs:
                    leaked = "root:" in output or SECRET in output
                    row.check(output.startswith("Error") and not leaked, f"{name}: {output[:80]}")
            await runners.kill_all()
        escaped = [
            p for p in (Path("/probe-escaped.txt"), Path("/etc/probe-escaped.txt")) if p.exists()
        ]
        escaped += await trio.to_thread.run_sync(lambda: list(tmp.rglob("probe-escaped.txt")))
        row.check(not escaped, f"written outside: {escaped}")
        for stray in escaped:
            stray.unlink()
    (tmp / "no-runners").mkdir()
    async with open_serve(tmp / "no-runners") as served:
        answer = await upgrade(served.url + path, good)
        row.check(answer.status_code == 401, f"no --runner-token -> {answer.status_code}")
    row.notes.append(f"{len(ids)} specs bound to a real runner")
    return row


async def forks(tmp: Path) -> Row:
    row = Row("Forks (POST /v1/sessions/{id}/fork, ACP session/fork): sharing rights")
    from .test_forks import _boss, _turn

    async with (
        open_serve(tmp, "--auth", "header") as served,
        served.as_user(ALICE) as alice,
        served.as_user(BOB) as bob,
    ):
        parent = await served.session(alice, agent_id=await served.agent(_boss(), alice))
        await _turn(alice, parent)
        kid = ""
        with trio.move_on_after(30):
            while not kid:
                children = (await alice.get(f"/v1/sessions/{parent}/child_sessions")).json()
                ready = [c for c in children["data"] if c["status"] == "idle"]
                if ready and _items_outputs(
                    (await alice.get(f"/v1/sessions/{ready[0]['id']}/items")).json()["data"]
                ):
                    kid = ready[0]["id"]
                else:
                    await trio.sleep(0.05)
        items = (await alice.get(f"/v1/sessions/{parent}/items")).json()["data"]
        for source in (parent, kid, "conv_missing"):
            for body in ({}, {"up_to_item_id": items[0]["id"]}, {"title": "mine"}):
                answer = await bob.post(f"/v1/sessions/{source}/fork", json=body)
                row.check(answer.status_code == 404, f"ungranted fork {body} {answer.status_code}")
        async with open_acp_websocket(served.url, headers={IDENTITY: BOB}) as client:
            for source in (parent, kid):
                try:
                    await client.call(
                        "session/fork", {"sessionId": source, "cwd": "/tmp", "mcpServers": []}
                    )
                    row.check(False, "ACP fork without a grant answered")
                except RpcError as exc:
                    row.check(exc.code in (-32002, -32602), f"ACP fork {exc.code}")
        await alice.put(f"/v1/sessions/{parent}/permissions", json={"user_id": BOB, "level": 1})
        workspace = served.home / "workspaces" / parent / "workspace"
        (workspace / "secret.txt").write_text(SECRET)
        answer = await bob.post(f"/v1/sessions/{kid}/fork", json={"up_to_item_id": items[0]["id"]})
        row.check(answer.status_code == 422, f"another session's item {answer.status_code}")
        for source in (parent, kid):
            answer = await bob.post(f"/v1/sessions/{source}/fork", json={})
            row.check(answer.status_code == 201, f"read fork {answer.status_code}")
            fork = answer.json()["id"]
            row.check(answer.json()["parent_session_id"] is None, "the fork sits in the tree")
            outputs = await _turn(bob, fork)
            row.check(SECRET not in outputs[-1], "the fork read the owner's workspace")
            row.check((await alice.get(f"/v1/sessions/{fork}")).status_code == 404, "alice sees")
            for method, path, body in (
                ("PATCH", f"/v1/sessions/{source}", {"title": "x"}),
                ("DELETE", f"/v1/sessions/{source}", None),
                ("POST", f"/v1/sessions/{source}/events", message("x")),
                ("PUT", f"/v1/sessions/{source}/permissions", {"user_id": BOB, "level": 3}),
            ):
                answer = await bob.request(method, path, json=body)
                row.check(answer.status_code == 403, f"{method} {path} {answer.status_code}")
    return row


async def metrics(tmp: Path) -> Row:
    row = Row("/metrics behind the identity check and the fence")
    async with open_serve(tmp, "--auth", "header") as served:
        for headers, want in (
            ({}, 401),
            ({IDENTITY: ""}, 401),
            ({"Host": "attacker.example"}, 421),
            ({"Host": "attacker.example", IDENTITY: ALICE}, 421),
            ({IDENTITY: ALICE}, 200),
        ):
            answer = await served.client.get("/metrics", headers=headers)
            row.check(answer.status_code == want, f"{headers} -> {answer.status_code}")
        for method in ("POST", "PUT", "DELETE"):
            answer = await served.client.request(method, "/metrics", headers={IDENTITY: ALICE})
            row.check(answer.status_code in (404, 405), f"{method} {answer.status_code}")
    return row


ATTACKS: list[Callable[[Path], Awaitable[Row]]] = [
    cross_site,
    deep_json,
    keep_alive,
    sharing,
    malformed_acp,
    symlink_swaps,
    workspace_fence,
    ssrf,
    secrets,
    lambda tmp: process_escape(tmp, "cgroup"),
    lambda tmp: process_escape(tmp, "subreaper"),
    memory,
    private_files,
    yaml_values,
    sub_agent_policies,
    minor,
    runner_door,
    forks,
    metrics,
]


async def main(base: Path) -> int:
    # Commands run without a home of their own (run_cli) must not use the machine's.
    os.environ["OMNIGENT_HOME"] = str(base / "default-home")
    rows = []
    for index, attack in enumerate(ATTACKS):
        tmp = base / f"a{index}"
        tmp.mkdir(parents=True)
        started = time.monotonic()
        try:
            with trio.fail_after(600):
                row = await attack(tmp)
        except Exception as exc:  # an attack that crashes is not held: say how
            traceback.print_exc()
            row = Row(f"attack {index} ({getattr(attack, '__qualname__', '?')})")
            row.check(False, f"crashed: {type(exc).__name__}: {exc}")
        row.notes.append(f"{time.monotonic() - started:.0f} s")
        rows.append(row)
        print(f"| {row.attack} | {row.tried} | {row.held} | {'; '.join(row.notes)} |", flush=True)
        for failure in row.failures[:5]:
            print(f"    NOT HELD: {failure}", file=sys.stderr, flush=True)
    return 0 if all(r.tried == r.held for r in rows) else 1


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory(prefix="omnigent-probe-") as folder:
        print("| attack | tried | held | notes |\n|---|---|---|---|", flush=True)
        sys.exit(trio.run(main, Path(folder)))
