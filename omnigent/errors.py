"""The omnigent exception tree.

Every error omnigent raises on purpose descends from :class:`OmnigentError`. Each
class carries a ``code`` slug and the HTTP ``status`` a transport answers with, and
builds its own message from typed fields. Misuse (bad input, unknown ids), external
failure (a model endpoint, a harness) and internal bugs are different branches, so a
caller can tell "fix your request" from "try again later" from "report a bug"::

    OmnigentError
    ├── InvalidInput (ValueError)            422 invalid_request
    │   ├── SpecError                        422 invalid_spec
    │   └── ConfigError                      422 invalid_config
    ├── BadRequest (ValueError)              400 bad_request
    │   └── UnknownHarness                   400 unknown_harness
    ├── NotFound (LookupError)               404 not_found
    │   ├── AgentNotFound                    404 agent_not_found
    │   ├── SessionNotFound                  404 session_not_found
    │   ├── FileNotFound                     404 file_not_found
    │   ├── ResourceNotFound                 404 resource_not_found
    │   └── ToolCallNotFound                 404 tool_call_not_found
    ├── Unauthorized (PermissionError)       401 unauthorized
    ├── Forbidden (PermissionError)          403 forbidden
    │   └── CrossSiteRequest                 403 cross_site_request
    ├── Conflict                             409 conflict
    │   ├── StoreBusy                        409 store_busy
    │   ├── SessionElsewhere                 409 session_elsewhere
    │   └── RunnerNameTaken                  409 runner_name_taken
    ├── PayloadTooLarge (ValueError)         413 request_entity_too_large
    ├── UnsupportedMediaType (ValueError)    415 unsupported_media_type
    ├── MisdirectedRequest                   421 misdirected_request
    ├── RuntimeClosed (RuntimeError)         503 runtime_closed
    ├── StoreUnavailable                     503 store_unavailable
    │   └── StoreTimeout                     503 store_timeout
    ├── OwnerUnavailable                     503 owner_unavailable
    ├── EventLogFull                         503 event_log_full
    ├── SandboxUnavailable                   503 sandbox_unavailable
    ├── BudgetExceeded                       402 budget_exceeded
    ├── ServerBusy                           503 server_busy
    ├── HarnessError                         502 harness_error
    │   ├── ModelEndpointError               502 model_endpoint_error
    │   ├── OutputLimitReached               502 max_tokens
    │   ├── ModelRefused                     502 refusal
    │   ├── StepLimitReached                 502 max_steps
    │   ├── HarnessUnavailable               503 harness_unavailable
    │   ├── RunnerOffline                    503 runner_offline
    │   ├── RunnerDisconnected               503 runner_disconnected
    │   └── RunnerFailed                     502 (the runner's code)
    └── InternalError (RuntimeError)         500 internal_error
        └── SpecUnresolved                   500 internal_error

Foreign errors are translated where they enter (``raise X(...) from exc``), so the
original cause stays on ``__cause__`` for the log while the message stays safe to show.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

__all__ = [
    "AgentNotFound",
    "BadRequest",
    "BudgetExceeded",
    "ConfigError",
    "Conflict",
    "CrossSiteRequest",
    "ErrorDetail",
    "EventLogFull",
    "FileNotFound",
    "Forbidden",
    "HarnessError",
    "HarnessUnavailable",
    "InternalError",
    "InvalidInput",
    "MisdirectedRequest",
    "ModelEndpointError",
    "ModelRefused",
    "NotFound",
    "OmnigentError",
    "OutputLimitReached",
    "OwnerUnavailable",
    "PayloadTooLarge",
    "ResourceNotFound",
    "RunnerDisconnected",
    "RunnerFailed",
    "RunnerNameTaken",
    "RunnerOffline",
    "RuntimeClosed",
    "SandboxUnavailable",
    "ServerBusy",
    "SessionElsewhere",
    "SessionNotFound",
    "SpecError",
    "SpecUnresolved",
    "StepLimitReached",
    "StoreBusy",
    "StoreTimeout",
    "StoreUnavailable",
    "ToolCallNotFound",
    "Unauthorized",
    "UnknownHarness",
    "UnsupportedMediaType",
]


@attrs.frozen
class ErrorDetail:
    """One field that failed validation.

    ``loc`` is a dotted path into the input (``data.content[0].type``); ``msg`` says
    what is wrong with it.
    """

    loc: str
    msg: str


class OmnigentError(Exception):
    """Base of every deliberate omnigent error.

    Attributes:
        code: a stable slug a client can switch on.
        status: the HTTP status a transport answers with.
        message: a sentence that is safe to show to the caller.
    """

    code: str = "error"
    status: int = 500

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidInput(OmnigentError, ValueError):
    """Input failed validation; ``details`` names every offending field."""

    code = "invalid_request"
    status = 422

    def __init__(self, message: str, details: Sequence[ErrorDetail] = ()) -> None:
        super().__init__(message)
        self.details: tuple[ErrorDetail, ...] = tuple(details)

    @classmethod
    def at(cls, loc: str, msg: str) -> InvalidInput:
        """An error about exactly one field."""
        return cls(f"{msg} @ {loc}", [ErrorDetail(loc, msg)])


class SpecError(InvalidInput):
    """An agent spec is malformed: unknown key, wrong type, bad name."""

    code = "invalid_spec"


class ConfigError(InvalidInput):
    """A configuration file (``$OMNIGENT_HOME/config.yaml``) is malformed."""

    code = "invalid_config"


class BadRequest(OmnigentError, ValueError):
    """The request is well-formed but cannot be honoured as asked."""

    code = "bad_request"
    status = 400


class UnknownHarness(BadRequest):
    """No harness is registered under this name or alias."""

    code = "unknown_harness"

    def __init__(self, name: str, known: Sequence[str] = ()) -> None:
        hint = f" (known: {', '.join(sorted(known))})" if known else ""
        super().__init__(f"unknown harness {name!r}{hint}")
        self.name = name


class NotFound(OmnigentError, LookupError):
    """An id that names nothing (or nothing the caller may see)."""

    code = "not_found"
    status = 404
    kind = "object"

    def __init__(self, object_id: str, message: str | None = None) -> None:
        super().__init__(message or f"{self.kind} {object_id!r} not found")
        self.object_id = object_id


class AgentNotFound(NotFound):
    code = "agent_not_found"
    kind = "agent"


class SessionNotFound(NotFound):
    code = "session_not_found"
    kind = "session"


class FileNotFound(NotFound):
    code = "file_not_found"
    kind = "file"


class ResourceNotFound(NotFound):
    """No live resource (a terminal) of the session has this id."""

    code = "resource_not_found"
    kind = "resource"


class ToolCallNotFound(NotFound):
    """No held tool call of the session has this id (or it is done and let go)."""

    code = "tool_call_not_found"
    kind = "tool call"


class Forbidden(OmnigentError, PermissionError):
    """The caller may see the object but not do this to it."""

    code = "forbidden"
    status = 403


class CrossSiteRequest(Forbidden):
    """A browser sent this on behalf of another site (a foreign ``Origin``, or
    ``Sec-Fetch-Site: cross-site``), which the server does not admit."""

    code = "cross_site_request"


class Conflict(OmnigentError):
    """The request clashes with the current state of the object."""

    code = "conflict"
    status = 409


class StoreBusy(Conflict):
    """Another runtime owns the database; two would corrupt each other's logs.

    Raised when opening a database another runtime owns, and by a records-only
    runtime (``open_runtime(..., exclusive=False)``) for any call that would publish
    an event, delete, or run work: those belong to the owner.
    """

    code = "store_busy"

    def __init__(self, path: str, owner: str | None = None, *, records_only: bool = False) -> None:
        by = f" (owned by {owner})" if owner else ""
        if records_only:
            message = (
                f"this runtime opened {path} for records only{by}: turns, events and "
                "deletes belong to the runtime that owns it"
            )
        else:
            message = (
                f"the database {path} is in use by another omnigent runtime{by} "
                "(an `omnigent serve`?); stop it or choose another --db"
            )
        super().__init__(message)
        self.path = path
        self.owner = owner


class PayloadTooLarge(OmnigentError, ValueError):
    """The body is larger than this route takes."""

    code = "request_entity_too_large"
    status = 413


class UnsupportedMediaType(OmnigentError, ValueError):
    """The body's ``Content-Type`` is not one this route reads; nothing was parsed."""

    code = "unsupported_media_type"
    status = 415


