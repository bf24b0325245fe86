"""Function policies: loading a ``function`` reference, calling it, reading its answer.

A ``function`` policy is the only foreign code the policy engine runs, and nearly all
that can go wrong with a policy goes wrong here: the reference does not import, the
function raises, or it answers in a shape the engine cannot read. This module owns that
part. :class:`FunctionPolicies` resolves each reference at most once (remembering a
failure too), calls the function (a sync one in a worker thread, an async one on the
event loop), reads its answer strictly, and turns every failure into a fail-closed DENY.
:mod:`omnigent.core.tools._policies` keeps the engine, the value types and the combination
rules; the contract is in its docstring.

This module answers in plain :class:`Answer` values, not ``Verdict``: ``policies``
imports it, so it imports nothing from ``policies`` at run time (only names for the
type checker), and the engine names the policy when it wraps an answer in a verdict.

Error handling: :func:`load_function` raises :class:`~omnigent.errors.InvalidInput`;
:meth:`FunctionPolicies.run` raises nothing but cancellation.

Cancellation: :meth:`FunctionPolicies.run` propagates ``trio.Cancelled``. An async
function is cancelled with it; a sync one in a thread cannot be interrupted, so
cancellation waits a short grace for it to return, then leaves it (see
:mod:`omnigent.core.work._threads`).
"""

from __future__ import annotations

import importlib
import inspect
import json
import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final, TypeAlias

import attrs
import trio

from ...errors import InvalidInput
from ..work import BlockingCalls

if TYPE_CHECKING:
    from ._policies import PolicyAction, PolicyEvent

__all__ = [
    "Answer",
    "FunctionPolicies",
    "PolicyFunction",
    "load_function",
    "withheld_marker",
]

# The public module's name: logging configured for policies keeps seeing these records.
log = logging.getLogger("omnigent.core.tools")

PolicyFunction: TypeAlias = Callable[..., Any]

_ACTIONS: Final[frozenset[str]] = frozenset({"ALLOW", "DENY", "ASK", "UNSPECIFIED"})
_ANSWER_KEYS: Final[frozenset[str]] = frozenset({"result", "reason", "data"})
_MAX_ERROR_TEXT: Final = 300


def withheld_marker(policy_name: str | None) -> str:
    """What stands in for a tool output that a DENY withholds at the result phase."""
    return f"[result withheld by policy {policy_name or 'unknown'}]"


def _failed_marker(policy_name: str) -> str:
    return f"[result withheld: policy {policy_name} failed]"


@attrs.frozen
class Answer:
    """What one function policy said; the engine adds the policy's name."""

    action: PolicyAction
    reason: str | None = None
    data: Any = attrs.field(default=None, hash=False)


# -- function references -------------------------------------------------------------


def load_function(ref: str) -> PolicyFunction:
    """Import the callable named by ``ref`` (``"pkg.mod:attr"`` or ``"pkg.mod.attr"``).

    After a colon, ``attr`` may be dotted (``pkg.mod:Class.method``). In the dotted
    form the longest importable module prefix is used.

    Raises:
        InvalidInput: the module or attribute does not exist, the module fails to
            import, or the object is not callable; the cause is chained.
    """
    module_name, colon, attr_path = ref.partition(":")
    if colon:
        candidates = [(module_name, attr_path.split("."))]
    else:
        parts = ref.split(".")
        candidates = [(".".join(parts[:i]), parts[i:]) for i in range(len(parts) - 1, 0, -1)]
    if not all(name and all(attrs_) for name, attrs_ in candidates) or not candidates:
        raise InvalidInput(f"bad function reference {ref!r}: use 'pkg.mod:attr'")
    for name, attr_names in candidates:
        try:
            target: Any = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            # Only "this prefix is not a module" moves on; a missing dependency of a
            # module that does exist is that module's error, reported as such.
            missing = exc.name or ""
            if not colon and (name == missing or name.startswith(f"{missing}.")):
                continue
            raise InvalidInput(f"cannot load {ref!r}: {exc}") from exc
        except (Exception, SystemExit) as exc:  # an import may call sys.exit
            raise InvalidInput(f"cannot load {ref!r}: importing {name} raised {exc!r}") from exc
        for attr in attr_names:
            try:
                target = getattr(target, attr)
            except AttributeError as exc:
                raise InvalidInput(f"cannot load {ref!r}: {name} has no {attr!r}") from exc
        if not callable(target):
            raise InvalidInput(f"cannot load {ref!r}: {type(target).__name__} is not callable")
        return target  # type: ignore[no-any-return]
    raise InvalidInput(f"cannot load {ref!r}: no module named {ref.split('.')[0]!r}")


