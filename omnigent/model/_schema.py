"""JSON Schema (2020-12, as OpenAPI 3.1 uses it) generated from attrs classes and typing.

The wire converter (:mod:`omnigent.model._wire`) validates requests and builds
responses from attrs classes; this module describes the same classes, so a document
built from it (the HTTP transport's OpenAPI document) cannot drift from what the code
accepts and sends. It reads only types and a few declarations on them:

* ``str``, ``int``, ``float``, ``bool``, ``None``, ``Any`` → ``string``, ``integer``,
  ``number``, ``boolean``, ``null``, ``{}``; a ``Literal`` → ``enum`` (``const`` for
  one value); a string enum (``SessionStatus``) → a ``string`` ``enum`` of its values;
  ``X | None`` → a nullable ``X``; other unions → ``anyOf``.
* ``list[X]`` / ``tuple[X, ...]`` → arrays; ``tuple[X, Y]`` → ``prefixItems``;
  ``dict[str, X]`` / ``Mapping[str, X]`` → objects with ``additionalProperties: X``.
* An attrs class → a ``$ref`` to a component named after it (a leading ``_`` dropped),
  an object with its fields as properties and no other keys (the converter refuses
  unknown keys). A class holding its union tag as a ``ClassVar`` (``type =
  "message"``) gets the tag as a required ``const`` property, and a union of such
  classes is a ``oneOf`` with an OpenAPI ``discriminator``.
* Wire rules: a field's ``metadata`` made by :func:`wire_schema` is merged into its
  schema (the model-override pattern, a level's enum); a class's per-field ``_rules``
  (:mod:`omnigent.spec._rules`) contribute the ``json_schema`` each rule carries; a
  class's ``wire_exactly_one`` names fields of which exactly one must be non-null.

Required fields differ by direction: a request must send every field without a
default; a response always holds the fields it never leaves out (those that cannot be
``None``, and every field of a class that keeps its ``null`` fields). A class used in
both directions requires what both agree on.
"""

from __future__ import annotations

import enum
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import attrs

__all__ = ["SCHEMA_KEY", "TYPE_KEY", "SchemaBuilder", "merge", "wire_as", "wire_schema"]

SCHEMA_KEY = "json_schema"
"""The attrs field metadata key holding a JSON Schema fragment for that field."""
TYPE_KEY = "json_schema_type"
"""The attrs field metadata key holding the type a field is described as."""

Direction = Literal["request", "response"]

_PRIMITIVES: dict[Any, str] = {str: "string", int: "integer", float: "number", bool: "boolean"}
_JSON_DEFAULTS = (str, int, float, bool, type(None))


def wire_schema(fragment: Mapping[str, Any]) -> dict[str, Any]:
    """attrs field ``metadata`` adding ``fragment`` to the field's generated schema."""
    return {SCHEMA_KEY: dict(fragment)}


def wire_as(tp: Any) -> dict[str, Any]:
    """attrs field ``metadata`` describing the field as ``tp``.

    For a field passed through as raw data that another layer structures into ``tp``
    (a request's ``initial_items``, which the core checks): the document shows the
    type that does the checking.
    """
    return {TYPE_KEY: tp}


def merge(schema: dict[str, Any], fragment: Mapping[str, Any]) -> dict[str, Any]:
    """``schema`` with ``fragment`` merged in (nested objects merged key by key)."""
    out = dict(schema)
    for key, value in fragment.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = value
    return out


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    kind = schema.get("type")
    if isinstance(kind, str) and not {"$ref", "enum", "const", "anyOf", "oneOf"} & set(schema):
        return {**schema, "type": [kind, "null"]}
    if "enum" in schema and set(schema) <= {"enum", "type"}:
        kinds = schema.get("type")
        out: dict[str, Any] = {"enum": [*schema["enum"], None]}
        if isinstance(kinds, str):
            out["type"] = [kinds, "null"]
        return out
    return {"anyOf": [schema, {"type": "null"}]}


def _literal(values: tuple[Any, ...]) -> dict[str, Any]:
    kinds = {_PRIMITIVES.get(type(v), "null") for v in values}
    out: dict[str, Any] = {"const": values[0]} if len(values) == 1 else {"enum": list(values)}
    if len(kinds) == 1:
        out["type"] = kinds.pop()
    return out


def _is_none(tp: Any) -> bool:
    return tp is None or tp is type(None)


