"""Boundary validation for the HTTP routes: bodies, query parameters, identity.

Bodies are decoded here (non-JSON or non-object bodies are ``422`` at ``body``) and
structured into frozen attrs request classes (:mod:`._bodies`) with the strict wire
converter, so an unknown key or a wrong type is a ``422`` naming the field before
anything happens.
The app's only state (the runtime, the auth mode, the stopping event) is one frozen
:class:`AppState` in ``app.extensions``.
"""

from __future__ import annotations

import re
import secrets
from typing import Any, Literal, TypeVar

import attrs
import trio
from quart import current_app, request

from ...core import Runtime
from ...errors import InvalidInput, Unauthorized
from ...model import loads, structure
from ..runner import RunnerHub
from ._fence import Fence
from ._ws_slots import WebSocketSlots

__all__ = [
    "AppState",
    "json_body",
    "owner",
    "query_bool",
    "query_choice",
    "query_int",
    "query_str",
    "state",
    "structured_body",
]

T = TypeVar("T")

AuthMode = Literal["none", "header"]
IDENTITY_HEADER = "X-Forwarded-Email"


@attrs.frozen
class AppState:
    """Everything the app holds: the runtime, its options, and per-app secrets.

    ``secret`` keys the approval page's form tokens; it is made fresh for each app, so
    a token is good only while this server runs (as the elicitation it names is).
    """

    runtime: Runtime
    auth: AuthMode
    stopping: trio.Event
    ping_interval: float = 15.0
    fence: Fence = attrs.field(factory=Fence)
    websockets: WebSocketSlots = attrs.field(factory=WebSocketSlots)
    runners: RunnerHub | None = None
    secret: bytes = attrs.field(factory=lambda: secrets.token_bytes(32), repr=False)


def state() -> AppState:
    found: AppState = current_app.extensions["omnigent"]
    return found


def owner() -> str:
    """The caller: the identity header with ``--auth header``, else ``local``."""
    if state().auth == "header":
        caller = request.headers.get(IDENTITY_HEADER)
        if not caller:
            raise Unauthorized(f"missing {IDENTITY_HEADER} header")
        return caller
    return "local"


# Bodies larger than this are decoded in a worker thread, not on the event loop.
_DECODE_IN_THREAD = 64 << 10


async def json_body() -> dict[str, Any]:
    """The request body as a JSON object, else InvalidInput at ``body``.

    Nesting deeper than ``MAX_DEPTH`` is refused with the path (:func:`loads`); a large
    body is decoded in a worker thread so the event loop keeps answering.
    """
    raw = await request.get_data()
    if len(raw) > _DECODE_IN_THREAD:
        data = await trio.to_thread.run_sync(loads, raw)
    else:
        data = loads(raw, loc="body")
    if not isinstance(data, dict):
        raise InvalidInput.at("body", "the body must be a JSON object")
    return data


async def structured_body(cls: type[T]) -> T:
    """The body structured into ``cls`` (unknown keys and wrong types are 422)."""
    return structure(await json_body(), cls)


def query_str(name: str) -> str | None:
    value = request.args.get(name)
    if value == "":
        raise InvalidInput.at(name, "must not be empty")
    return value


def query_int(name: str, *, low: int, high: int | None = None) -> int | None:
    value = request.args.get(name)
    if value is None:
        return None
    return parse_int(value, name, low=low, high=high)


_INT64_MAX = 2**63 - 1


# Python's ``int`` also reads "٣", "1_0" and " 5 ": a query integer is ASCII digits.
_INTEGER = re.compile(r"-?[0-9]{1,19}")


def parse_int(value: str, loc: str, *, low: int, high: int | None = None) -> int:
    bounds = f"between {low} and {high}" if high is not None else f"at least {low}"
    if not _INTEGER.fullmatch(value):
        raise InvalidInput.at(loc, f"must be an integer {bounds}")
    number = int(value, 10)
    if number < low or number > (_INT64_MAX if high is None else high):
        raise InvalidInput.at(loc, f"must be an integer {bounds}")
    return number


def query_choice(name: str, choices: tuple[str, ...], default: str) -> str:
    value = request.args.get(name, default)
    if value not in choices:
        raise InvalidInput.at(name, f"must be one of {', '.join(choices)}")
    return value


def query_bool(name: str) -> bool:
    value = request.args.get(name, "false").lower()
    if value in ("true", "1"):
        return True
    if value in ("false", "0"):
        return False
    raise InvalidInput.at(name, "must be true or false")
