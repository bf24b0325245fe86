"""Agent records: registration (with its checks) and the agent view.

Plain functions of a runtime, kept apart so the runtime reads as its API.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import trio

from ..errors import AgentNotFound, Forbidden, SpecError
from ..spec import AgentSpec
from ..stores import AgentRow
from ._policies import PolicyEngine
from ._records import Agent

if TYPE_CHECKING:
    from ._runtime import Runtime

__all__ = ["agent_view", "create_agent"]


async def create_agent(rt: Runtime, spec: AgentSpec | Mapping[str, Any], owner: str) -> Agent:
    """Validate ``spec`` fully, then store it as the agent's next version."""
    if not isinstance(spec, AgentSpec):
        spec = AgentSpec.from_dict(spec)
    harness = rt.host.harness_of(spec, None)
    existing = await rt.store.get_agent_by_name(spec.name)
    if existing is not None and existing.owner != owner:
        raise Forbidden(f"agent {spec.name!r} belongs to another user")
    # Importing a function policy's module may block: do it in a thread.
    problems = await trio.to_thread.run_sync(PolicyEngine(spec.policies).check)
    if problems:
        summary = "; ".join(f"{p.msg} @ {p.loc}" for p in problems)
        raise SpecError(f"invalid AgentSpec: {summary}", problems)
    row = await rt.store.put_agent_version(spec.name, spec.to_dict(), owner)
    rt.host.remember_spec(row.id, row.version, spec)
    return Agent(
        row.id, row.name, row.version, spec.description, harness, spec.model, row.created_at
    )


async def agent_view(rt: Runtime, row: AgentRow | None, looked_up: str) -> Agent:
    """The wire view of an agent row. Raises AgentNotFound for ``None``."""
    if row is None:
        raise AgentNotFound(looked_up)
    spec = rt.host.spec_of(row.id, row.version, row.spec)
    return Agent(
        row.id,
        row.name,
        row.version,
        spec.description,
        rt.host.harness_of(spec, None, strict=False),
        spec.model,
        row.created_at,
    )
