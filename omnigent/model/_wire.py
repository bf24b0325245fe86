"""The wire converter: strict cattrs structuring with errors that name the field.

cattrs coerces by default (``"7"`` becomes ``7``, ``"false"`` becomes ``True``), which
would let a wrong type through silently. Here every primitive must already have the
right JSON type, unknown keys are refused, ``Literal`` values and string enums
(:class:`~._statuses.SessionStatus`) are checked (an enum travels as its string), and tagged
unions dispatch on a ``type`` key held as a ``ClassVar`` on each class (a tag that is
also an attrs field breaks ``forbid_extra_keys``: cattrs #483).

Failures surface as one :class:`~omnigent.errors.InvalidInput` whose ``details`` list
every bad field as a dotted path (``data.content[0].text``).

The converter is made — and cattrs imported — on the first structure or unstructure
(:func:`wire_converter`); what the model and the spec register at import waits for it
(:func:`on_wire_converter`). Nothing is structured before ``omnigent serve`` answers
its first request, and importing cattrs cost that start ≈ 20 ms (issue 32).
"""

from __future__ import annotations

import enum
import math
import types
import typing
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

import attrs

from ..errors import ErrorDetail, InvalidInput
from ._depth import check_depth
from ._json import finite_float, loads

if TYPE_CHECKING:
    import cattrs

__all__ = [
    "WireError",
    "finite_float",
    "loads",
    "on_wire_converter",
    "register_tagged_union",
    "structure",
    "unstructure",
    "wire_converter",
]

T = TypeVar("T")


class WireError(ValueError):
    """A structuring failure with a human message; ``sub`` extends the field path."""

    def __init__(self, msg: str, sub: str = "") -> None:
        super().__init__(msg)
        self.msg = msg
        self.sub = sub