def _is_async(fn: PolicyFunction) -> bool:
    # An object whose ``__call__`` is async counts too.
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(type(fn).__call__)


# -- answers -------------------------------------------------------------------------


class _Broken(Exception):
    """A function policy cannot be loaded, or returned an answer the engine cannot read.

    ``summary`` is a fixed phrase, safe to show where the message might quote output.
    """

    def __init__(self, message: str, summary: str = "invalid answer") -> None:
        super().__init__(message)
        self.summary = summary


def _action(value: Any) -> PolicyAction:
    if not isinstance(value, str):
        raise _Broken(f"result must be a string, got {type(value).__name__}")
    name = value.upper().removeprefix("POLICY_ACTION_")
    if name not in _ACTIONS:
        raise _Broken(f"unknown result {value!r} (expected ALLOW, DENY, ASK or UNSPECIFIED)")
    return name  # type: ignore[return-value]


def _read_answer(policy_name: str, raw: Any, *, at_result: bool) -> Answer:
    # ``None`` too: a function that falls off its end has said nothing, and silence
    # must not let a tool run (an "UNSPECIFIED" answer says "no opinion" on purpose).
    if not isinstance(raw, Mapping):
        raise _Broken(f"returned {type(raw).__name__}, expected a mapping with a 'result'")
    if "result" not in raw:
        raise _Broken("answer has no 'result'")
    extra = sorted(map(str, set(raw) - _ANSWER_KEYS))
    if extra:
        raise _Broken(f"answer has unknown keys {extra} (expected result, reason, data)")
    action = _action(raw["result"])
    reason = raw.get("reason")
    if reason is not None and not isinstance(reason, str):
        raise _Broken(f"reason must be a string, got {type(reason).__name__}")
    data = raw.get("data")
    try:
        json.dumps(data)
    except (TypeError, ValueError) as exc:
        raise _Broken(f"data is not JSON-serialisable: {exc}") from exc
    if action == "DENY" and at_result and data is None:
        data = withheld_marker(policy_name)
    return Answer(action, reason, data)


class _Raised(Exception):
    """A ``BaseException`` (``SystemExit``, ``KeyboardInterrupt``) a policy raised in its
    thread, carried back as an ordinary failure."""

    def __init__(self, raised: BaseException) -> None:
        super().__init__(f"raised {type(raised).__name__}: {raised}".rstrip(": "))
        self.raised = raised


def _failure(policy_name: str, exc: BaseException, *, at_result: bool) -> Answer:
    if at_result:
        # The message of an exception may quote the output it was withholding.
        raised = exc.raised if isinstance(exc, _Raised) else exc
        summary = exc.summary if isinstance(exc, _Broken) else type(raised).__name__
        reason = f"policy {policy_name} failed: {summary}"
        return Answer("DENY", reason, data=_failed_marker(policy_name))
    detail = str(exc) or type(exc).__name__
    if len(detail) > _MAX_ERROR_TEXT:
        detail = detail[:_MAX_ERROR_TEXT] + "…"
    return Answer("DENY", f"policy {policy_name} failed: {detail}")


# -- resolving and calling -----------------------------------------------------------


def _call_in_thread(fn: PolicyFunction, event: dict[str, Any]) -> tuple[Any, BaseException | None]:
    """Call a sync policy; runs in a worker thread.

    Everything it raises is caught *here*, in its own thread: a ``SystemExit`` (from
    ``sys.exit``) or a ``KeyboardInterrupt`` re-raised in the runtime's task would
    pass every ``except Exception`` on its way and stop the server. No trio
    cancellation is delivered inside a worker thread, so nothing is swallowed that
    belongs to the runtime.
    """
    try:
        return fn(event), None
    except BaseException as exc:  # see above: a worker thread
        return None, exc


