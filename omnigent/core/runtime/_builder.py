"""What session actors run, built on demand: :class:`Builder`.

:class:`Builder` implements :class:`~omnigent.core.session.SessionBuilder`: a session's
tool set (its spec's tools over the runtime's :class:`~omnigent.core.tools.ToolServices`,
through its agent version's policy engine), its harness (from the registry, with the
session's model override, working directory, stored harness state and the endpoint
its provider serves), each turn's request (the kept history, uploaded images resolved
to ``data:`` URLs) and the watcher of its dispatches to child sessions.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

import attrs
import httpx
import trio

from ...errors import ConfigError, OmnigentError, SessionNotFound, SpecUnresolved
from ...harnesses.base import Harness, HarnessEnv, TurnRequest
from ...model import Item, MessageItem, Prices
from ...providers import Provider, load_provider_config
from ...stores import SessionRow, Store, TurnStart
from ..session import SessionBasis, StoredHarnessState
from ..tools import (
    PythonTools,
    Runners,
    ToolServices,
    no_runners,
    spec_for_runner,
)
from ..work import BackgroundTasks, ChildWork, ChildWorkHooks, RecordedGroups, SubAgents
from ._files import FileService
from ._specs import AgentSpecs
from ._tuning import SessionTuning

if TYPE_CHECKING:
    from ...processes import ProcessManager
    from ..tools.session import SessionTools

__all__ = ["Builder"]

log = logging.getLogger(__name__)


class Builder:
    """Builds what session actors run. Owned by the ``Runtime``.

    Args:
        store: where harness state and turn numbers are kept.
        specs: which spec a session runs, and its policy engine.
        python_tools: the specs' own Python tools (``tools.python``).
        tools: what every session's tools stand on.
        files: resolves uploaded images.
        http: the client harnesses reach model endpoints with.
        processes: the harness process manager (None for a runtime without one).
        subagents: the dispatches the runtime watches.
        child_hooks: what a dispatch watcher asks of the runtime.
        runners: where runner-bound sessions' work is sent (``None``: such a
            session's turn fails, saying this runtime takes no runners).
    """

    def __init__(
        self,
        *,
        store: Store,
        specs: AgentSpecs,
        python_tools: PythonTools,
        tools: ToolServices,
        files: FileService,
        http: httpx.AsyncClient,
        processes: ProcessManager | None,
        subagents: SubAgents,
        child_hooks: ChildWorkHooks,
        tuning: SessionTuning,
        runners: Runners | None = None,
    ) -> None:
        self._runners = runners
        self._store = store
        self._tuning = tuning
        self._specs = specs
        self._python_tools = python_tools
        self._tools = tools
        self._files = files
        self._http = http
        self._processes = processes
        self._subagents = subagents
        self._child_hooks = child_hooks

    async def session_basis(
        self, session_id: str, *, follow: bool, read: TurnStart | None = None
    ) -> SessionBasis:
        """The session's row and the spec it runs, read once for a turn's start
        (``follow``: moved to its agent's latest version first, if it tracks it;
        ``read``: the row and version as the turn's count read them, not read again).

        Raises:
            OmnigentError: SessionNotFound; as the spec cache raises it (AgentNotFound,
                StoreTimeout…); anything unexpected becomes SpecUnresolved (its class
                named, its text logged, never shown).
        """
        try:
            if read is not None:
                row = await self._follow(read.row, read.latest_version) if follow else read.row
            elif follow:
                row = await self._followed_row(session_id)
            else:
                row = await self._row(session_id)
            return SessionBasis(row, await self._specs.row_spec(row))
        except OmnigentError:
            raise
        except Exception as exc:
            log.exception("session %s: resolving its agent spec failed", session_id)
            raise SpecUnresolved(exc) from exc

    async def _row(self, session_id: str) -> SessionRow:
        row = await self._store.get_session(session_id)
        if row is None:
            raise SessionNotFound(session_id)
        return row

    async def make_tools(
        self, basis: SessionBasis, tasks: BackgroundTasks, work: ChildWork
    ) -> SessionTools:
        # The tool set and the tools it offers are imported by the first session's
        # tools, not with the runtime: a server answers without them (issue 32).
        from ..tools.session import SessionTools

        row, spec = basis.row, basis.spec
        inherited = await self._specs.inherited_sandbox(row)
        workplace = None
        if row.runner_id is not None:
            # Its OS tools run on its runner, in its workspace (the spec's os_env.cwd is
            # resolved there); nothing of it is made on this machine.
            if self._runners is None:
                raise no_runners(row.runner_id)
            workplace = self._runners.workplace(
                row.runner_id, row.id, spec_for_runner(spec, inherited), row.agent_id
            )
        return SessionTools(
            session_id=row.id,
            spec=spec,
            services=self._tools,
            policies=self._specs.policy_engine(row, spec),
            tasks=tasks,
            work=work,
            groups=RecordedGroups(self._store, row.id),
            session_cwd=row.cwd,
            inherited_sandbox=inherited,
            python_tools=await self._python_tools.tools_of(spec),
            workplace=workplace,
        )

    async def _followed_row(self, session_id: str) -> SessionRow:
        """The session's row, moved first to its agent's latest version if it tracks
        its agent (the row and that version are one read: :meth:`_follow`)."""
        found = await self._store.get_session_and_agent_version(session_id)
        if found is None:
            raise SessionNotFound(session_id)
        return await self._follow(*found)

    async def _follow(self, row: SessionRow, latest: int | None) -> SessionRow:
        """The session's ``row``, moved first to its agent's ``latest`` version if it
        tracks its agent.

        As the original omnigent ("no ``harness_override``: track the spec"), a session
        runs the version its agent has when its actor builds its tools — the first
        turn after the session had no work, so an agent updated between turns is used
        by the next one, and a live actor's turns all run one version. A
        ``harness_override`` keeps the version the session was created with, and so
        does a sub-agent's session (its spec is inside its parent's version).
        """
        if (
            row.harness_override is not None
            or row.sub_agent is not None
            or latest is None
            or latest <= row.agent_version
        ):
            return row
        await self._store.update_session(row.id, agent_version=latest)
        log.info("session %s follows agent %s to version %d", row.id, row.agent_id, latest)
        return await self._row(row.id)  # as the store has it now

    async def make_harness(self, basis: SessionBasis, tools: SessionTools) -> tuple[Harness, str]:
        row, spec = basis.row, basis.spec
        session_id = row.id
        name = self._specs.harness_of(spec, row.harness_override)
        config = spec.executor.config
        if row.model_override is not None and row.model_override != config.model:
            # What the harness actually runs: a harness reading its config sees the
            # session's model, as one reading TurnRequest.model does.
            config = attrs.evolve(config, model=row.model_override)
        config = self._tuning.applied(session_id, config)  # a client's temperature
        home = self._tools.place.home
        env = HarnessEnv(
            session_id,
            spec,
            config,
            self._http,
            harness_name=name,
            processes=self._processes,
            working_directory=tools.cwd,
            state=StoredHarnessState(self._store, session_id, name),
            data_dir=home / "harnesses" / name,
            provider=await self._provider_serving(name),
            sandbox=tools.sandbox,
        )
        if row.runner_id is not None:
            # The real harness runs on the runner; this one has it run there.
            if self._runners is None:
                raise no_runners(row.runner_id)
            if tools.workplace is not None:  # the spec with the sandbox it runs in
                env = attrs.evolve(env, spec=tools.workplace.spec)
            return self._runners.harness(row.runner_id, env, row.agent_id), name
        return self._specs.harnesses.create(name, env), name

    async def _provider_serving(self, harness: str) -> Provider | None:
        """The provider of ``config.yaml`` whose endpoint ``harness`` uses by default.

        A configuration that cannot be read is logged and treated as empty here: a
        session whose spec or environment names its endpoint must not fail for it
        (``sys_list_models`` reports the error to the agent).
        """
        try:
            config = await trio.to_thread.run_sync(load_provider_config, self._tools.place.home)
        except ConfigError as exc:
            log.warning("ignoring the provider configuration for endpoints: %s", exc.message)
            return None
        return config.serving(harness)

    async def prices(self) -> Prices:
        """The configuration's ``prices`` table (an unreadable configuration: none,
        logged — a turn never fails for want of a price)."""
        try:
            config = await trio.to_thread.run_sync(load_provider_config, self._tools.place.home)
        except ConfigError as exc:
            log.warning("ignoring the configuration's prices: %s", exc.message)
            return Prices()
        return config.prices

    async def build_request(
        self,
        basis: SessionBasis,
        tools: SessionTools,
        response_id: str,
        turn_number: int,
        messages: list[MessageItem],
        history: list[Item],
        image_positions: list[int],
    ) -> TurnRequest:
        """The turn's request: ``history`` as kept
        (:mod:`omnigent.core.session._history`), its uploaded
        images (at ``image_positions``) and the input's resolved to ``data:`` URLs;
        ``turn_number`` as :meth:`~omnigent.stores.Store.begin_turn` counted it."""
        row, spec = basis.row, basis.spec
        session_id = row.id
        resolve = self._files.resolver()
        for position in image_positions:
            history[position] = await resolve(history[position])
        return TurnRequest(
            session_id=session_id,
            response_id=response_id,
            turn_number=turn_number,
            history=tuple(history),
            input=tuple([await resolve(m) for m in messages]),  # type: ignore[misc]
            instructions=spec.prompt,
            model=row.model_override or spec.model,
            tools=tools.schemas(),
            spec=spec,
        )

    def child_work(
        self, session_id: str, nursery: trio.Nursery, on_inbox: Callable[[], None]
    ) -> ChildWork:
        return ChildWork(session_id, nursery, self._subagents, self._child_hooks, on_inbox)
