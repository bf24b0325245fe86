"""Tool policies: a pure engine that answers ALLOW, DENY, ASK or UNSPECIFIED.

The engine does no I/O of its own; the only foreign code it runs is a ``function``
policy. The session's turn asks it about each tool call (``PHASE_TOOL_CALL``, before the
tool runs) and each tool result (``PHASE_TOOL_RESULT``, before the model sees it);
``POST /sessions/{id}/policies/evaluate`` asks it on behalf of an external harness.

This module holds the verdict, the tool policies and the combination rules. The event
and its two wire spellings are in :mod:`omnigent.core.tools._policy_event`; loading, calling
and reading a ``function`` policy (and its fail-closed verdicts) in
:mod:`omnigent.core.tools._policy_functions`, which is where foreign code can go wrong; which
functions may run at all in :mod:`omnigent.core.tools._policy_allowlist`. The names a caller
needs are re-exported from here.

Contract (``docs/policies.md`` has the long form):

* **Tool policies** (``deny_tools``, ``ask_tools``, ``allow_tools``) apply at
  ``PHASE_TOOL_CALL`` only, when ``data.tool_name`` matches one of ``tools``
  (:func:`fnmatch.fnmatchcase` patterns: ``*``, ``sys_os_*``, ``mcp__fs__*``). They
  answer DENY (reason: the spec's ``reason`` or ``"tool <name> is denied"``), ASK
  (``reason`` or ``"approve <name>?"``) or ALLOW.
* **Function policies** apply at both phases. The function gets the original
  omnigent's event (:meth:`PolicyEvent.to_dict`, a deep copy: ``{"type": "tool_call" |
  "tool_result", "data": {"name", "arguments", "result"?}, "request_data",
  "context"}``) and answers ``{"result": "ALLOW"|"DENY"|"ASK"|"UNSPECIFIED",
  "reason"?: str, "data"?: JSON}``; ``POLICY_ACTION_*`` names and any letter case are
  accepted. Anything else (``None`` included) is a DENY. A sync function runs in a
  worker thread, an async one on the event loop.
* **Result phase.** ``data`` on an ALLOW (or ASK) replaces the tool output; later
  policies see the replaced output as ``data.tool_output``, so a redaction cannot be
  undone by a later policy. A DENY withholds the output: the verdict's ``data`` is a
  marker such as ``"[result withheld by policy <name>]"``. The engine never encodes
  ``data``: the caller turns a non-string replacement into JSON text
  (the runtime's tool dispatch does it with ``json.dumps``; over HTTP, ``data`` is sent
  as a JSON value and the harness encodes it).
* **Combination.** Agent policies in order, then server defaults. The first DENY wins
  at once (later policies are not run). Otherwise the first ASK, else ALLOW if any
  policy allowed, else UNSPECIFIED — unless the engine has a fallback (the safe
  defaults), which then answers if it has an opinion. ``data`` is the last one any ALLOW/ASK gave;
  ``policy_name`` names the deciding policy (for ALLOW: the last one that gave ``data``,
  else the first that allowed).
* **Fail closed.** A function that raises (anything: ``SystemExit`` and, in its worker
  thread, ``KeyboardInterrupt`` included), returns a wrong shape or an unknown result,
  or whose reference cannot be loaded or is not allowed, answers DENY with reason
  ``"policy <name> failed: <error>"`` (the traceback is logged). At the result phase the
  output is withheld (``data = "[result withheld: policy <name> failed]"``) and the
  reason gives only the error's type (or ``invalid answer`` / ``cannot load the
  function``), since an exception message may quote the output.

Error handling: :func:`load_function` and :func:`parse_policy_event` raise
:class:`~omnigent.errors.InvalidInput`; :meth:`PolicyEngine.evaluate` raises nothing but
cancellation. A bad reference is reported at evaluation time (so one bad policy cannot
stop a session from being created) and by :meth:`PolicyEngine.check`.

Cancellation: :meth:`PolicyEngine.evaluate` propagates ``trio.Cancelled``. An async
function policy is cancelled with it; a sync one in a thread cannot be interrupted, so
cancellation waits for it to return.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Sequence
from typing import Any, Final, Literal, TypeAlias

import attrs

from ...errors import ErrorDetail, InternalError
from ...spec import PolicySpec
from ..work import BlockingCalls
from ._policy_event import (
    PHASE_TOOL_CALL,
    PHASE_TOOL_RESULT,
    PolicyEvent,
    PolicyPhase,
    parse_policy_event,
)
from ._policy_functions import FunctionPolicies, PolicyFunction, load_function, withheld_marker

__all__ = [
    "PHASE_TOOL_CALL",
    "PHASE_TOOL_RESULT",
    "PolicyAction",
    "PolicyEngine",
    "PolicyEvent",
    "PolicyFunction",
    "PolicyPhase",
    "Verdict",
    "load_function",
    "parse_policy_event",
]

PolicyAction: TypeAlias = Literal["ALLOW", "DENY", "ASK", "UNSPECIFIED"]


@attrs.frozen
class Verdict:
    """The engine's answer. ``policy_name`` is the deciding policy (None: nobody spoke).

    ``data`` at ``PHASE_TOOL_RESULT`` is the replacement output (ALLOW, ASK) or the
    withheld-marker (DENY); at ``PHASE_TOOL_CALL`` it is passed through to the caller.
    """

    action: PolicyAction
    policy_name: str | None = None
    reason: str | None = None
    data: Any = attrs.field(default=None, hash=False)

    def wire(self) -> dict[str, Any]:
        """The HTTP answer: ``{"result": "POLICY_ACTION_…", "reason"?, "data"?}``.

        Raises:
            InternalError: for an ASK, which the caller must resolve first
                (:meth:`resolve`) — ASK is never sent on the wire.
        """
        if self.action == "ASK":
            raise InternalError("an ASK verdict must be resolved before it is answered")
        answer: dict[str, Any] = {"result": f"POLICY_ACTION_{self.action}"}
        if self.reason is not None:
            answer["reason"] = self.reason
        if self.data is not None:
            answer["data"] = self.data
        return answer

    @property
    def elicitation_message(self) -> str:
        """The approval prompt for an ASK: ``"<policy name>: <reason>"``."""
        return f"{self.policy_name}: {self.reason or 'approve?'}"

    def resolve(self, accepted: bool, event: PolicyEvent) -> Verdict:
        """Turn an ASK into ALLOW (``accepted``) or DENY, once the user has answered.

        A declined result-phase ASK withholds the output, like any DENY there.
        """
        if self.action != "ASK":
            raise InternalError(f"only an ASK verdict can be resolved, not {self.action}")
        if accepted:
            return attrs.evolve(self, action="ALLOW")
        reason = f"declined: {self.reason}" if self.reason else "declined"
        data = withheld_marker(self.policy_name) if event.type == PHASE_TOOL_RESULT else None
        return Verdict("DENY", self.policy_name, reason, data)


_UNSPECIFIED: Final = Verdict("UNSPECIFIED")


def _tool_verdict(spec: PolicySpec, event: PolicyEvent) -> Verdict:
    name = event.tool_name
    if event.type != PHASE_TOOL_CALL or not any(
        fnmatch.fnmatchcase(name, pattern) for pattern in spec.tools
    ):
        return _UNSPECIFIED
    if spec.type == "deny_tools":
        return Verdict("DENY", spec.name, spec.reason or f"tool {name} is denied")
    if spec.type == "ask_tools":
        return Verdict("ASK", spec.name, spec.reason or f"approve {name}?")
    return Verdict("ALLOW", spec.name, spec.reason)


@attrs.define
class _Tally:
    """The running combination of one evaluation's non-DENY verdicts."""

    event: PolicyEvent
    ask: Verdict | None = None
    allow: Verdict | None = None
    data_from: Verdict | None = None

    def add(self, verdict: Verdict) -> None:
        if verdict.action == "ASK" and self.ask is None:
            self.ask = verdict
        elif verdict.action == "ALLOW" and self.allow is None:
            self.allow = verdict
        if verdict.action in ("ALLOW", "ASK") and verdict.data is not None:
            self.data_from = verdict
            if self.event.type == PHASE_TOOL_RESULT:
                data = {**self.event.data, "tool_output": verdict.data}
                self.event = attrs.evolve(self.event, data=data)

    def verdict(self) -> Verdict:
        data = None if self.data_from is None else self.data_from.data
        if self.ask is not None:
            return attrs.evolve(self.ask, data=data)
        if self.data_from is not None and self.data_from.action == "ALLOW":
            return self.data_from
        if self.allow is not None:
            return attrs.evolve(self.allow, data=data)
        return _UNSPECIFIED