def _type_name(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _strict_str(value: Any, _: type) -> str:
    if not isinstance(value, str):
        raise WireError(f"expected string, got {_type_name(value)}")
    return value


def _strict_int(value: Any, _: type) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise WireError(f"expected integer, got {_type_name(value)}")
    return value


def _strict_float(value: Any, _: type) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise WireError(f"expected number, got {_type_name(value)}")
    number = float(value)
    if not math.isfinite(number):  # YAML's .inf and .nan, or a Python caller's
        raise WireError(f"expected a finite number, got {number}")
    return number


def _strict_bool(value: Any, _: type) -> bool:
    if not isinstance(value, bool):
        raise WireError(f"expected boolean, got {_type_name(value)}")
    return value


def _literal_hook(tp: Any) -> Callable[[Any, Any], Any]:
    allowed = typing.get_args(tp)

    def structure_literal(value: Any, _: Any) -> Any:
        # `True == 1` in Python: compare types too so 1 never passes for True.
        for option in allowed:
            if value == option and type(value) is type(option):
                return value
        choices = ", ".join(repr(a) for a in allowed)
        raise WireError(f"must be one of {choices}, got {value!r}")

    return structure_literal


def _structure_str_enum(value: Any, cls: type[enum.StrEnum]) -> enum.StrEnum:
    # Only the exact string of a member: no coercion, and no member of another enum.
    if type(value) is str:
        try:
            return cls(value)
        except ValueError:
            pass
    choices = ", ".join(repr(member.value) for member in cls)
    raise WireError(f"must be one of {choices}, got {value!r}")


def _plain_str(value: enum.StrEnum) -> str:
    """A string enum's wire form: its value, as a plain ``str``."""
    return str(value.value)


def _dict_hook(tp: Any) -> Callable[[Any, Any], Any]:
    args = typing.get_args(tp)
    value_type = args[1] if len(args) == 2 else Any

    def structure_dict(value: Any, _: Any) -> Any:
        if not isinstance(value, Mapping):
            raise WireError(f"expected object, got {_type_name(value)}")
        if value_type is Any:
            return dict(value)
        out: dict[str, Any] = {}
        errors: list[ErrorDetail] = []
        for key, item in value.items():
            if not isinstance(key, str):
                raise WireError("object keys must be strings")
            try:
                out[key] = wire_converter().structure(item, value_type)
            except Exception as exc:  # collected into one error below
                errors.extend(_details(exc, key))
        if errors:
            raise _Nested(errors)
        return out

    return structure_dict


def _list_hook(tp: Any) -> Callable[[Any, Any], Any]:
    args = typing.get_args(tp)
    item_type = args[0] if args else Any
    # ``tuple[int, str]`` holds exactly one item of each type, in order.
    fixed = typing.get_origin(tp) is tuple and bool(args) and args[-1] is not Ellipsis

    def structure_list(value: Any, _: Any) -> Any:
        if not isinstance(value, list | tuple):
            raise WireError(f"expected array, got {_type_name(value)}")
        if fixed and len(value) != len(args):
            raise WireError(f"expected {len(args)} items, got {len(value)}")
        out: list[Any] = []
        errors: list[ErrorDetail] = []
        for index, item in enumerate(value):
            try:
                out.append(wire_converter().structure(item, args[index] if fixed else item_type))
            except Exception as exc:  # collected into one error below
                errors.extend(_details(exc, f"[{index}]"))
        if errors:
            raise _Nested(errors)
        return out if typing.get_origin(tp) is not tuple else tuple(out)

    return structure_list


_JSON_NAMES: dict[Any, str] = {
    str: "string",
    int: "integer",
    float: "number",
    bool: "boolean",
    type(None): "null",
}


def _is_primitive_union(tp: Any) -> bool:
    """``str | int`` and the like (``X | None`` alone is cattrs' own Optional)."""
    if typing.get_origin(tp) not in (typing.Union, types.UnionType):
        return False
    args = typing.get_args(tp)
    return all(a in _JSON_NAMES for a in args) and sum(a is not type(None) for a in args) > 1


def _primitive_union_hook(tp: Any) -> Callable[[Any, Any], Any]:
    args = typing.get_args(tp)
    expected = " or ".join(_JSON_NAMES[a] for a in args)

    def structure_primitive_union(value: Any, _: Any) -> Any:
        # JSON's own kinds, exactly: True is no integer here, and 1 is no string.
        kind = type(value)
        if kind in args or (kind is int and float in args):
            return value
        raise WireError(f"expected {expected}, got {_type_name(value)}")

    return structure_primitive_union


class _Nested(ValueError):
    """Details already rendered by a nested structuring call."""

    def __init__(self, details: list[ErrorDetail]) -> None:
        super().__init__("; ".join(f"{d.msg} @ {d.loc}" for d in details))
        self.details = details


def _is_literal(tp: Any) -> bool:
    return typing.get_origin(tp) is typing.Literal


def _is_dict(tp: Any) -> bool:
    return tp is dict or typing.get_origin(tp) in (dict, Mapping)


def _is_sequence(tp: Any) -> bool:
    return tp is list or typing.get_origin(tp) in (list, tuple)


def _make_converter() -> cattrs.Converter:
    import cattrs

    conv = cattrs.Converter(forbid_extra_keys=True)
    conv.register_structure_hook(str, _strict_str)
    conv.register_structure_hook(int, _strict_int)
    conv.register_structure_hook(float, _strict_float)
    conv.register_structure_hook(bool, _strict_bool)
    conv.register_structure_hook_factory(_is_literal, _literal_hook)
    # Registered by class (as str is): a string enum is a str, and the most derived
    # class wins.
    conv.register_structure_hook(enum.StrEnum, _structure_str_enum)
    conv.register_unstructure_hook(enum.StrEnum, _plain_str)
    conv.register_structure_hook_factory(_is_dict, _dict_hook)
    conv.register_structure_hook_factory(_is_sequence, _list_hook)
    conv.register_structure_hook_factory(_is_primitive_union, _primitive_union_hook)
    conv.register_structure_hook(Any, lambda v, _: v)
    conv.register_unstructure_hook_factory(attrs.has, lambda cls: _omit_none(conv, cls))
    return conv


def _omit_none(conv: cattrs.Converter, cls: type) -> Callable[[Any], dict[str, Any]]:
    """Unstructure an attrs instance, leaving out fields that are ``None``.

    Optional fields are absent on the wire rather than ``null`` (as the OpenAI APIs
    do); a class that must show its ``null`` fields sets ``wire_keeps_none = True``, or
    to the names of the fields that show theirs.
    """
    from cattrs.gen import make_dict_unstructure_fn

    fields: Callable[[Any], dict[str, Any]] = make_dict_unstructure_fn(cls, conv)
    base: Callable[[Any], dict[str, Any]] = fields
    tag = getattr(cls, "type", None)
    if isinstance(tag, str) and "type" not in attrs.fields_dict(cls):
        # A member of a tagged union (an item, a block, an event) carries its tag
        # however it is unstructured, so the wire form always round-trips.
        def base(value: Any) -> dict[str, Any]:
            return {"type": tag, **fields(value)}

    keeps = getattr(cls, "wire_keeps_none", False)
    if keeps is True:
        return base
    shown = frozenset(keeps or ())

    def unstructure_without_none(value: Any) -> dict[str, Any]:
        return {k: v for k, v in base(value).items() if v is not None or k in shown}

    return unstructure_without_none


_converter: cattrs.Converter | None = None
_waiting: list[Callable[[cattrs.Converter], None]] = []


def wire_converter() -> cattrs.Converter:
    """The one converter for the wire, made on first use with every registration made
    before it (:func:`on_wire_converter`), in order."""
    global _converter
    if _converter is None:
        conv = _make_converter()
        for register in _waiting:
            register(conv)
        _waiting.clear()
        _converter = conv
    return _converter


def on_wire_converter(register: Callable[[cattrs.Converter], None]) -> None:
    """Register hooks on the wire converter: at once if it is made, else when it is.

    For import-time registrations (the model's tagged unions, the spec's rules), so
    that importing them does not import cattrs.
    """
    if _converter is None:
        _waiting.append(register)
    else:
        register(_converter)


def register_tagged_union(
    union: Any, classes: Mapping[str, type], *, tag: str = "type", what: str = "type"
) -> None:
    """Dispatch ``union`` on ``data[tag]``; each class holds its tag as a ClassVar.

    An unknown or missing tag, or a value that is not an object, is a clear
    :class:`WireError` at the tag's path rather than cattrs' bare ``KeyError``.
    """
    names = ", ".join(sorted(classes))

    def structure_union(value: Any, _: Any) -> Any:
        if not isinstance(value, Mapping):
            raise WireError(f"expected object, got {_type_name(value)}")
        if tag not in value:
            raise WireError("required field missing", tag)
        name = value[tag]
        cls = classes.get(name) if isinstance(name, str) else None
        if cls is None:
            raise WireError(f"unknown {what} {name!r} (expected one of: {names})", tag)
        body = {k: v for k, v in value.items() if k != tag}
        return wire_converter().structure(body, cls)

    def unstructure_tagged(value: Any) -> Any:
        body = wire_converter().unstructure(value, unstructure_as=type(value))
        return body if tag in body else {tag: getattr(value, tag), **body}

    def register(conv: cattrs.Converter) -> None:
        conv.register_structure_hook(union, structure_union)
        for cls in classes.values():
            conv.register_structure_hook(cls, _untagged_hook(cls, tag))
        conv.register_unstructure_hook(union, unstructure_tagged)

    on_wire_converter(register)


def _untagged_hook(cls: type, tag: str) -> Callable[[Any, Any], Any]:
    """Structure one member directly, accepting (and checking) its own tag if present.

    cattrs' function for the class is generated on the first value structured (each
    is compiled: generating them all at import cost ``omnigent serve`` ≈ 10 ms before
    its first request)."""
    made: list[Callable[[Any, Any], Any]] = []

    def structure_member(value: Any, _: Any) -> Any:
        if not isinstance(value, Mapping):
            raise WireError(f"expected object, got {_type_name(value)}")
        if tag in value:
            if value[tag] != getattr(cls, tag):
                raise WireError(f"expected {getattr(cls, tag)!r}, got {value[tag]!r}", tag)
            value = {k: v for k, v in value.items() if k != tag}
        if not made:
            made.append(wire_converter().gen_structure_attrs_fromdict(cls))
        return made[0](value, cls)

    return structure_member


def _join(path: str, part: str | int) -> str:
    if isinstance(part, int):
        return f"{path}[{part}]"
    if not part:
        return path
    if part.startswith("["):
        return f"{path}{part}"
    return f"{path}.{part}" if path else part


def _details(exc: BaseException, path: str) -> Iterator[ErrorDetail]:
    from cattrs.errors import (
        ClassValidationError,
        ForbiddenExtraKeysError,
        IterableValidationError,
    )

    if isinstance(exc, ClassValidationError | IterableValidationError):
        with_notes, without = exc.group_exceptions()
        for inner, note in with_notes:
            part: Any = getattr(note, "name", None)
            if part is None:
                part = getattr(note, "index", "")
            yield from _details(inner, _join(path, part))
        for inner in without:
            yield from _details(inner, path)
    elif isinstance(exc, ForbiddenExtraKeysError):
        for key in sorted(exc.extra_fields):
            yield ErrorDetail(_join(path, key), "unknown field")
    elif isinstance(exc, _Nested):
        for d in exc.details:
            yield ErrorDetail(_join(path, d.loc), d.msg)
    elif isinstance(exc, WireError):
        yield ErrorDetail(_join(path, exc.sub), exc.msg)
    elif isinstance(exc, KeyError):
        yield ErrorDetail(path, "required field missing")
    elif isinstance(exc, TypeError | AttributeError):
        yield ErrorDetail(path, "expected object")
    else:
        yield ErrorDetail(path, str(exc) or type(exc).__name__)


@typing.overload
def structure(
    data: Any, cls: type[T], *, root: str = "", error: type[InvalidInput] = InvalidInput
) -> T: ...


@typing.overload
def structure(
    data: Any, cls: Any, *, root: str = "", error: type[InvalidInput] = InvalidInput
) -> Any: ...


def structure(
    data: Any,
    cls: Any,
    *,
    root: str = "",
    error: type[InvalidInput] = InvalidInput,
) -> Any:
    """Structure wire ``data`` into ``cls`` strictly.

    Args:
        data: decoded JSON (or YAML) values.
        cls: the attrs class or type to build.
        root: a path prefix for error locations (``"data"`` for an event body).
        error: the :class:`InvalidInput` subclass to raise.

    Data nested deeper than :data:`~omnigent.model.MAX_DEPTH` is refused first, so
    nothing downstream (cattrs, the store's encoder, ``deepcopy``) meets a value that
    would exhaust the recursion limit.

    Raises:
        InvalidInput: (or ``error``) with one detail per offending field.
    """
    check_depth(data, loc=root, error=error)
    try:
        return wire_converter().structure(data, cls)
    except Exception as exc:
        details = list(_details(exc, root))
        summary = "; ".join(f"{d.msg} @ {d.loc or '$'}" for d in details[:5])
        name = getattr(cls, "__name__", "")
        what = name if attrs.has(cls) and not name.startswith("_") else "input"
        raise error(f"invalid {what}: {summary}", details) from exc


def unstructure(value: Any, as_type: Any = None) -> Any:
    """The wire (JSON-ready) form of ``value``."""
    if as_type is None:
        return wire_converter().unstructure(value)
    return wire_converter().unstructure(value, unstructure_as=as_type)