class MisdirectedRequest(OmnigentError):
    """The ``Host`` header names neither the server's address nor an allowed host
    (a DNS-rebinding page, or a proxy pointed at the wrong server)."""

    code = "misdirected_request"
    status = 421


class SessionElsewhere(Conflict):
    """The session's live work runs on another server sharing the database.

    Only with several servers on one PostgreSQL database, for what cannot be relayed
    to the owner (a held ``/mcp`` tool call lives in its process).
    """

    code = "session_elsewhere"

    def __init__(self, session_id: str, server: str) -> None:
        super().__init__(
            f"session {session_id!r} runs on the server {server!r}; "
            "this request must be sent to that server"
        )
        self.session_id = session_id
        self.server = server


class Unauthorized(OmnigentError, PermissionError):
    """The caller has no identity while the server requires one (``--auth header``)."""

    code = "unauthorized"
    status = 401

    def __init__(self, message: str = "missing identity") -> None:
        super().__init__(message)


class RuntimeClosed(OmnigentError, RuntimeError):
    """The runtime is shutting down or closed; no new work is accepted."""

    code = "runtime_closed"
    status = 503

    def __init__(self, message: str = "the runtime is closed") -> None:
        super().__init__(message)


class StoreUnavailable(OmnigentError):
    """The database could not be reached, even after retrying (a shared PostgreSQL)."""

    code = "store_unavailable"
    status = 503

    def __init__(self, location: str, reason: str | None = None) -> None:
        why = f": {reason}" if reason else "; try again later"
        super().__init__(f"the database {location} cannot be reached{why}")
        self.location = location


