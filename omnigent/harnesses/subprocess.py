"""External harnesses: agent loops in child processes, spoken to over a Unix socket.

An external harness is any program started as ``command + ["--socket", PATH,
"--conversation-id", ID]`` that serves HTTP on that socket (``API.md``, "External
harness protocol"; ``docs/harnesses.md``). :class:`ExternalHarness` is the runtime's
side:

* **One process per conversation**, spawned by the runtime's
  :class:`~omnigent.harnesses._processes.ProcessManager` on the session's first turn
  (the session shows ``launching`` meanwhile), health-checked (``GET /health``,
  bounded by ``options.startup_timeout``, default 30 s) and reused for later turns —
  also by the next harness instance after the session went idle. A process that died
  (or was reaped) is spawned again on the next message.
* **The spawn environment** is the non-secret basics (``PATH``, ``HOME``, locale),
  what the spec names in ``executor.config.env``, ``OMNIGENT_HARNESS_AUTH_TOKEN`` (a
  fresh bearer token per spawn, sent on every request) and the session's effective
  model as ``HARNESS_<NAME>_MODEL``; its working directory is the session's.
* **A turn** POSTs ``message`` with the whole history and relays the SSE answer as
  session events: text deltas (coalesced), items, ``function_call`` items with
  ``status: action_required`` run through the core's tool path (policies included)
  with the output posted back as ``tool_result``; the harness's elicitations and
  policy evaluations go through the core too and are answered with ``approval`` /
  ``policy_verdict``. Messages that arrive mid-turn are forwarded as injections.
* **Interrupt**: cancelling the turn posts ``interrupt`` (shielded, bounded) and ends
  the turn ``cancelled``. **A crash** mid-turn — the process exits, or the stream ends
  without ``response.completed`` / ``response.failed`` — ends the turn ``failed`` with
  the exit status and stderr tail; it never hangs.

Register an external harness under a name with :func:`external_harness` (for the
``omnigent.harnesses`` entry-point group) or name it in a spec with ``harness:
external`` and ``command``.
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AsyncExitStack, suppress
from typing import Any

import attrs
import httpx
import trio

from ..errors import HarnessError
from ..model import FunctionCallItem, FunctionCallOutputItem, Item, MessageItem, structure
from ._processes import (
    ManagedProcess,
    ProcessManager,
    ProcessSpec,
    base_environment,
    open_process_manager,
)
from ._protocol import (
    DELTA,
    FrameReader,
    elicitation_params,
    error_message,
    injection_body,
    turn_body,
)
from .base import Harness, HarnessEnv, HarnessFactory, MessageWriter, TurnContext, TurnRequest

__all__ = [
    "TOKEN_ENV",
    "ExternalHarness",
    "ManagedProcess",
    "ProcessManager",
    "ProcessSpec",
    "external_harness",
    "model_variable",
    "open_process_manager",
]

TOKEN_ENV = "OMNIGENT_HARNESS_AUTH_TOKEN"
DEFAULT_STARTUP_TIMEOUT = 30.0
# How long a best-effort message to a harness (interrupt) may take when cancelled.
_CONTROL_TIMEOUT = 2.0
# How long a broken stream waits to learn whether the process died.
_EXIT_WAIT = 1.0
_TERMINAL = ("response.completed", "response.failed", "response.cancelled")


def model_variable(harness_name: str) -> str:
    """``HARNESS_<NAME>_MODEL`` for a harness: ``claude-sdk`` → ``HARNESS_CLAUDE_SDK_MODEL``."""
    return "HARNESS_" + re.sub(r"[^A-Za-z0-9]+", "_", harness_name).strip("_").upper() + "_MODEL"


def external_harness(
    command: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    startup_timeout: float | None = None,
) -> HarnessFactory:
    """A harness factory that runs ``command`` as an external harness.

    For the ``omnigent.harnesses`` entry-point group::

        # mypkg/__init__.py
        harness = external_harness([sys.executable, "-m", "mypkg.harness"])
        # pyproject.toml
        [project.entry-points."omnigent.harnesses"]
        my-harness = "mypkg:harness"

    ``env`` is added to the spawn environment (the spec's ``executor.config.env``
    still applies on top).
    """
    argv = tuple(command)
    extra = dict(env or {})

    def factory(harness_env: HarnessEnv) -> Harness:
        return ExternalHarness(
            harness_env, command=argv, extra_env=extra, startup_timeout=startup_timeout
        )

    return factory


def make_external(env: HarnessEnv) -> Harness:
    """The built-in ``external`` harness: ``executor.config.command`` is the program."""
    if not env.config.command:
        raise HarnessError("harness 'external' needs executor.config.command")
    return ExternalHarness(env, command=env.config.command)


@attrs.define(eq=False)
class _Connection:
    """A live harness process and the HTTP client that talks to it."""

    process: ManagedProcess
    client: httpx.AsyncClient

    async def post(self, session_id: str, body: Mapping[str, Any]) -> Any:
        """POST a flat event; the harness's answer as it came (``None`` for a 204).

        Raises:
            HarnessError: the harness refused it or cannot be reached.
        """
        try:
            response = await self.client.post(f"/v1/sessions/{session_id}/events", json=body)
        except httpx.TransportError as exc:
            raise HarnessError(f"the external harness cannot be reached: {exc}") from exc
        if response.status_code >= 300:
            raise HarnessError(
                f"the external harness answered {response.status_code} to "
                f"{body.get('type')!r}: {response.text[:500]}"
            )
        if response.status_code == 204 or not response.content:
            return None
        return response.json()


class ExternalHarness:
    """The runtime's side of one session's external harness (see the module docstring)."""

    def __init__(
        self,
        env: HarnessEnv,
        *,
        command: Sequence[str],
        extra_env: Mapping[str, str] | None = None,
        startup_timeout: float | None = None,
    ) -> None:
        if env.processes is None:
            raise HarnessError("external harnesses need a runtime's process manager")
        self._env = env
        self._processes: ProcessManager = env.processes
        self._command = tuple(command)
        self._extra_env = dict(extra_env or {})
        option = env.config.options.get("startup_timeout")
        if startup_timeout is None and isinstance(option, int | float) and option > 0:
            startup_timeout = float(option)
        self._startup_timeout = startup_timeout or DEFAULT_STARTUP_TIMEOUT
        self._connection: _Connection | None = None

    @property
    def process(self) -> ManagedProcess | None:
        """The session's live harness process, if one runs."""
        return self._processes.get(self._env.session_id)

    async def aclose(self) -> None:
        """Close the HTTP client. The process stays, for the session's next turn."""
        connection, self._connection = self._connection, None
        if connection is not None:
            await connection.client.aclose()

    # -- the process -------------------------------------------------------------------

    async def _connect(self, request: TurnRequest, ctx: TurnContext) -> _Connection:
        """The live connection, spawning (and health-checking) a process if needed."""
        process = self._processes.get(self._env.session_id)
        if self._connection is not None and self._connection.process is process:
            return self._connection
        await self.aclose()
        if process is not None:
            self._connection = self._client_for(process)
            return self._connection
        async with ctx.launching():
            process = await self._spawn(request)
            connection = self._client_for(process)
            try:
                await self._wait_healthy(connection)
            except BaseException:
                await connection.client.aclose()
                await process.terminate(self._processes.grace)
                raise
        self._connection = connection
        return connection

    async def _spawn(self, request: TurnRequest) -> ManagedProcess:
        session_id = self._env.session_id
        socket = await self._processes.socket_path(f"{session_id}.sock")
        # A harness that died leaves its socket file behind; the directory is ours.
        await trio.Path(socket).unlink(missing_ok=True)
        token = secrets.token_urlsafe(32)
        child_env = base_environment()
        child_env.update(self._extra_env)
        child_env.update(self._env.config.env)
        child_env[TOKEN_ENV] = token
        if request.model:
            child_env[model_variable(self._env.harness_name)] = request.model
        argv = (*self._command, "--socket", str(socket), "--conversation-id", session_id)
        spec = ProcessSpec(
            argv=argv,
            env=child_env,
            key=session_id,
            cwd=await self._env.working_directory(),
            info={"socket": str(socket), "token": token},
            # A stop or a delete of the session ends its harness too (the next
            # message starts a fresh one); only idle reaping waits for the timeout.
            session_id=session_id,
        )
        try:
            return await self._processes.spawn(spec)
        except OSError as exc:
            raise HarnessError(f"cannot start the external harness {argv[0]!r}: {exc}") from exc

    def _client_for(self, process: ManagedProcess) -> _Connection:
        info = process.spec.info
        client = httpx.AsyncClient(
            transport=httpx.AsyncHTTPTransport(uds=info["socket"]),
            base_url="http://harness",
            headers={"Authorization": f"Bearer {info['token']}"},
            timeout=httpx.Timeout(connect=5.0, read=None, write=30.0, pool=30.0),
        )
        return _Connection(process, client)

    async def _wait_healthy(self, connection: _Connection) -> None:
        """Poll ``GET /health`` until it answers 200, the process exits, or time runs out."""
        process = connection.process
        delay = 0.005
        with trio.move_on_after(self._startup_timeout):
            while process.alive:
                try:
                    response = await connection.client.get("/health")
                    if response.status_code == 200:
                        return
                except httpx.TransportError:
                    pass  # not listening yet
                with trio.move_on_after(delay):
                    await process.exited.wait()
                delay = min(delay * 2, 0.1)
            raise HarnessError(
                f"the external harness exited before it was ready: {process.describe_exit()}"
            )
        tail = process.stderr_tail()
        raise HarnessError(
            f"the external harness did not answer /health within {self._startup_timeout:g} s"
            + (f"; stderr: {tail}" if tail else "")
        )

    # -- a turn ------------------------------------------------------------------------

    async def run_turn(self, request: TurnRequest, ctx: TurnContext) -> None:
        connection = await self._connect(request, ctx)
        with connection.process.in_use():
            try:
                await _TurnRelay(connection, request, ctx).run()
            except BaseException as exc:
                if _cancelled(exc) and connection.process.alive:
                    # It may be gone already; the turn is cancelled either way.
                    with (
                        trio.move_on_after(_CONTROL_TIMEOUT, shield=True),
                        suppress(HarnessError),
                    ):
                        await connection.post(request.session_id, {"type": "interrupt"})
                raise


