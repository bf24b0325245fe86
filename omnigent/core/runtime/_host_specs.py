"""The actor host's specs: which spec a session runs, and what that spec implies.

:class:`HostSpecs` is the base of :class:`~._host.ActorHost`. It keeps the parsed spec
of every agent version this process has seen (parsed once, served without a store
read after that) and one policy engine per agent version and sub-agent (so function
references resolve once), and answers what follows from a spec: the harness a session
runs, whether that harness can run it, and where its OS tools act. It is a base of
the host rather than an object of its own because everything that needs a spec —
the session records, the agent catalog, the asking path, client MCP servers — reaches
it through the host it already holds, and the host's own builders (harness, tools,
turn requests) start from it; a base costs those calls nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ...errors import AgentNotFound, ErrorDetail, InvalidInput, SessionNotFound
from ...harnesses.registry import HarnessRegistry
from ...spec import AgentSpec, PolicySpec
from ...stores import SessionRow, Store
from ..tools import PolicyAllowlist, PolicyEngine, ToolPlace, working_directory
from ..work import BlockingCalls

__all__ = ["HostSpecs", "sub_agent_spec"]


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


class HostSpecs:
    """Parsed specs and policy engines, cached per process (see the module docstring)."""

    def __init__(
        self,
        *,
        store: Store,
        harnesses: HarnessRegistry,
        place: ToolPlace,
        threads: BlockingCalls,
        default_policies: Sequence[PolicySpec],
        policy_allowlist: PolicyAllowlist,
    ) -> None:
        self._store = store
        self.harnesses = harnesses
        self._place = place
        self._threads = threads
        self._default_policies = tuple(default_policies)
        self.policy_allowlist = policy_allowlist
        self._specs: dict[tuple[str, int], AgentSpec] = {}
        # One engine per agent version (and sub-agent), so function references resolve
        # once.
        self._engines: dict[tuple[str, int, str | None], PolicyEngine] = {}

    def spec_of(self, agent_id: str, version: int, data: dict[str, Any]) -> AgentSpec:
        """The parsed spec of one agent version (parsed once per process)."""
        key = (agent_id, version)
        if key not in self._specs:
            self._specs[key] = AgentSpec.from_dict(data)
        return self._specs[key]

    def remember_spec(self, agent_id: str, version: int, spec: AgentSpec) -> None:
        self._specs[(agent_id, version)] = spec

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
        spec = await self.agent_spec(row.agent_id, row.agent_version)
        if row.sub_agent is not None:
            spec = sub_agent_spec(spec, row.sub_agent, row.agent_id)
        return row, spec

    async def workdir(self, session_id: str) -> Path:
        """Where the session's OS tools act (see :func:`~omnigent.core.tools.working_directory`)."""
        row, spec = await self.session_spec(session_id)
        session_cwd = Path(row.cwd) if row.cwd is not None else None
        return await working_directory(spec, session_cwd, self._place, session_id)

    async def agent_spec(self, agent_id: str, version: int | None) -> AgentSpec:
        """An agent version's spec; a known version is served without a store read."""
        if version is not None and (agent_id, version) in self._specs:
            return self._specs[(agent_id, version)]
        agent = await self._store.get_agent(agent_id, version)
        if agent is None:
            raise AgentNotFound(agent_id)
        return self.spec_of(agent.id, agent.version, agent.spec)

    def policy_engine(self, row: SessionRow, spec: AgentSpec) -> PolicyEngine:
        """The policy engine of a session's agent version (its policies, then defaults)."""
        key = (row.agent_id, row.agent_version, row.sub_agent)
        if key not in self._engines:
            self._engines[key] = self.new_policy_engine(spec)
        return self._engines[key]

    def new_policy_engine(self, spec: AgentSpec) -> PolicyEngine:
        """An engine for ``spec``'s policies, then the defaults, resolving only what the
        operator allowed."""
        return PolicyEngine(
            spec.policies,
            defaults=self._default_policies,
            resolve_function=self.policy_allowlist.resolve,
            threads=self._threads,
        )