async def _call(
    fn: PolicyFunction, event: dict[str, Any], threads: BlockingCalls, what: str
) -> Any:
    """Call a policy function (sync in a worker thread, async on the event loop).

    A sync one runs through ``threads``, so a shutdown past its grace can abandon it.

    Raises:
        Exception: what the function raised; a ``BaseException`` from its thread is
            wrapped so that it is one. An async function's ``SystemExit`` comes back
            as itself (the caller treats it as a failure); its ``KeyboardInterrupt``
            propagates, since on the event loop it may be the user's Ctrl-C.
    """
    if _is_async(fn):
        raw = await fn(event)
    else:
        raw, raised = await threads.run(_call_in_thread, fn, event, what=what)
        if raised is not None:
            if isinstance(raised, Exception):
                raise raised
            raise _Raised(raised) from raised
    if inspect.isawaitable(raw):
        raw = await raw
    return raw


class FunctionPolicies:
    """The function references of one engine, each resolved at most once, and their calls.

    Args:
        resolve: turns a reference into a callable. Called at most once per reference,
            from a worker thread when called by :meth:`run`; a failure is remembered too.
    """

    def __init__(
        self, resolve: Callable[[str], PolicyFunction], threads: BlockingCalls | None = None
    ) -> None:
        self._resolve = resolve
        self._threads = threads or BlockingCalls()
        self._functions: dict[str, PolicyFunction | Exception] = {}

    def problem(self, ref: str) -> Exception | None:
        """Resolve ``ref`` now and say why it cannot be used (None: it can).

        This imports modules and so blocks.
        """
        found = self._functions.get(ref)
        if found is None:
            found = self._functions[ref] = self._load(ref)
        return found if isinstance(found, Exception) else None

    async def run(
        self, policy_name: str, ref: str, event: PolicyEvent, *, at_result: bool
    ) -> Answer:
        """Call the function ``ref`` names on ``event`` and read its answer.

        ``at_result`` says the event is a tool result: a DENY there withholds the
        output, and a failure's reason gives only a fixed summary of the error.

        Returns:
            The function's answer, or a DENY if it cannot be loaded, raises, or
            answers in a shape that cannot be read (the error is logged).

        Raises:
            trio.Cancelled: only.
        """
        try:
            fn = await self._function(ref)
            raw = await _call(fn, event.to_dict(), self._threads, f"policy {policy_name!r}")
            return _read_answer(policy_name, raw, at_result=at_result)
        except trio.Cancelled:
            raise
        except _Broken as exc:
            # The message is the whole story here; a traceback would only point at us.
            log.error("policy %r failed: %s", policy_name, exc)  # noqa: TRY400
            return _failure(policy_name, exc, at_result=at_result)
        except (Exception, SystemExit) as exc:
            log.exception("policy %r failed", policy_name)
            failure = _Raised(exc) if isinstance(exc, SystemExit) else exc
            return _failure(policy_name, failure, at_result=at_result)

    async def _function(self, ref: str) -> PolicyFunction:
        found = self._functions.get(ref)
        if found is None:
            found = await trio.to_thread.run_sync(self._load, ref)
            found = self._functions.setdefault(ref, found)
        if isinstance(found, Exception):
            raise _Broken(str(found), "cannot load the function")
        return found

    def _load(self, ref: str) -> PolicyFunction | Exception:
        # Runs in a worker thread (``problem`` is documented to be called from one):
        # whatever an import raises there, SystemExit included, is this reference's
        # failure and must not travel on into the runtime.
        try:
            fn = self._resolve(ref)
        except BaseException as exc:  # a worker thread: see above
            log.exception("cannot resolve policy function %r", ref)
            return exc if isinstance(exc, Exception) else _Raised(exc)
        if not callable(fn):
            log.error("policy function %r resolved to a %s", ref, type(fn).__name__)
            return TypeError(f"{ref!r} resolved to a {type(fn).__name__}, not a callable")
        return fn
