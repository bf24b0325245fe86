"""``omnigent.model._schema``: JSON Schema from attrs classes and typing, and the spec's
wire rules stated as schema fragments that are never stricter than the checks."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import attrs
import jsonschema
import jsonschema_rs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from omnigent.model import structure
from omnigent.model._schema import SchemaBuilder, wire_as, wire_schema
from omnigent.model._wire import register_tagged_union
from omnigent.spec import _rules as rules


@attrs.frozen
class Leaf:
    """A leaf.

    More text that is not the summary.
    """

    name: str
    size: int = 3
    tags: tuple[str, ...] = ()
    note: str | None = None


@attrs.frozen
class Cat:
    type: ClassVar[str] = "cat"
    lives: int


@attrs.frozen
class Dog:
    type: ClassVar[str] = "dog"
    good: bool = True


register_tagged_union(Cat | Dog, {"cat": Cat, "dog": Dog}, what="pet")


@attrs.frozen
class Holder:
    wire_exactly_one: ClassVar[tuple[str, ...]] = ("a", "b")

    pet: Cat | Dog
    leaf: Leaf | None = None
    a: str | None = None
    b: str | None = None
    level: int = attrs.field(default=1, metadata=wire_schema({"enum": [1, 2]}))
    raw: list[Any] = attrs.field(factory=list, metadata=wire_as(list[Leaf]))
    pair: tuple[int, str] = (0, "")
    table: dict[str, float] = attrs.Factory(dict)
    free: dict[str, Any] = attrs.Factory(dict)
    either: str | int = ""
    mode: Literal["x", "y"] | None = None


@attrs.frozen
class Node:
    children: tuple[Node, ...] = ()


@attrs.frozen
class Shown:
    wire_keeps_none: ClassVar[frozenset[str]] = frozenset({"kept"})
    wire_open: ClassVar[bool] = True

    kept: str | None
    dropped: str | None
    always: int


def _validator(builder: SchemaBuilder, root: dict[str, Any]) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(
        {**root, "components": {"schemas": builder.components()}}
    )


def test_types_become_json_schema() -> None:
    builder = SchemaBuilder()
    assert builder.request(Holder) == {"$ref": "#/components/schemas/Holder"}
    holder = builder.components()["Holder"]
    props = holder["properties"]
    assert props["pet"] == {
        "oneOf": [{"$ref": "#/components/schemas/Cat"}, {"$ref": "#/components/schemas/Dog"}],
        "discriminator": {
            "propertyName": "type",
            "mapping": {"cat": "#/components/schemas/Cat", "dog": "#/components/schemas/Dog"},
        },
    }
    assert props["leaf"] == {
        "anyOf": [{"$ref": "#/components/schemas/Leaf"}, {"type": "null"}],
        "default": None,
    }
    assert props["level"] == {"type": "integer", "enum": [1, 2], "default": 1}
    assert props["raw"]["items"] == {"$ref": "#/components/schemas/Leaf"}
    assert props["pair"]["prefixItems"] == [{"type": "integer"}, {"type": "string"}]
    assert (props["pair"]["minItems"], props["pair"]["maxItems"]) == (2, 2)
    assert props["table"] == {
        "type": "object",
        "additionalProperties": {"type": "number"},
        "default": {},
    }
    assert props["free"] == {"type": "object", "default": {}}
    assert props["either"]["type"] == ["string", "integer"]
    assert props["mode"]["enum"] == ["x", "y", None]
    assert holder["additionalProperties"] is False
    assert holder["required"] == ["pet"]
    components = builder.components()
    assert components["Cat"]["required"] == ["type", "lives"]
    assert components["Cat"]["properties"]["type"] == {"const": "cat"}
    assert components["Leaf"]["description"] == "A leaf."
    jsonschema.Draft202012Validator.check_schema(holder)


def test_required_fields_follow_the_direction() -> None:
    builder = SchemaBuilder()
    builder.response(Leaf)
    builder.response(Shown)
    out = builder.components()
    # A response holds every field that cannot be None, and those it keeps None for.
    assert out["Leaf"]["required"] == ["name", "size", "tags"]
    assert out["Shown"]["required"] == ["kept", "always"]
    assert "additionalProperties" not in out["Shown"]  # an open class
    both = SchemaBuilder()
    both.response(Leaf)
    both.request(Leaf)
    assert both.components()["Leaf"]["required"] == ["name"]


def test_the_schema_accepts_what_the_converter_accepts_and_refuses_the_rest() -> None:
    builder = SchemaBuilder()
    root = builder.request(Holder)
    validator = _validator(builder, root)
    good = [
        {"pet": {"type": "cat", "lives": 9}, "a": "x"},
        {"pet": {"type": "dog"}, "b": "y", "a": None, "pair": [1, "s"], "either": 3},
    ]
    for body in good:
        assert validator.is_valid(body), body
        structure(body, Holder)
    bad = [
        {"pet": {"type": "cow"}, "a": "x"},
        {"pet": {"type": "cat"}, "a": "x"},
        {"pet": {"type": "dog"}},  # neither a nor b
        {"pet": {"type": "dog"}, "a": "x", "b": "y"},  # both
        {"pet": {"type": "dog"}, "a": "x", "level": 3},
        {"pet": {"type": "dog"}, "a": "x", "bogus": 1},
        {"pet": {"type": "dog"}, "a": "x", "either": True},
        {"pet": {"type": "dog"}, "a": "x", "pair": [1]},
    ]
    for body in bad:
        assert not validator.is_valid(body), body


def test_recursive_classes_refer_to_themselves() -> None:
    builder = SchemaBuilder()
    builder.response(Node)
    node = builder.components()["Node"]
    assert node["properties"]["children"]["items"] == {"$ref": "#/components/schemas/Node"}


def test_what_it_cannot_describe_is_an_error() -> None:
    with pytest.raises(TypeError, match="no JSON Schema"):
        SchemaBuilder().request(set[int])

    @attrs.frozen
    class Leaf:  # the same name as another class
        x: int

    builder = SchemaBuilder()
    builder.request(globals()["Leaf"])
    with pytest.raises(ValueError, match="two classes named 'Leaf'"):
        builder.request(Leaf)


# -- the spec's rules: the fragment is never stricter than the check -----------------

_TEXT_RULES = {
    "agent_name": (rules.agent_name, {"type": "string"}),
    "mcp_name": (rules.mcp_name, {"type": "string"}),
    "url": (rules.url, {"type": "string"}),
    "function_ref": (rules.function_ref, {"type": "string"}),
    "non_empty": (rules.non_empty, {"type": "string"}),
}
_NAMES = st.text(alphabet=st.sampled_from("az09._-_:A\n é"), max_size=8) | st.text(max_size=110)


def _refused_by_schema(schema: dict[str, Any], value: Any) -> bool:
    # jsonschema-rs speaks ECMA regex, as the fuzzer's validator does: ``$`` is the end.
    return not jsonschema_rs.validator_for(schema).is_valid(value)


@pytest.mark.parametrize("name", sorted(_TEXT_RULES))
@settings(max_examples=300, deadline=None, derandomize=True)
@given(value=_NAMES)
def test_a_text_rule_fragment_refuses_only_what_the_check_refuses(name: str, value: str) -> None:
    rule, base = _TEXT_RULES[name]
    schema = {**base, **getattr(rule, "json_schema", {})}
    if _refused_by_schema(schema, value):
        assert rule(value), f"{name}: the document refuses {value!r}, the check does not"


@settings(max_examples=200, deadline=None, derandomize=True)
@given(
    env=st.dictionaries(st.text(max_size=6), st.just("v"), max_size=3),
    terminals=st.dictionaries(st.text(max_size=70), st.just({}), max_size=3),
    number=st.floats(allow_nan=False, allow_infinity=False) | st.integers(),
    argv=st.lists(st.text(max_size=3), max_size=3),
)
def test_the_other_rule_fragments_refuse_only_what_their_checks_refuse(
    env: dict[str, str], terminals: dict[str, Any], number: float, argv: list[str]
) -> None:
    cases: list[tuple[Any, dict[str, Any], Any]] = [
        (rules.env_names, {"type": "object"}, env),
        (rules.terminal_names, {"type": "object"}, terminals),
        (rules.seconds, {"type": "number"}, float(number)),
        (rules.optional_seconds, {"type": "number"}, float(number)),
        (rules.at_least_one, {"type": "integer"}, int(number)),
        (rules.command, {"type": "array", "items": {"type": "string"}}, argv),
    ]
    for rule, base, value in cases:
        schema = {**base, **rule.json_schema}
        if "items" in rule.json_schema:
            schema["items"] = {**base["items"], **rule.json_schema["items"]}
        if _refused_by_schema(schema, value):
            assert rule(tuple(value) if isinstance(value, list) else value), (rule, value)
