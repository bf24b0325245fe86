"""The tool registry: Python callables as tools a model can call.

``rt.register_tool(fn)`` derives a tool's JSON Schema from ``fn``'s signature and
docstring (:func:`make_tool`): each parameter's type from its annotation (``str``,
``int``, ``float``, ``bool``, ``list[T]``, ``dict``, ``Literal[...]``, optional ones),
its default, and its description from the docstring's ``Args:`` section (or
``:param name:`` lines); the tool's description is the docstring's first paragraph. A
call validates the model's arguments against that signature before the tool runs: a
missing, unknown or wrongly-typed argument comes back to the model as an ``Error: …``
string it can act on, and the tool never sees it. Async tools run on the event loop;
sync tools run in a worker thread so they cannot block it. A spec's own Python tools
(``tools.python``, :mod:`omnigent.core.tools._python_tools`) are built and run the same
way (:meth:`ToolRegistry.run`), offered only to the agents that name them.

A tool returns a string (used as is) or any JSON-serialisable value (encoded as JSON).
An exception inside a tool becomes ``Error: <tool> failed: <message>``.

Cancellation: an async tool is cancelled with its turn. A sync tool in a thread cannot
be interrupted: a cancel waits a short grace for it to return, then leaves the thread
to finish on its own and its result is discarded (see
:mod:`omnigent.core.work._threads`).
"""

from __future__ import annotations

import functools
import inspect
import json
import logging
import re
import types
import typing
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import attrs
import trio

from ...errors import BadRequest, Conflict, InvalidInput
from ...harnesses.base import ToolSchema
from ...model import MAX_DEPTH, check_depth
from ..work import BlockingCalls

__all__ = ["TOOL_NAME", "Tool", "ToolRegistry", "decode_arguments", "make_tool"]

log = logging.getLogger(__name__)

TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_NAME = TOOL_NAME
_JSON_TYPES: dict[Any, str] = {
    str: "string",
    int: "integer",
    float: "number",
    bool: "boolean",
    list: "array",
    dict: "object",
}


@attrs.frozen
class Tool:
    """A registered tool: its schema and the callable behind it."""

    schema: ToolSchema
    fn: Callable[..., Any]
    params: tuple[inspect.Parameter, ...]
    accepts_extra: bool

    @property
    def name(self) -> str:
        return self.schema.name


def _json_type(annotation: Any) -> str | None:
    """The JSON Schema type for a simple annotation, or ``None`` to accept anything."""
    origin = typing.get_origin(annotation) or annotation
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        return _json_type(args[0]) if len(args) == 1 else None
    if origin is typing.Literal:
        kinds = {_JSON_TYPES.get(type(value)) for value in typing.get_args(annotation)}
        return kinds.pop() if len(kinds) == 1 else None
    return _JSON_TYPES.get(origin)