def _tag(cls: Any) -> str | None:
    """The union tag a class holds as a ClassVar (``type = "message"``), if any."""
    if not attrs.has(cls) or "type" in attrs.fields_dict(cls):
        return None
    tag = getattr(cls, "type", None)
    return tag if isinstance(tag, str) else None


def _default(field: attrs.Attribute) -> tuple[bool, Any]:  # type: ignore[type-arg]
    """Whether the field has a JSON-able default worth showing, and that default."""
    default = field.default
    if default is attrs.NOTHING:
        return False, None
    if isinstance(default, attrs.Factory):  # type: ignore[arg-type]
        factory = default.factory  # type: ignore[union-attr]
        if factory in (list, tuple, dict):
            return True, {} if factory is dict else []
        return False, None
    if isinstance(default, _JSON_DEFAULTS):
        return True, default
    if isinstance(default, tuple) and not default:
        return True, []
    return False, None


@attrs.define
class _Component:
    """One attrs class being described: its body, and what each direction requires."""

    cls: type
    body: dict[str, Any]
    request_required: list[str]
    response_required: list[str]
    directions: set[str] = attrs.Factory(set)


class SchemaBuilder:
    """Builds schemas, collecting attrs classes as named, reusable components.

    ``ref_prefix`` is where the components will live in the document
    (``#/components/schemas/`` for OpenAPI). Call :meth:`request` and
    :meth:`response` for each type the document names, then :meth:`components`.

    Raises (from any method): ``TypeError`` for a type it cannot describe, and
    ``ValueError`` when two different classes would share one component name.
    """

    def __init__(self, ref_prefix: str = "#/components/schemas/") -> None:
        self._prefix = ref_prefix
        self._components: dict[str, _Component] = {}

    def request(self, tp: Any) -> dict[str, Any]:
        """The schema of ``tp`` as a client sends it."""
        return self._schema(tp, "request")

    def response(self, tp: Any) -> dict[str, Any]:
        """The schema of ``tp`` as the server sends it."""
        return self._schema(tp, "response")

    def ref(self, cls: type) -> dict[str, Any]:
        """A ``$ref`` to the component of an attrs class already described."""
        return {"$ref": self._prefix + self._name(cls)}

    def components(self) -> dict[str, Any]:
        """Every component described so far, by name (sorted), with its ``required``."""
        out: dict[str, Any] = {}
        for name in sorted(self._components):
            component = self._components[name]
            required = _required_for(component)
            body = dict(component.body)
            if required:
                body["required"] = required
            out[name] = body
        return out

    # -- the walk ------------------------------------------------------------------

    def _schema(self, tp: Any, direction: Direction | None) -> dict[str, Any]:
        # ``direction`` None describes without marking the classes reached as used.
        if tp is Any or tp is object:
            return {}
        if _is_none(tp):
            return {"type": "null"}
        if tp in _PRIMITIVES:
            return {"type": _PRIMITIVES[tp]}
        if isinstance(tp, type) and issubclass(tp, enum.StrEnum):
            return {"type": "string", "enum": [member.value for member in tp]}
        if attrs.has(tp):
            return self._class(tp, direction)
        origin, args = typing.get_origin(tp), typing.get_args(tp)
        if origin is Literal:
            return _literal(args)
        if origin in (typing.Union, types.UnionType):
            return self._union(args, direction)
        if tp in (list, tuple) or origin in (list, tuple, Sequence):
            return self._array(origin, args, direction)
        if tp is dict or origin in (dict, Mapping):
            value = args[1] if len(args) == 2 else Any
            if value is Any:
                return {"type": "object"}
            return {"type": "object", "additionalProperties": self._schema(value, direction)}
        raise TypeError(f"no JSON Schema for {tp!r}")

    def _array(
        self, origin: Any, args: tuple[Any, ...], direction: Direction | None
    ) -> dict[str, Any]:
        if origin is tuple and args and args[-1] is not Ellipsis:
            items = [self._schema(a, direction) for a in args]
            n = len(items)
            return {"type": "array", "prefixItems": items, "minItems": n, "maxItems": n}
        item = args[0] if args else Any
        schema: dict[str, Any] = {"type": "array"}
        if item is not Any:
            schema["items"] = self._schema(item, direction)
        return schema

    def _union(self, args: tuple[Any, ...], direction: Direction | None) -> dict[str, Any]:
        members = [a for a in args if not _is_none(a)]
        nullable = len(members) < len(args)
        if len(members) == 1:
            inner = self._schema(members[0], direction)
        elif all(m in _PRIMITIVES for m in members):
            inner = {"type": [_PRIMITIVES[m] for m in members]}
            if nullable:
                inner["type"].append("null")
            return inner
        else:
            inner = self._choice(members, direction)
        return _nullable(inner) if nullable else inner

    def _choice(self, members: list[Any], direction: Direction | None) -> dict[str, Any]:
        schemas = [self._schema(m, direction) for m in members]
        tags = [_tag(m) for m in members]
        if all(tags):
            mapping = {t: s["$ref"] for t, s in zip(tags, schemas, strict=True)}
            return {"oneOf": schemas, "discriminator": {"propertyName": "type", "mapping": mapping}}
        return {"anyOf": schemas}

    def _name(self, cls: type) -> str:
        return cls.__name__.lstrip("_")

    def _class(self, cls: type, direction: Direction | None) -> dict[str, Any]:
        name = self._name(cls)
        component = self._components.get(name)
        if component is not None and component.cls is not cls:
            raise ValueError(f"two classes named {name!r}: {component.cls!r} and {cls!r}")
        if component is None:
            component = _Component(cls, {}, [], [])
            self._components[name] = component  # before the fields: classes may recurse
            self._describe(component)
        if direction is not None and direction not in component.directions:
            component.directions.add(direction)
            # A nested class is reached in the direction its holder is: walk again.
            for hint in self._hints(cls).values():
                self._schema(hint, direction)
        return {"$ref": self._prefix + name}

    def _hints(self, cls: type) -> dict[str, Any]:
        """Each field's type as described: its annotation, or its ``wire_as`` type."""
        annotations = typing.get_type_hints(cls)
        return {f.name: f.metadata.get(TYPE_KEY, annotations[f.name]) for f in _wire_fields(cls)}

    def _describe(self, component: _Component) -> None:
        cls = component.cls
        hints = self._hints(cls)
        rules: Mapping[str, Any] = getattr(cls, "_rules", {})
        keeps_none = getattr(cls, "wire_keeps_none", False)
        properties: dict[str, Any] = {}
        tag = _tag(cls)
        if tag is not None:
            properties["type"] = {"const": tag}
            component.request_required.append("type")
            component.response_required.append("type")
        for field in _wire_fields(cls):
            hint = hints[field.name]
            schema = self._schema(hint, None)
            fragment = getattr(rules.get(field.name), "json_schema", None)
            if fragment:
                schema = merge(schema, fragment)
            if SCHEMA_KEY in field.metadata:
                schema = merge(schema, field.metadata[SCHEMA_KEY])
            has_default, default = _default(field)
            if has_default:
                schema = {**schema, "default": default}
            properties[field.name] = schema
            if field.default is attrs.NOTHING:
                component.request_required.append(field.name)
            if _always_sent(hint, field.name, keeps_none):
                component.response_required.append(field.name)
        body: dict[str, Any] = {"type": "object", "properties": properties}
        if not getattr(cls, "wire_open", False):
            body["additionalProperties"] = False
        exactly_one: Sequence[str] = getattr(cls, "wire_exactly_one", ())
        if exactly_one:
            body["anyOf"] = [_only(name, exactly_one) for name in exactly_one]
        summary = (cls.__doc__ or "").strip().split("\n\n")[0]
        if summary:
            text = " ".join(summary.split()).replace("``", "`")
            body = {"description": text, **body}
        component.body = body


def _only(name: str, names: Sequence[str]) -> dict[str, Any]:
    """``name`` is given (not null) and every other of ``names`` is absent or null."""
    others = {other: {"type": "null"} for other in names if other != name}
    return {"required": [name], "properties": {name: {"not": {"type": "null"}}, **others}}


def _always_sent(hint: Any, name: str, keeps_none: bool | Sequence[str]) -> bool:
    """Whether a response always holds the field (the converter omits ``None``)."""
    if keeps_none is True or (not isinstance(keeps_none, bool) and name in keeps_none):
        return True
    if hint is Any or _is_none(hint):
        return False
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return not any(_is_none(a) for a in typing.get_args(hint))
    return True


def _required_for(component: _Component) -> list[str]:
    if component.directions == {"request"}:
        return component.request_required
    if component.directions == {"response"}:
        return component.response_required
    return [n for n in component.request_required if n in component.response_required]


def _wire_fields(cls: type) -> tuple[attrs.Attribute[Any], ...]:
    """A class's fields on the wire: not those with ``init=False`` (caches, derived
    values), which the converter neither reads nor writes."""
    return tuple(f for f in attrs.fields(cls) if f.init)