# -- the engine ----------------------------------------------------------------------


class PolicyEngine:
    """Evaluates one agent's policies, then the server's defaults, against events.

    Args:
        policies: the agent's policies, in order.
        defaults: server-wide policies evaluated after the agent's.
        resolve_function: turns a ``function`` reference into a callable
            (default :func:`load_function`). Called at most once per reference, in a
            worker thread since imports block; a failure is remembered too.
        threads: where sync policy functions run (the runtime's, so a shutdown can
            abandon one that hangs).
        fallback: asked last, only when every policy answered UNSPECIFIED (the safe
            defaults, :mod:`._safe_defaults`): its verdict, if any, is the answer.
    """

    def __init__(
        self,
        policies: Sequence[PolicySpec],
        *,
        defaults: Sequence[PolicySpec] = (),
        resolve_function: Callable[[str], PolicyFunction] | None = None,
        threads: BlockingCalls | None = None,
        fallback: Callable[[PolicyEvent], Verdict | None] | None = None,
    ) -> None:
        self._agent_policies = tuple(policies)
        self._defaults = tuple(defaults)
        self._fallback = fallback
        self._functions = FunctionPolicies(resolve_function or load_function, threads)

    @property
    def policies(self) -> tuple[PolicySpec, ...]:
        """Every policy in evaluation order: the agent's, then the defaults."""
        return self._agent_policies + self._defaults

    def always_denies(self, tool_name: str) -> bool:
        """Whether every call of ``tool_name`` is refused, whatever its arguments.

        True when a ``deny_tools`` policy (the agent's or a default) matches the name:
        the first DENY wins and nothing overrides it, so such a tool is not offered to
        the model at all.
        """
        return any(
            spec.type == "deny_tools"
            and any(fnmatch.fnmatchcase(tool_name, pattern) for pattern in spec.tools)
            for spec in self.policies
        )

    def check(self) -> list[ErrorDetail]:
        """Resolve every function reference now; one problem per one that fails.

        ``loc`` is ``policies[i].function`` or ``defaults[i].function``. This imports
        modules and so blocks: from async code, run it with ``trio.to_thread.run_sync``.
        """
        problems = []
        groups = (("policies", self._agent_policies), ("defaults", self._defaults))
        for where, specs in groups:
            for index, spec in enumerate(specs):
                if spec.function is None:
                    continue
                problem = self._functions.problem(spec.function)
                if problem is not None:
                    problems.append(ErrorDetail(f"{where}[{index}].function", str(problem)))
        return problems

    async def evaluate(self, event: PolicyEvent) -> Verdict:
        """Run the policies against ``event`` and combine their verdicts.

        Returns:
            The combined :class:`Verdict` (see the module docstring for the rules).

        Raises:
            trio.Cancelled: only; every policy failure becomes a fail-closed DENY.
        """
        tally = _Tally(event)
        for spec in self.policies:
            if spec.type == "function":
                verdict = await self._run_function(spec, tally.event)
            else:
                verdict = _tool_verdict(spec, tally.event)
            if verdict.action == "DENY":
                return verdict
            tally.add(verdict)
        combined = tally.verdict()
        if combined.action == "UNSPECIFIED" and self._fallback is not None:
            return self._fallback(event) or combined
        return combined

    async def _run_function(self, spec: PolicySpec, event: PolicyEvent) -> Verdict:
        assert spec.function is not None  # PolicySpec requires it for this type
        at_result = event.type == PHASE_TOOL_RESULT
        answer = await self._functions.run(spec.name, spec.function, event, at_result=at_result)
        return Verdict(answer.action, spec.name, answer.reason, answer.data)
