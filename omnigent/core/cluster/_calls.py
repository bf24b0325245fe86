"""Typed calls on live work, and the one place they become JSON to cross a process.

A :class:`Call` is a frozen attrs value naming one thing to do on a session's live work
— hand it a message, interrupt it, answer its elicitation — and what the process that
holds the session's tree does for it (:meth:`Call.run`). In one process a call is
just that: an object whose ``run`` is awaited, with typed arguments and a typed answer
(:class:`~._routing.Router`). Only a call forwarded to another process is serialised,
and only here: :class:`CallWire` turns a call into JSON and back, and its answer (a
value, "moved", or an :class:`~omnigent.errors.OmnigentError`) likewise. The cluster's
command rows (:mod:`._command_rows`) carry its text; any other link between processes
can carry the same text.

On the wire a call is ``{"v": VERSION, "root": ROOT_ID, "args": {...}}`` under its
:attr:`Call.name`, and its answer one of::

    {"v": VERSION, "ok": VALUE}                        the call returned VALUE
    {"v": VERSION, "moved": true}                      the tree is not held there (any more)
    {"v": VERSION, "error": {"code", "message", ...}}  the call raised an OmnigentError

Both sides check what they read: the version (:data:`WIRE_VERSION`; every server on one
database must speak the same), the call's name, and the shape of its arguments and its
answer (the strict wire converter: no coercion, no unknown keys). What fails a check is
refused with an :class:`~omnigent.errors.InternalError` saying which, and logged where
it was read — never guessed at. An error comes back to the caller as the same
:class:`~omnigent.errors.OmnigentError` class (found by its ``code``), so callers and
transports see exactly what a local call would have raised; anything else the holder
hits is logged there and answered as an internal error, never with its details.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from typing import Any, ClassVar, Generic, TypeVar

from ... import errors
from ...errors import ErrorDetail, InternalError, InvalidInput, OmnigentError
from ...model import structure, unstructure
from ._ownership import Moved

__all__ = ["FORWARD_TIMEOUT", "WIRE_VERSION", "Call", "CallWire"]

log = logging.getLogger("omnigent.core.cluster")

WIRE_VERSION = 1
"""The shape of calls and answers between processes; every server must speak the same."""
FORWARD_TIMEOUT = 30.0
"""How long a forwarded call waits for its answer, unless its class says otherwise."""

W = TypeVar("W", contravariant=True)
R = TypeVar("R", covariant=True)
T = TypeVar("T")


class Call(Generic[W, R]):
    """A call on a session's live work, run where the session's tree is held.

    Subclasses are frozen attrs classes: the fields are the call's arguments (their
    JSON form is what crosses processes). Each says on the class:

    * ``name`` — its name on the wire;
    * ``answer`` — the type of its answer, as the wire converter reads it (``None``
      for a call that answers nothing);
    * ``claims`` — it starts work: a tree nobody holds is claimed here to run it;
    * ``settles`` — it ends work: it returns only once a let-go of the tree it caused
      is done, so the caller may start the session's work on any server at once;
    * ``timeout`` — how long a forwarded call waits for its answer (``None``: as long
      as its holder lives — a call that waits on a person).

    ``W`` is what the holder runs calls against (the runtime's live work); ``R`` the
    answer.
    """

    name: ClassVar[str]
    answer: ClassVar[Any]
    claims: ClassVar[bool] = False
    settles: ClassVar[bool] = False
    timeout: ClassVar[float | None] = FORWARD_TIMEOUT

    async def run(self, here: W, session_id: str) -> R:
        """Do it, on the process that holds the session's tree."""
        raise NotImplementedError

    def unheld(self) -> R:
        """The answer when nobody holds the tree (for a call that claims nothing:
        there is no live work for it to act on)."""
        raise NotImplementedError


class CallWire:
    """Calls and their answers to and from JSON text (see the module docstring).

    Args:
        calls: every call class this wire carries (their names must differ).
    """

    def __init__(self, calls: Iterable[type[Call[Any, Any]]]) -> None:
        self._calls: dict[str, type[Call[Any, Any]]] = {}
        for cls in calls:
            if cls.name in self._calls:
                raise ValueError(f"two calls are named {cls.name!r}")
            self._calls[cls.name] = cls

    def __contains__(self, name: str) -> bool:
        return name in self._calls

    # -- calls ---------------------------------------------------------------------------

    def encode_call(self, call: Call[Any, Any], root_id: str) -> str:
        """A call's JSON text (sent under ``call.name``)."""
        args = unstructure(call, type(call))
        return json.dumps({"v": WIRE_VERSION, "root": root_id, "args": args})

    def decode_call(self, name: str, text: str) -> tuple[Call[Any, Any], str]:
        """The call ``name`` whose JSON text is ``text``, and its tree's root id.

        Raises:
            InternalError: another version of the wire, an unknown name, or arguments
            not of the call's shape (logged here).
        """
        body = self._read(text, f"a {name!r} call")
        cls = self._calls.get(name)
        if cls is None:
            raise self._refuse(f"an unknown call {name!r}")
        root = body.get("root")
        if not isinstance(root, str):
            raise self._refuse(f"a {name!r} call without its tree's root")
        try:
            call = structure(body.get("args"), cls)
        except InvalidInput as exc:
            raise self._refuse(f"a {name!r} call of the wrong shape ({exc.message})") from None
        return call, root

    # -- answers -------------------------------------------------------------------------

    def encode_value(self, call: Call[Any, Any], value: Any) -> str:
        """The JSON text of ``value``, the answer ``call`` returned."""
        kind = type(call).answer
        ok = None if kind is None else unstructure(value, kind)
        return json.dumps({"v": WIRE_VERSION, "ok": ok})

    @staticmethod
    def encode_moved() -> str:
        """The answer of a process that does not hold the call's tree."""
        return json.dumps({"v": WIRE_VERSION, "moved": True})

    @staticmethod
    def encode_error(exc: OmnigentError) -> str:
        """The answer of a call that raised ``exc``."""
        body: dict[str, Any] = {"code": exc.code, "message": exc.message, "status": exc.status}
        if isinstance(exc, InvalidInput):
            body["details"] = [{"loc": d.loc, "msg": d.msg} for d in exc.details]
        return json.dumps({"v": WIRE_VERSION, "error": body})

    def decode_answer(self, call: Call[Any, T], text: str) -> T:
        """The value an answer to ``call`` carries.

        Raises:
            Moved: the holder does not hold the tree. OmnigentError: what the holder's
            call raised. InternalError: another version of the wire, or an answer not
            of the call's shape (logged here).
        """
        reply = self._read(text, f"the answer to a {call.name!r} call")
        if "ok" in reply:
            kind = type(call).answer
            if kind is None:
                return None  # type: ignore[return-value]  # T is None for such a call
            try:
                value: T = structure(reply["ok"], kind)
            except InvalidInput as exc:
                raise self._refuse(
                    f"an answer to a {call.name!r} call of the wrong shape ({exc.message})"
                ) from None
            return value
        if reply.get("moved") is True:
            raise Moved()
        error = reply.get("error")
        if not isinstance(error, dict):
            raise self._refuse(f"an answer to a {call.name!r} call that says nothing")
        raise _rebuilt(error)

    # -- checks --------------------------------------------------------------------------

    def _read(self, text: str, what: str) -> dict[str, Any]:
        try:
            body = json.loads(text)
        except ValueError:
            raise self._refuse(f"{what} that is not JSON: {text[:200]!r}") from None
        if not isinstance(body, dict):
            raise self._refuse(f"{what} that is not an object")
        version = body.get("v")
        if version != WIRE_VERSION:
            raise self._refuse(
                f"{what} of wire version {version!r}, where this server speaks "
                f"{WIRE_VERSION}: run one omnigent version on every server"
            )
        return body

    @staticmethod
    def _refuse(what: str) -> InternalError:
        log.error("another process sent %s", what)
        return InternalError(f"another server sent {what}")


def _rebuilt(body: dict[str, Any]) -> OmnigentError:
    """The holder's error as its own class (by ``code``), with its message."""
    code = str(body.get("code", "internal_error"))
    message = str(body.get("message", "another server failed"))
    cls = _classes().get(code, InternalError)
    exc: OmnigentError = cls.__new__(cls)
    OmnigentError.__init__(exc, message)
    if isinstance(exc, InvalidInput):
        details = body.get("details") or []
        exc.details = tuple(ErrorDetail(str(d["loc"]), str(d["msg"])) for d in details)
    return exc


def _classes() -> dict[str, type[OmnigentError]]:
    found: dict[str, type[OmnigentError]] = {}
    pending: list[type[OmnigentError]] = [OmnigentError]
    while pending:
        cls = pending.pop()
        found.setdefault(cls.code, cls)
        pending.extend(cls.__subclasses__())
    # Only the public tree: a code is a contract, a private subclass is not.
    return {code: cls for code, cls in found.items() if getattr(errors, cls.__name__, None)}
