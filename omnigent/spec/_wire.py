"""Structuring hooks that make the wire converter apply the agent spec's rules.

The strict converter of :mod:`omnigent.model._wire` checks types; the spec also has
per-field rules (a class's ``_rules``, see :mod:`omnigent.spec._rules`) and cross-field
rules (raised as :class:`~omnigent.errors.SpecError` from ``__attrs_post_init__``).
The hooks here report both in the wire's own terms (:class:`WireError`, or cattrs'
``ClassValidationError`` for several), so one structure call collects every failure
of a spec under its field path.

:mod:`omnigent.spec` calls :func:`register_spec_hooks` once, at import, after its
classes exist and before anything structures one. This module never imports the spec
classes, so the two do not import each other.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from ..errors import SpecError
from ..model._wire import WireError, on_wire_converter, wire_converter
from ._rules import Problems, rules_of

if TYPE_CHECKING:
    import cattrs

StructureHook = Callable[[Any, Any], Any]


def _wire_error(problems: Problems, cls: type) -> Exception:
    """Rule failures in the form :func:`omnigent.model._wire.structure` reports."""
    from cattrs.errors import ClassValidationError

    errors: list[Exception] = [WireError(d.msg, d.loc) for d in problems]
    if len(errors) == 1:
        return errors[0]
    return ClassValidationError(f"invalid {cls.__name__}", errors, cls)


def _field_hook(field_type: Any, rule: Callable[[Any], Problems]) -> StructureHook:
    # Checking the field as it is structured reports it alongside the other field
    # errors of the same object, instead of only once the whole object has built.
    def structure_checked(value: Any, _: Any) -> Any:
        out = wire_converter().structure(value, field_type)
        if problems := rule(out):
            raise _wire_error(problems, type(out))
        return out

    return structure_checked


def _register(cls: type) -> None:
    # The generated function is made on the first spec that needs it: generating one
    # per class (cattrs compiles each) cost ``omnigent serve`` ≈ 10 ms before its
    # first request, for specs it may never read. Made then, it also finds every
    # field class's hook registered, whatever the order below.
    made: list[StructureHook] = []

    def structure_spec_object(value: Any, _: Any) -> Any:
        from cattrs.errors import ClassValidationError

        # The dict hook raises the wire's "expected object, got <type>" for non-mappings.
        wire_converter().structure(value, dict[str, Any])
        if not made:
            made.append(_make_structure_fn(cls))
        try:
            return made[0](value, cls)
        except ClassValidationError as exc:
            # cattrs wraps what ``__init__`` raised (our SpecError from a cross-field
            # rule) in a ClassValidationError; rewrite it in the wire's terms.
            failed = [e for e in exc.exceptions if isinstance(e, SpecError)]
            if not failed:
                raise
            raise _wire_error([d for e in failed for d in e.details], cls) from None

    on_wire_converter(lambda conv: conv.register_structure_hook(cls, structure_spec_object))


def _make_structure_fn(cls: type) -> StructureHook:
    """cattrs' structure function for ``cls``, each ruled field checked as it is read."""
    from cattrs.gen import make_dict_structure_fn, override

    attrs.resolve_types(cls)
    fields = {f.name: f.type for f in attrs.fields(cls)}
    overrides = {
        name: override(struct_hook=_field_hook(fields[name], rule))
        for name, rule in rules_of(cls).items()
    }
    # mypy reads ``**overrides`` as possibly feeding the ``_cattrs_*`` flags.
    make_fn: Callable[..., StructureHook] = make_dict_structure_fn
    return make_fn(cls, wire_converter(), **overrides)


def _step_hook(kinds: Mapping[str, type]) -> StructureHook:
    """Structure a script step by the one key of ``kinds`` present in it."""
    names = ", ".join(kinds)

    def structure_step(value: Any, _: Any) -> Any:
        wire_converter().structure(value, dict[str, Any])
        present = [key for key in kinds if key in value]
        if len(present) != 1:
            found = f", got {' and '.join(present)}" if present else ""
            raise WireError(f"a step needs exactly one of {names}{found}")
        return wire_converter().structure(value, kinds[present[0]])

    return structure_step


def register_spec_hooks(
    step_union: object, step_kinds: Mapping[str, type], classes: Sequence[type]
) -> None:
    """Register the spec's hooks on the wire converter.

    Args:
        step_union: the union type of script steps, dispatched on its key.
        step_kinds: each step key (``say``, ``call``...) and the class it picks.
        classes: every spec class. A class's structure function is generated on
            its first use (it captures its fields' classes' hooks then), by when
            every class here has its hook: its fields keep their rules whatever the
            order.
    """
    step_hook = _step_hook(step_kinds)

    def register(conv: cattrs.Converter) -> None:
        conv.register_structure_hook(step_union, step_hook)

    on_wire_converter(register)
    for cls in classes:
        _register(cls)
