"""A spec's own Python tools: ``tools: {python: ["pkg.module:function", …]}``.

A spec names Python callables; each is offered to the sessions of that agent only (a
sub-agent's to its own sessions), under the function's own name, with its JSON Schema
from the signature and docstring (:func:`~._registry.make_tool`). A sync function runs
in a worker thread, an async one on the event loop; both are cancelled with their turn
as any registered tool is (:meth:`~._registry.ToolRegistry.run`). A name that clashes
with another tool of the agent is refused when the agent is registered (``422`` at
``tools.python[i]``): two of its own with one name, or a built-in's (``sys_*``,
``mcp__*``) — the spec's own rule — or a tool registered on the runtime.

Who may name what — the same rule as ``function`` policies (see
:mod:`._policy_allowlist`): a spec the operator registers (``omnigent run``, ``serve
--agents``, the library) may name any callable it can import; a spec a client sends
(``POST /v1/agents``, an agent's ``sys_session_create``) only one the operator allowed
(:class:`ToolAllowlist`: ``serve --tool-module``, ``open_runtime(tool_functions=...,
tool_modules=...)``), and nothing is imported for any other. The check is made when the
agent is registered; the callable is imported then (in a worker thread, so a module
that fails to import is a ``422`` naming it) and once per process after that.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import trio

from ...errors import BadRequest, ErrorDetail, InvalidInput
from ...spec import AgentSpec, python_tool_name
from ._policy_allowlist import CallableAllowlist
from ._policy_functions import load_function
from ._registry import Tool, make_tool

__all__ = ["PythonTools", "ToolAllowlist", "python_tool_refs"]

log = logging.getLogger("omnigent.core.tools")


class ToolAllowlist(CallableAllowlist):
    """The Python tools an operator allowed a client's spec to name."""

    what = "Python tool"
    modules_loc = "tool_modules"
    functions_loc = "tool_functions"
    how_to_allow = (
        "a spec a client sends may name only tools the operator allowed: list the module "
        "with 'serve --tool-module MODULE', or register the callable with "
        "open_runtime(tool_functions=...)"
    )


def python_tool_refs(spec: AgentSpec, root: str = "") -> Iterator[tuple[str, str]]:
    """``(loc, reference)`` for every Python tool ``spec`` and its sub-agents name."""
    for index, ref in enumerate(spec.tools.python):
        yield f"{root}tools.python[{index}]", ref
    for index, sub in enumerate(spec.sub_agents):
        yield from python_tool_refs(sub, f"{root}sub_agents[{index}].")


class PythonTools:
    """The Python tools specs name, each loaded at most once per process.

    Args:
        allowlist: what a client's spec may name.
    """

    def __init__(self, allowlist: ToolAllowlist | None = None) -> None:
        self._allowlist = allowlist or ToolAllowlist(load_entry_points=False)
        self._loaded: dict[str, Tool] = {}

    def problems(
        self, spec: AgentSpec, *, from_client: bool, taken: frozenset[str]
    ) -> list[ErrorDetail]:
        """Why ``spec``'s Python tools may not be registered, by field. Imports nothing.

        Args:
            from_client: the spec came from a client: only allowed callables.
            taken: names of the tools registered on the runtime (offered to every
                session, so one of the spec's own may not take one).
        """
        problems: list[ErrorDetail] = []
        for loc, ref in python_tool_refs(spec):
            name = python_tool_name(ref)
            if name in taken:
                problems.append(
                    ErrorDetail(loc, f"tool {name!r} clashes with a tool registered on the runtime")
                )
            elif from_client and (problem := self._allowlist.problem(ref)) is not None:
                problems.append(ErrorDetail(loc, problem))
        return problems

    def load_problems(self, spec: AgentSpec) -> list[ErrorDetail]:
        """Load every Python tool ``spec`` names; a problem for each that cannot be.

        Blocking (it imports): call it in a worker thread.
        """
        problems: list[ErrorDetail] = []
        for loc, ref in python_tool_refs(spec):
            try:
                self._load(ref)
            except (InvalidInput, BadRequest) as exc:
                problems.append(ErrorDetail(loc, exc.message))
        return problems

    async def tools_of(self, spec: AgentSpec) -> dict[str, Tool]:
        """The tools ``spec`` itself names (not its sub-agents'), by name.

        Raises:
            InvalidInput: one cannot be loaded any more (its module changed since the
                agent was registered); the turn that needs it fails saying so.
        """
        tools: dict[str, Tool] = {}
        for ref in spec.tools.python:
            tool = self._loaded.get(ref)
            if tool is None:
                try:
                    tool = await trio.to_thread.run_sync(self._load, ref)
                except (InvalidInput, BadRequest) as exc:
                    raise InvalidInput(
                        f"agent {spec.name!r}: tool {python_tool_name(ref)!r} ({ref}) cannot "
                        f"be loaded: {exc.message}"
                    ) from exc
            tools[tool.name] = tool
        return tools

    def _load(self, ref: str) -> Tool:
        """Import ``ref`` (as the allowlist allows it, else as the operator's own) and
        make its tool. Blocking.

        Raises:
            InvalidInput: it cannot be imported, or is not callable. BadRequest: its
                signature cannot be read.
        """
        found = self._loaded.get(ref)
        if found is not None:
            return found
        fn: Any
        if self._allowlist.problem(ref) is None:
            fn = self._allowlist.resolve(ref)
        else:  # registered by the operator, who may name any callable
            fn = load_function(ref)
        tool = make_tool(fn, name=python_tool_name(ref))
        log.info("loaded the Python tool %s from %s", tool.name, ref)
        return self._loaded.setdefault(ref, tool)