class StoreTimeout(StoreUnavailable):
    """The database did not answer a call within the store's timeout.

    A lock another connection held too long, a hung database server, a dead disk: the
    call was given up rather than waited on for ever. ``unknown`` says what a write's
    caller may assume: ``False`` — nothing was written (it never started, or the
    database refused it), so trying again is safe; ``True`` — the write was under way
    when it was given up and may still take effect (every store write can be repeated
    without doing anything twice).
    """

    code = "store_timeout"

    def __init__(self, location: str, seconds: float, *, unknown: bool = False) -> None:
        outcome = "; the write may still take effect" if unknown else ""
        OmnigentError.__init__(
            self, f"the database {location} did not answer within {seconds:g} s{outcome}"
        )
        self.location = location
        self.seconds = seconds
        self.unknown = unknown


class OwnerUnavailable(OmnigentError):
    """The server that runs a session's work did not answer in time.

    Only with several servers on one database: a request that must reach the
    session's owner waited for it (and for its lease to expire, if it died) too long.
    """

    code = "owner_unavailable"
    status = 503

    def __init__(self, session_id: str, owner: str) -> None:
        super().__init__(
            f"the server {owner!r} that runs session {session_id!r} did not answer; "
            "try again shortly"
        )
        self.session_id = session_id
        self.owner = owner


class EventLogFull(OmnigentError):
    """The event log's queue is full: the store is not keeping up with the events.

    Raised instead of queueing past the bound when events that may not wait for room
    (a turn's terminal pair) find none, even in the places kept for them: nothing
    was published. The events already queued are still written.
    """

    code = "event_log_full"
    status = 503

    def __init__(self, events: int, queued: int, capacity: int) -> None:
        super().__init__(
            f"the event log is full: {queued} of {capacity} events wait for the store, "
            f"no room for {events} more"
        )
        self.events = events
        self.queued = queued
        self.capacity = capacity