def _cancelled(exc: BaseException) -> bool:
    """Whether ``exc`` is (or holds) a ``trio.Cancelled``."""
    if isinstance(exc, BaseExceptionGroup):
        return exc.split(trio.Cancelled)[0] is not None
    return isinstance(exc, trio.Cancelled)


class _TurnRelay:
    """One turn's stream from the harness, relayed into the turn's context."""

    def __init__(self, connection: _Connection, request: TurnRequest, ctx: TurnContext) -> None:
        self._connection = connection
        self._request = request
        self._ctx = ctx
        self._stack = AsyncExitStack()
        self._writer: MessageWriter | None = None
        self._writer_item: Any = None
        self._dispatched: set[str] = set()
        self._finished = False

    async def run(self) -> None:
        process = self._connection.process
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._watch_process, nursery.cancel_scope)
            async with self._stack:
                await self._relay_stream(nursery)
            nursery.cancel_scope.cancel()
        if not self._finished:
            # A stream that broke off is usually a process that died: the socket closes
            # as it exits, a moment before its exit is seen. Wait that moment.
            with trio.move_on_after(_EXIT_WAIT):
                await process.exited.wait()
            if not process.alive:
                raise HarnessError(f"the external harness {process.describe_exit()}")
            raise HarnessError("the external harness ended the stream without finishing the turn")

    async def _watch_process(self, scope: trio.CancelScope) -> None:
        await self._connection.process.exited.wait()
        scope.cancel()  # run() then reports how the process ended

    async def _relay_stream(self, nursery: trio.Nursery) -> None:
        client = self._connection.client
        path = f"/v1/sessions/{self._request.session_id}/events"
        try:
            async with client.stream("POST", path, json=turn_body(self._request)) as response:
                if response.status_code != 200:
                    body = (await response.aread())[:500].decode("utf-8", "replace")
                    raise HarnessError(
                        f"the external harness answered {response.status_code} to the turn: {body}"
                    )
                nursery.start_soon(self._forward_injections)
                reader = FrameReader()
                chunks = response.aiter_raw()
                try:
                    async for chunk in chunks:
                        for frame in reader.feed(chunk):
                            await self._handle(frame)
                            if self._finished:
                                return
                finally:
                    await _abandon(chunks)
        except httpx.TransportError as exc:
            if self._connection.process.alive:
                raise HarnessError(f"the external harness stream broke: {exc}") from exc

    async def _forward_injections(self) -> None:
        while True:
            await self._ctx.wait_for_injection()
            messages = await self._ctx.take_injections()
            if messages:
                await self._connection.post(self._request.session_id, injection_body(messages))

    # -- frames ------------------------------------------------------------------------

    async def _handle(self, frame: dict[str, Any]) -> None:
        kind = frame.get("type")
        if kind == DELTA:
            await self._delta(frame)
        elif kind == "response.output_item.done":
            await self._item_done(frame.get("item"))
        elif kind == "response.elicitation_request":
            await self._elicitation(frame)
        elif kind == "policy_evaluation.requested":
            await self._policy(frame)
        elif kind in _TERMINAL:
            await self._close_message()
            if kind == "response.completed":
                self._ctx.report_response_status("completed")
            else:
                default = f"the external harness reported {kind}"
                self._ctx.report_response_status("failed", error_message(frame, default))
            self._finished = True
        elif kind == "error":
            raise HarnessError(error_message(frame, "the external harness reported an error"))
        # Anything else (response.created, response.in_progress, heartbeats) carries
        # nothing the core does not publish itself.

    async def _delta(self, frame: Mapping[str, Any]) -> None:
        delta = frame.get("delta")
        if not isinstance(delta, str):
            raise HarnessError("the external harness sent a delta without text")
        item = frame.get("item_id")
        if self._writer is None or item != self._writer_item:
            await self._close_message()
            self._writer = await self._stack.enter_async_context(self._ctx.open_message())
            self._writer_item = item
        await self._writer.write(delta)

    async def _close_message(self) -> None:
        if self._writer is not None:
            self._writer = None
            await self._stack.aclose()  # persists the message
            self._stack = AsyncExitStack()

    async def _item_done(self, raw: Any) -> None:
        if not isinstance(raw, dict):
            raise HarnessError("the external harness sent an item that is not an object")
        kind = raw.get("type")
        if kind == "message" and self._writer is not None:
            await self._close_message()  # the streamed message, now complete
            return
        await self._close_message()
        try:
            item: Item = structure(_without_extras(raw), Item)
        except Exception as exc:
            raise HarnessError(f"the external harness sent an invalid item: {exc}") from exc
        if isinstance(item, FunctionCallItem) and item.status == "action_required":
            self._dispatched.add(item.call_id)
            output = await self._ctx.call_tool(item.name, item.arguments, call_id=item.call_id)
            body = {"type": "tool_result", "call_id": item.call_id, "output": output}
            await self._connection.post(self._request.session_id, body)
        elif isinstance(item, FunctionCallItem | FunctionCallOutputItem) and (
            item.call_id in self._dispatched
        ):
            return  # the runtime ran it and recorded it already
        elif isinstance(item, MessageItem | FunctionCallItem | FunctionCallOutputItem):
            await self._ctx.add_item(item)

    async def _elicitation(self, frame: Mapping[str, Any]) -> None:
        elicitation_id = frame.get("elicitation_id")
        if not isinstance(elicitation_id, str):
            raise HarnessError("the external harness sent an elicitation without an id")
        await self._close_message()
        action, content = await self._ctx.elicit(elicitation_params(frame.get("params")))
        body: dict[str, Any] = {
            "type": "approval",
            "elicitation_id": elicitation_id,
            "action": action,
        }
        if content is not None:
            body["content"] = content
        await self._connection.post(self._request.session_id, body)

    async def _policy(self, frame: Mapping[str, Any]) -> None:
        evaluation_id = frame.get("evaluation_id")
        if not isinstance(evaluation_id, str):
            raise HarnessError("the external harness sent a policy evaluation without an id")
        try:
            verdict = dict(await self._ctx.evaluate_policy(frame.get("event") or {}))
        except HarnessError:
            raise
        except Exception as exc:  # a malformed event: the harness gets a DENY saying why
            reason = getattr(exc, "message", str(exc))
            verdict = {"result": "POLICY_ACTION_DENY", "reason": f"invalid policy event: {reason}"}
        body = {"type": "policy_verdict", "evaluation_id": evaluation_id}
        body["action"] = verdict.pop("result")
        body.update(verdict)
        await self._connection.post(self._request.session_id, body)


async def _abandon(chunks: AsyncIterator[bytes]) -> None:
    """End httpx's nested body generators instead of dropping them mid-``yield``.

    Dropped, each would be collected unfinished (and Trio warns); read on in a
    cancelled scope, they all finish with the ``Cancelled`` at their next await. The
    loop is bounded for chunks that come back without an await.
    """
    with trio.CancelScope() as scope, suppress(Exception):
        scope.cancel()
        for _ in range(64):
            await chunks.__anext__()


_ITEM_KEYS = {
    "message": {"type", "role", "content", "id", "status"},
    "function_call": {"type", "call_id", "name", "arguments", "id", "status"},
    "function_call_output": {"type", "call_id", "output", "id"},
}


def _without_extras(raw: dict[str, Any]) -> dict[str, Any]:
    """An item with only the keys omnigent knows (harnesses add their own, like ``agent``)."""
    keys = _ITEM_KEYS.get(str(raw.get("type")))
    if keys is None:
        return raw
    item = {k: v for k, v in raw.items() if k in keys}
    if isinstance(item.get("arguments"), dict):
        item["arguments"] = json.dumps(item["arguments"])
    return item
