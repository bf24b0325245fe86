"""Bounded YAML: :func:`load_yaml`, the one way omnigent reads YAML.

``yaml.safe_load`` runs no code, but it is not bounded: a few hundred bytes of nested
aliases (``b: [*a, *a, …]``, ``c: [*b, *b, …]``) stand for billions of nodes. The
loader itself only shares references, so it returns at once; whatever walks the
result next — validation, the JSON encoder that stores a spec, a listing that decodes
it again — expands it, and a 492-byte document once blocked the server for 36 s and
stored 351 MB. Here every document is bounded *before* anything walks it:

* **Size**: at most :data:`MAX_YAML_CHARS` characters.
* **Depth**: at most :data:`~omnigent.model.MAX_DEPTH` nested mappings and sequences,
  counted while composing (PyYAML's composer recurses, so deeper input would otherwise
  hit the recursion limit inside it) and again on the result, aliases expanded.
* **JSON values only**: a date, a timestamp, ``!!binary``, ``!!set``, ``!!omap``,
  ``.nan``/``.inf``, an integer too long to convert, or a key that is not a string is
  refused, each named by its path (:mod:`._yaml_json`): a spec is stored as JSON.
* **Aliases**: with ``aliases=False`` (YAML sent over HTTP) any ``*alias`` is refused
  with its line and column. Otherwise (the operator's own files) they are allowed, but
  the document's *expanded* size — every node counted as many times as aliases repeat
  it — must stay under :data:`MAX_YAML_NODES`, and an alias to a node that contains it
  (a recursive document) is refused. The count is memoised per node, so it costs one
  visit per distinct node however large the expansion.

Blocking and CPU-bound (PyYAML is pure Python here): async callers run it in a worker
thread (``trio.to_thread.run_sync``), as the HTTP route does.

PyYAML and the loader over it (:mod:`._yaml_loader`) are imported by the first
document read: a server that reads none (no ``--agents``, no spec sent as YAML) never
imports them.

Error handling: every refusal is one :class:`~omnigent.errors.SpecError` at ``$`` (or at
the path of the nesting), its message naming the line where YAML can say it.
"""

from __future__ import annotations

from typing import Any, Final

from ..errors import SpecError
from ..model._depth import MAX_DEPTH, check_depth, render_path
from ._yaml_json import unheld_values

__all__ = ["MAX_YAML_CHARS", "MAX_YAML_NODES", "load_yaml"]

MAX_YAML_CHARS: Final = 1 << 20
"""The longest YAML document read (1 Mi characters); an agent spec is a few KB."""

MAX_YAML_NODES: Final = 100_000
"""The most nodes a document may stand for once its aliases are expanded."""


def load_yaml(text: str, *, aliases: bool = True, what: str = "YAML") -> Any:
    """Parse one YAML document within the bounds above.

    Args:
        text: the document.
        aliases: whether ``*alias`` references are accepted (within the expansion
            bound); ``False`` for anything a client sent.
        what: how the message names the document (``"the spec"``, a file name).

    Returns:
        The constructed value (``None`` for an empty document).

    Raises:
        SpecError: too long, too deep, an alias where none is accepted, too large once
            expanded, a recursive alias, a value JSON cannot hold (one detail per
            field), or invalid YAML — at the path where the
            composer found it (``metadata.a.a…``), else at ``$``; the message names
            the line and column.
    """
    import yaml

    from ._yaml_loader import compose

    if len(text) > MAX_YAML_CHARS:
        raise SpecError.at("$", f"{what} is longer than {MAX_YAML_CHARS} characters")
    try:
        data = compose(text, aliases, MAX_YAML_NODES)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        path = getattr(exc, "path", None)
        loc = render_path("", path) if path else "$"
        raise SpecError.at(loc, f"invalid {what}{where}: {problem}") from exc
    except RecursionError:
        # Deep flow collections recurse inside PyYAML's parser before our count sees
        # them; the answer is the same.
        raise SpecError.at("$", f"{what} is nested deeper than {MAX_DEPTH} levels") from None
    check_depth(data, error=SpecError)  # merge keys (<<: *x) can nest what the count saw
    unheld = unheld_values(data)
    if unheld:
        summary = "; ".join(f"{d.msg} @ {d.loc}" for d in unheld)
        raise SpecError(f"{what} holds values JSON cannot: {summary}", unheld)
    return data