class SandboxUnavailable(OmnigentError):
    """The sandbox a spec asks for cannot be created here, so nothing is run.

    The message names the cause (``bwrap`` missing, no user namespaces, the wrong
    platform for ``darwin_seatbelt``, a hidden-file scan past its cap). A tool
    reports it as ``Error: …``; a process a turn needs (a harness) fails the turn.
    """

    code = "sandbox_unavailable"
    status = 503


class ServerBusy(OmnigentError):
    """The server holds as many of something as it allows (open WebSockets); try later."""

    code = "server_busy"
    status = 503


class RunnerNameTaken(Conflict):
    """Another runner of that name is connected: the second is refused, not swapped in."""

    code = "runner_name_taken"

    def __init__(self, runner_id: str | None, message: str | None = None) -> None:
        super().__init__(
            message
            or f"a runner named {runner_id!r} is already connected to this server; "
            "stop it, or start this one with another --name"
        )
        self.runner_id = runner_id


class HarnessError(OmnigentError):
    """A harness could not complete a turn. The message is shown to the user."""

    code = "harness_error"
    status = 502


class ModelEndpointError(HarnessError):
    """The model endpoint refused, failed or could not be reached."""

    code = "model_endpoint_error"

    def __init__(self, message: str, *, http_status: int | None = None) -> None:
        super().__init__(message)
        self.http_status = http_status


class OutputLimitReached(HarnessError):
    """The model stopped at its output token limit (OpenAI ``finish_reason: length``).

    ACP clients see ``stopReason: "max_tokens"``; what streamed before is kept.
    """

    code = "max_tokens"


class ModelRefused(HarnessError):
    """The model (or its provider's filter) refused to answer (``content_filter``).

    ACP clients see ``stopReason: "refusal"``.
    """

    code = "refusal"


class BudgetExceeded(OmnigentError):
    """A session's budget (its spec's ``limits``) would be crossed by the next model call.

    The turn ends ``failed`` with this code before the call is made; the session's
    later turns are refused the same way until the limit is raised.
    """

    code = "budget_exceeded"
    status = 402


class StepLimitReached(HarnessError):
    """The agent loop made ``max_steps`` model calls without finishing.

    ACP clients see ``stopReason: "max_turn_requests"``.
    """

    code = "max_steps"


class HarnessUnavailable(HarnessError):
    """A harness cannot run here: the program it drives is not installed.

    The message names what to install (``pip install 'omnigent[claude]'``).
    """

    code = "harness_unavailable"
    status = 503

    def __init__(self, harness: str, message: str) -> None:
        super().__init__(message)
        self.harness = harness


class RunnerOffline(HarnessError):
    """The session's runner did not connect within the server's ``--runner-wait``.

    The message that started the turn stays in the session's history.
    """

    code = "runner_offline"
    status = 503

    def __init__(self, runner_id: str, waited: float, message: str | None = None) -> None:
        super().__init__(
            message
            or f"runner {runner_id!r} is not connected (waited {waited:g} s): start "
            f"`omnigent runner --name {runner_id}` against this server, then send again"
        )
        self.runner_id = runner_id


class RunnerDisconnected(HarnessError):
    """The session's runner went away mid-turn (no word from it within the timeout)."""

    code = "runner_disconnected"
    status = 503

    def __init__(self, runner_id: str) -> None:
        super().__init__(f"runner {runner_id!r} disconnected during the turn")
        self.runner_id = runner_id


class RunnerFailed(HarnessError):
    """The harness a runner ran failed; ``code`` is the slug the runner reported
    (``model_endpoint_error``, ``harness_crashed``, …), ``message`` its sentence."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class InternalError(OmnigentError, RuntimeError):
    """A bug in omnigent. The cause is logged, never sent."""

    code = "internal_error"
    status = 500


class SpecUnresolved(InternalError):
    """Resolving the spec a turn runs failed unexpectedly (the store, a bug).

    The message is the original omnigent's fixed sentence; ``type`` names the cause's
    class, and the cause itself (whose text may hold secrets) goes to the log only.
    """

    def __init__(self, cause: BaseException) -> None:
        super().__init__("Failed to resolve the agent spec for this turn.")
        self.type = type(cause).__name__
