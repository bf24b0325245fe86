"""Agent specs as the runtime uses them: which spec a session runs, and what it implies.

:class:`AgentSpecs` is owned by the runtime and shared by everything that needs a
spec (the agent and session catalogs, the builder of what actors run, policy
evaluation from outside a turn, client MCP servers). It keeps the parsed spec of the
agent versions this process used lately (parsed once, then served without a store
read) and one policy engine per agent version and sub-agent (so function references
resolve once), and answers what follows from a spec: the harness a session runs,
whether that harness can run it, and where its OS tools act.

Both caches are bounded (:data:`MAX_CACHED_SPECS`, :data:`MAX_CACHED_ENGINES`): agent
versions are client input (every ``POST /v1/agents`` may make one), so a cache keyed
by them must not grow with it. Past the bound the least recently used entry is
evicted, and read (or built) again the next time it is needed (issue 22, defect 6).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Sequence
from pathlib import Path
from typing import Any, Generic, TypeVar

from ...errors import AgentNotFound, ErrorDetail, InvalidInput, SessionNotFound
from ...harnesses.registry import HarnessRegistry
from ...spec import AgentSpec, PolicySpec, SandboxSpec
from ...stores import SessionRow, Store
from ..tools import PolicyAllowlist, PolicyEngine, ToolPlace, safe_default, working_directory
from ..work import BlockingCalls

__all__ = ["MAX_CACHED_ENGINES", "MAX_CACHED_SPECS", "AgentSpecs", "sub_agent_spec"]

MAX_CACHED_SPECS = 1024
"""Parsed agent specs kept in memory (least recently used evicted past it)."""
MAX_CACHED_ENGINES = 1024
"""Policy engines kept in memory (least recently used evicted past it)."""

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class _Recent(Generic[K, V]):
    """At most ``limit`` entries; past it, the least recently used is evicted."""

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError("a cache holds at least one entry")
        self._limit = limit
        self._entries: OrderedDict[K, V] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: K) -> V | None:
        value = self._entries.get(key)
        if value is not None:
            self._entries.move_to_end(key)
        return value

    def put(self, key: K, value: V) -> V:
        self._entries[key] = value
        self._entries.move_to_end(key)
        while len(self._entries) > self._limit:
            self._entries.popitem(last=False)
        return value


def sub_agent_spec(spec: AgentSpec, path: str, agent_id: str = "") -> AgentSpec:
    """The spec of the sub-agent at ``path`` (``lead/researcher``) inside ``spec``.

    Raises:
        AgentNotFound: no sub-agent at that path.
    """
    current = spec
    for name in path.split("/"):
        found = next((s for s in current.sub_agents if s.name == name), None)
        if found is None:
            raise AgentNotFound(f"{agent_id}/{path}" if agent_id else path)
        current = found
    return current


_MAX_ANCESTORS = 64  # session trees are far shallower; a bound on a corrupt one


class AgentSpecs:
    """Parsed specs and policy engines, kept per process (see the module docstring).

    Args:
        store: where agent versions are read from.
        harnesses: the harness registry (which harness a spec runs, and its checks).
        place: where sessions' OS tools act.
        threads: where sync policy functions run.
        default_policies: applied to every session after its agent's own.
        policy_allowlist: which function policies may be resolved.
        max_specs, max_engines: the bounds of the two caches.
        safe_defaults: the engines end with the safe defaults (``omnigent run``'s).
    """

    def __init__(
        self,
        *,
        store: Store,
        harnesses: HarnessRegistry,
        place: ToolPlace,
        threads: BlockingCalls,
        default_policies: Sequence[PolicySpec],
        policy_allowlist: PolicyAllowlist,
        max_specs: int = MAX_CACHED_SPECS,
        max_engines: int = MAX_CACHED_ENGINES,
        safe_defaults: bool = False,
    ) -> None:
        self._store = store
        self._safe_defaults = safe_defaults
        self.harnesses = harnesses
        self._place = place
        self._threads = threads
        self._default_policies = tuple(default_policies)
        self.policy_allowlist = policy_allowlist
        self._specs: _Recent[tuple[str, int], AgentSpec] = _Recent(max_specs)
        # One engine per agent version (and sub-agent), so function references resolve
        # once while it is kept.
        self._engines: _Recent[tuple[str, int, str | None], PolicyEngine] = _Recent(max_engines)

    def statistics(self) -> dict[str, int]:
        """How many specs and policy engines are kept now."""
        return {"specs": len(self._specs), "engines": len(self._engines)}

    def spec_of(self, agent_id: str, version: int, data: dict[str, Any]) -> AgentSpec:
        """The parsed spec of one agent version (parsed again only once evicted)."""
        key = (agent_id, version)
        spec = self._specs.get(key)
        if spec is None:
            spec = self._specs.put(key, AgentSpec.from_dict(data))
        return spec

    def remember_spec(self, agent_id: str, version: int, spec: AgentSpec) -> None:
        """Keep the spec of a version just registered (its store row is the same)."""
        self._specs.put((agent_id, version), spec)

    def harness_of(self, spec: AgentSpec, override: str | None, *, strict: bool = True) -> str:
        """The canonical harness a session of ``spec`` runs.

        With ``strict=False`` (for display) a name no longer registered is shown as
        written instead of raising UnknownHarness.
        """
        name = spec.executor.type
        if name == "omnigent":
            name = override or spec.executor.config.harness
        if not strict and not self.harnesses.known(name):
            return name
        return self.harnesses.canonical(name)

    def check_runnable(
        self, spec: AgentSpec, harness_override: str | None, model_override: str | None
    ) -> None:
        """Refuse a session whose harness cannot run it: the model guard of a
        single-vendor harness (``only runs Claude models``), and — for an override —
        the spec keys that harness cannot honour.

        Raises:
            InvalidInput: at ``model_override`` (the override's model is refused) or
                ``harness_override`` (the override cannot run the agent as written).
        """
        harness = self.harness_of(spec, harness_override, strict=False)
        if not self.harnesses.known(harness):
            return  # registered elsewhere (a records-only runtime): not ours to judge
        model = model_override or spec.model
        refusal = self.harnesses.model_problem(harness, model)
        if refusal is not None:
            loc = "model_override" if model_override is not None else "harness_override"
            raise InvalidInput.at(loc, refusal)
        if harness_override is not None:
            problems = [
                p
                for p in self.harnesses.spec_problems(harness, spec)
                if p.loc != "executor.config.model"
            ]
            if problems:
                summary = "; ".join(f"{p.msg} @ {p.loc}" for p in problems)
                raise InvalidInput(
                    f"harness {harness!r} cannot run agent {spec.name!r}: {summary}",
                    [ErrorDetail("harness_override", summary)],
                )

    async def session_spec(self, session_id: str) -> tuple[SessionRow, AgentSpec]:
        """A session's row and the spec it runs (its sub-agent's, for a sub-agent).

        Raises:
            SessionNotFound. AgentNotFound: its agent (or sub-agent) is gone.
        """
        row = await self._store.get_session(session_id)
        if row is None:
            raise SessionNotFound(session_id)
        return row, await self.row_spec(row)

    async def row_spec(self, row: SessionRow) -> AgentSpec:
        """The spec the session of ``row`` runs (its sub-agent's, for a sub-agent); a
        kept version costs no store read.

        Raises:
            AgentNotFound: its agent (or sub-agent) is gone.
        """
        spec = await self.agent_spec(row.agent_id, row.agent_version)
        if row.sub_agent is not None:
            spec = sub_agent_spec(spec, row.sub_agent, row.agent_id)
        return spec

    async def inherited_sandbox(self, row: SessionRow) -> SandboxSpec | None:
        """The sandbox of the nearest ancestor of ``row``'s session that has one.

        A session a sandboxed session started (a sub-agent, a spawned session) never
        runs unsandboxed: without a sandbox of its own it runs in this one — so an
        agent cannot step out of its sandbox by writing a spec without one and
        starting a session of it.
        """
        parent_id = row.parent_session_id
        for _ in range(_MAX_ANCESTORS):
            if parent_id is None:
                return None
            try:
                parent, spec = await self.session_spec(parent_id)
            except (SessionNotFound, AgentNotFound):
                return None
            if spec.os_env is not None and spec.os_env.sandbox.confined:
                return spec.os_env.sandbox
            parent_id = parent.parent_session_id
        return None

    async def workdir(self, session_id: str) -> Path:
        """Where the session's OS tools act (see :func:`~omnigent.core.tools.working_directory`)."""
        row, spec = await self.session_spec(session_id)
        session_cwd = Path(row.cwd) if row.cwd is not None else None
        return await working_directory(spec, session_cwd, self._place, session_id)

    async def agent_spec(self, agent_id: str, version: int | None) -> AgentSpec:
        """An agent version's spec; a kept version is served without a store read.

        Raises:
            AgentNotFound.
        """
        if version is not None:
            kept = self._specs.get((agent_id, version))
            if kept is not None:
                return kept
        agent = await self._store.get_agent(agent_id, version)
        if agent is None:
            raise AgentNotFound(agent_id)
        return self.spec_of(agent.id, agent.version, agent.spec)

    def policy_engine(self, row: SessionRow, spec: AgentSpec) -> PolicyEngine:
        """The policy engine of a session's agent version (its policies, then defaults)."""
        key = (row.agent_id, row.agent_version, row.sub_agent)
        engine = self._engines.get(key)
        if engine is None:
            engine = self._engines.put(key, self.new_policy_engine(spec))
        return engine

    def new_policy_engine(self, spec: AgentSpec) -> PolicyEngine:
        """An engine for ``spec``'s policies, then the defaults, resolving only what the
        operator allowed — and, with ``safe_defaults``, the safe defaults last."""
        return PolicyEngine(
            spec.policies,
            defaults=self._default_policies,
            resolve_function=self.policy_allowlist.resolve,
            threads=self._threads,
            fallback=safe_default if self._safe_defaults else None,
        )
