"""Agent records: registration (with its checks) and the agent view.

:class:`AgentCatalog` is owned by the runtime; it needs only the store and the
runtime's :class:`~._specs.AgentSpecs` (the spec cache, harness names and policy
checks), so the runtime reads as its API.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import trio

from ...errors import AgentNotFound, ErrorDetail, Forbidden, SpecError
from ...mcp import require_mcp
from ...model import Agent
from ...spec import AgentSpec, ClientTrust, client_spec_problems, unbuilt_keys
from ...stores import AgentRow, Store
from ..tools import PythonTools, ToolRegistry
from ._specs import AgentSpecs

__all__ = ["AgentCatalog"]


class AgentCatalog:
    """Registered agents and their versions. Owned by the ``Runtime``.

    Args:
        store: where agent versions are kept.
        specs: the spec cache, harness names and policy checks.
        trust: what a client's spec may name — programs, variables, URLs (see
            :mod:`omnigent.spec._trust`).
        python_tools: the specs' own Python tools: who may name what, and loading them.
        registered_tools: the tools registered on the runtime (a spec's own may not
            take one's name).
    """

    def __init__(
        self,
        *,
        store: Store,
        specs: AgentSpecs,
        trust: ClientTrust,
        python_tools: PythonTools,
        registered_tools: ToolRegistry,
    ) -> None:
        self._store = store
        self._specs = specs
        self._trust = trust
        self._python_tools = python_tools
        self._registered_tools = registered_tools

    async def create(
        self, spec: AgentSpec | Mapping[str, Any], owner: str, *, from_client: bool = False
    ) -> Agent:
        """Validate ``spec`` fully, then store it as the agent's next version.

        Beyond its shape: a key whose feature is not built is refused (see
        :mod:`omnigent.spec._unbuilt`), and so is a ``function`` policy the operator did
        not allow, and a Python tool (``tools.python``) whose name a tool registered on
        the runtime has, or that cannot be imported. A spec ``from_client`` may name no
        program the operator did not allow, nor a working directory outside the
        workspace (:mod:`omnigent.spec._trust`), nor a Python tool the operator did not
        allow (:mod:`omnigent.core.tools._python_tools`). An unchanged spec keeps its
        version.

        Raises:
            Forbidden: another owner has the name (also when it got it while this
                call was validating).
        """
        if not isinstance(spec, AgentSpec):
            spec = AgentSpec.from_dict(spec)
        harness = self._specs.harness_of(spec, None)
        require_mcp(spec)
        # Refused early, before a policy module is imported for a name the caller
        # cannot have. The store's write checks the owner again, atomically: this
        # read only saves work, it does not decide (two creates race past it).
        existing = await self._store.get_agent_by_name(spec.name)
        if existing is not None and existing.owner != owner:
            raise Forbidden(f"agent {spec.name!r} belongs to another user")
        # The keys omnigent has not built, the harness's own refusals (a model of
        # another family, keys it cannot honour), then the policies.
        problems = unbuilt_keys(spec) + self._specs.harnesses.spec_problems(harness, spec)
        problems += self._policy_problems(spec)
        # The Agents SDK harness's checks (its agent reference), imported with it on
        # the first registration rather than when the runtime opens.
        from ...harnesses.agents_sdk import agent_problems

        problems += agent_problems(spec, self._agent_allowed)
        problems += self._python_tools.problems(
            spec, from_client=from_client, taken=self._registered_tools.names()
        )
        if from_client:
            problems += client_spec_problems(spec, self._trust)
        if not problems:
            # Importing an allowed function policy's module may block: in a thread.
            problems = await trio.to_thread.run_sync(self._import_problems, spec)
            problems += await trio.to_thread.run_sync(self._python_tools.load_problems, spec)
        if problems:
            summary = "; ".join(f"{p.msg} @ {p.loc}" for p in problems)
            raise SpecError(f"invalid AgentSpec: {summary}", problems)
        row = await self._store.put_agent_version(spec.name, spec.to_dict(), owner)
        self._specs.remember_spec(row.id, row.version, spec)
        return Agent(
            row.id, row.name, row.version, spec.description, harness, spec.model, row.created_at
        )

    def _agent_allowed(self, ref: str) -> bool:
        """Whether the operator allowed the ``openai-agents`` agent ``ref``: the same
        trust as a function policy's (``serve --policy-module``, ``policy_modules=``,
        the operator's own spec file). Imports nothing."""
        return self._specs.policy_allowlist.problem(ref) is None

    def _policy_problems(self, spec: AgentSpec) -> list[ErrorDetail]:
        """Function references the operator did not allow, the sub-agents' included
        (``sub_agents[0].policies[1].function``). Imports nothing."""
        allowlist = self._specs.policy_allowlist
        return [
            ErrorDetail(f"{root}policies[{index}].function", problem)
            for root, agent in _with_sub_agents(spec)
            for index, policy in enumerate(agent.policies)
            if policy.function is not None
            and (problem := allowlist.problem(policy.function)) is not None
        ]

    def _import_problems(self, spec: AgentSpec) -> list[ErrorDetail]:
        """Allowed references that cannot be imported, the sub-agents' included.

        Blocking (it imports the modules): run it in a worker thread.
        """
        return [
            ErrorDetail(f"{root}{problem.loc}", problem.msg)
            for root, agent in _with_sub_agents(spec)
            for problem in self._specs.new_policy_engine(agent).check()
            if problem.loc.startswith("policies[")
        ]

    async def owner_of(self, agent_id: str) -> str | None:
        """Who registered the agent (``None``: no such agent any more)."""
        row = await self._store.get_agent(agent_id)
        return None if row is None else row.owner

    async def get(self, agent_id: str) -> Agent:
        return self.view(await self._store.get_agent(agent_id), agent_id)

    async def find(self, ref: str) -> Agent | None:
        """An agent by id, else by name; None if neither names one."""
        row = await self._store.get_agent(ref) or await self._store.get_agent_by_name(ref)
        return None if row is None else self.view(row, ref)

    async def get_by_name(self, name: str) -> Agent:
        return self.view(await self._store.get_agent_by_name(name), name)

    async def list(self) -> list[Agent]:
        return [self.view(row, row.id) for row in await self._store.list_agents()]

    def view(self, row: AgentRow | None, looked_up: str) -> Agent:
        """The wire view of an agent row. Raises AgentNotFound for ``None``."""
        if row is None:
            raise AgentNotFound(looked_up)
        spec = self._specs.spec_of(row.id, row.version, row.spec)
        return Agent(
            row.id,
            row.name,
            row.version,
            spec.description,
            self._specs.harness_of(spec, None, strict=False),
            spec.model,
            row.created_at,
        )


def _with_sub_agents(spec: AgentSpec, root: str = "") -> Iterator[tuple[str, AgentSpec]]:
    """``spec`` and every sub-agent under it, each with the path its fields are under."""
    yield root, spec
    for index, sub in enumerate(spec.sub_agents):
        yield from _with_sub_agents(sub, f"{root}sub_agents[{index}].")