def _property(annotation: Any) -> dict[str, Any]:
    """The JSON Schema of one parameter's annotation (``{}``: anything)."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        return _property(args[0]) if len(args) == 1 else {}
    jtype = _json_type(annotation)
    if jtype is None:
        return {}
    schema: dict[str, Any] = {"type": jtype}
    if typing.get_origin(annotation) is typing.Literal:
        schema["enum"] = list(typing.get_args(annotation))
    elif jtype == "array" and typing.get_args(annotation):
        schema["items"] = _property(typing.get_args(annotation)[0])
    return schema


_SECTION = re.compile(r"^(\w[\w ]*):\s*$")
_ARG_LINE = re.compile(r"^(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_PARAM_LINE = re.compile(r"^:param\s+(?:[^:]*\s)?(\w+):\s*(.*)$")


def parameter_docs(doc: str) -> dict[str, str]:
    """Each parameter's description in a docstring: Google style (``Args:`` then
    ``name: text`` or ``name (type): text``, continued on deeper-indented lines) or
    reStructuredText (``:param name: text``)."""
    found: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    indent = 0
    for raw in doc.splitlines():
        line = raw.strip()
        depth = len(raw) - len(raw.lstrip())
        if match := _PARAM_LINE.match(line):
            current = match.group(1)
            found[current] = match.group(2)
            continue
        if match := _SECTION.match(line):
            section, current = match.group(1).lower(), None
            continue
        if section not in ("args", "arguments", "parameters", "params"):
            continue
        if not line:
            current = None
            continue
        if current is not None and depth > indent:
            found[current] = f"{found[current]} {line}".strip()
        elif match := _ARG_LINE.match(line):
            current, indent = match.group(1).lstrip("*"), depth
            found[current] = match.group(2)
    return found


def _is_optional(annotation: Any) -> bool:
    origin = typing.get_origin(annotation)
    return origin in (typing.Union, types.UnionType) and type(None) in typing.get_args(annotation)


def _schema_for(fn: Callable[..., Any], hints: dict[str, Any]) -> dict[str, Any]:
    properties: dict[str, Any] = {}
    required: list[str] = []
    described = parameter_docs(inspect.getdoc(fn) or "")
    for p in inspect.signature(fn).parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        schema = _property(hints.get(p.name, Any))
        if described.get(p.name):
            schema["description"] = described[p.name]
        if p.default is p.empty:
            required.append(p.name)
        elif _is_json(p.default):
            schema["default"] = p.default
        properties[p.name] = schema
    return {"type": "object", "properties": properties, "required": required}


def _is_json(value: Any) -> bool:
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        return False
    return True


def make_tool(
    fn: Callable[..., Any],
    *,
    name: str | None = None,
    description: str | None = None,
    parameters: Mapping[str, Any] | None = None,
) -> Tool:
    """``fn`` as a tool: its name (default ``fn.__name__``), description (default the
    docstring's first paragraph) and parameters (default derived from its signature and
    docstring; see the module docstring).

    Raises:
        BadRequest: a name that is not ``[A-Za-z0-9_-]{1,64}``, or a signature whose
            annotations cannot be read.
    """
    tool_name = name or str(getattr(fn, "__name__", ""))
    if not _NAME.fullmatch(tool_name):
        raise BadRequest(f"invalid tool name {tool_name!r}: use [A-Za-z0-9_-]{{1,64}}")
    doc = inspect.getdoc(fn) or ""
    try:
        hints = typing.get_type_hints(fn)
        params = tuple(inspect.signature(fn).parameters.values())
    except (NameError, TypeError, ValueError) as exc:
        raise BadRequest(f"cannot read the signature of tool {tool_name!r}: {exc}") from exc
    schema = ToolSchema(
        name=tool_name,
        description=description if description is not None else doc.split("\n\n")[0],
        parameters=dict(parameters) if parameters is not None else _schema_for(fn, hints),
    )
    annotated = tuple(p.replace(annotation=hints.get(p.name, Any)) for p in params)
    return Tool(schema, fn, annotated, any(p.kind is p.VAR_KEYWORD for p in params))


def _check_type(value: Any, annotation: Any) -> bool:
    if value is None:
        return _is_optional(annotation) or annotation is Any
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            annotation = args[0]
    if typing.get_origin(annotation) is typing.Literal:
        return any(
            value == choice and type(value) is type(choice)
            for choice in typing.get_args(annotation)
        )
    jtype = _json_type(annotation)
    if jtype is None:
        return True
    if jtype == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if jtype == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    expected = next(t for t, name in _JSON_TYPES.items() if name == jtype)
    return isinstance(value, expected)


def decode_arguments(arguments: str | Mapping[str, Any]) -> dict[str, Any] | str:
    """Arguments as an object, from a mapping or JSON text; an ``Error: …`` otherwise.

    Arguments nested deeper than ``MAX_DEPTH`` are refused here, before policies,
    the tool or the event encoder walk them (``omnigent.model.check_depth``).
    """
    if isinstance(arguments, Mapping):
        decoded: Any = dict(arguments)
    elif not arguments.strip():
        return {}
    else:
        try:
            decoded = json.loads(arguments)
        except RecursionError:
            return f"Error: arguments are nested deeper than {MAX_DEPTH} levels"
        except json.JSONDecodeError as exc:
            return f"Error: arguments are not valid JSON ({exc.msg} at position {exc.pos})"
    if not isinstance(decoded, dict):
        return "Error: arguments must be a JSON object"
    try:
        check_depth(decoded)
    except InvalidInput as exc:
        return f"Error: arguments are {exc.details[0].msg} (at {exc.details[0].loc})"
    return decoded


def _encode_output(value: Any) -> str:
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value)
    except (TypeError, ValueError):
        return str(value)


class ToolRegistry:
    """Tools by name. One per runtime; every session may call every tool in it."""

    def __init__(self, threads: BlockingCalls | None = None) -> None:
        self._tools: dict[str, Tool] = {}
        self._threads = threads or BlockingCalls()

    def register(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        parameters: Mapping[str, Any] | None = None,
        replace: bool = False,
    ) -> Tool:
        """Add ``fn`` as a tool.

        Args:
            fn: a sync or async callable taking keyword arguments.
            name: defaults to ``fn.__name__``; ``[A-Za-z0-9_-]{1,64}``.
            description: defaults to the first paragraph of ``fn``'s docstring.
            parameters: a JSON Schema to offer instead of the derived one.
            replace: allow replacing a tool of the same name.

        Raises:
            BadRequest: a bad name. Conflict: the name is taken.
        """
        tool = make_tool(fn, name=name, description=description, parameters=parameters)
        if tool.name in self._tools and not replace:
            raise Conflict(f"a tool named {tool.name!r} is already registered")
        self._tools[tool.name] = tool
        return tool

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def names(self) -> frozenset[str]:
        return frozenset(self._tools)

    def schemas(self) -> tuple[ToolSchema, ...]:
        return tuple(t.schema for t in self._tools.values())

    async def invoke(self, name: str, arguments: str | Mapping[str, Any]) -> str:
        """Validate ``arguments`` and run the tool; always returns the output string.

        Cancellation: propagates (see the module docstring for sync tools).
        """
        tool = self._tools.get(name)
        if tool is None:
            known = ", ".join(sorted(self._tools)) or "none"
            return f"Error: unknown tool {name!r} (available: {known})"
        return await self.run(tool, arguments)

    async def run(self, tool: Tool, arguments: str | Mapping[str, Any]) -> str:
        """Validate ``arguments`` and run ``tool`` (registered here or not); the output.

        Cancellation: propagates (see the module docstring for sync tools).
        """
        name = tool.name
        args = decode_arguments(arguments)
        if isinstance(args, str):
            return args
        problem = _validate(tool, args)
        if problem:
            return f"Error: invalid arguments for {name}: {problem}"
        try:
            if inspect.iscoroutinefunction(tool.fn):
                result = await typing.cast(Callable[..., Awaitable[Any]], tool.fn)(**args)
            else:
                call = functools.partial(tool.fn, **args)
                result = await self._threads.run(call, what=f"sync tool {name!r}")
        except trio.Cancelled:
            raise
        except Exception as exc:
            log.info("tool %s raised", name, exc_info=True)
            return f"Error: {name} failed: {exc}"
        return _encode_output(result)


def _expected(annotation: Any) -> str:
    """What a value for ``annotation`` must be, in words."""
    choices = _property(annotation).get("enum")
    if choices is not None:
        return "one of " + ", ".join(json.dumps(choice) for choice in choices)
    return _json_type(annotation) or "a value"


def _validate(tool: Tool, args: dict[str, Any]) -> str | None:
    known = {p.name: p for p in tool.params if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}
    for p in known.values():
        if p.default is p.empty and p.name not in args:
            return f"missing required argument {p.name!r}"
    for key, value in args.items():
        param = known.get(key)
        if param is None:
            if not tool.accepts_extra:
                return f"unknown argument {key!r} (expected: {', '.join(known) or 'none'})"
            continue
        if not _check_type(value, param.annotation):
            expected = _expected(param.annotation)
            return f"argument {key!r} must be {expected}, got {type(value).__name__}"
    return None
