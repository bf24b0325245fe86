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

Error handling: every refusal is one :class:`~omnigent.errors.SpecError` at ``$`` (or at
the path of the nesting), its message naming the line where YAML can say it.
"""

from __future__ import annotations

from typing import Any, Final

import yaml
from yaml.composer import ComposerError
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from ..errors import SpecError
from ..model._depth import MAX_DEPTH, check_depth, render_path
from ._yaml_json import JSON_CONSTRUCTORS, unheld_values

__all__ = ["MAX_YAML_CHARS", "MAX_YAML_NODES", "load_yaml"]

MAX_YAML_CHARS: Final = 1 << 20
"""The longest YAML document read (1 Mi characters); an agent spec is a few KB."""

MAX_YAML_NODES: Final = 100_000
"""The most nodes a document may stand for once its aliases are expanded."""


class _Refused(ComposerError):
    """A bound the document broke, raised from inside the composer, with its path."""

    def __init__(
        self,
        context: str | None,
        context_mark: Any,
        problem: str,
        problem_mark: Any,
        *,
        path: list[str | int] | None = None,
    ) -> None:
        super().__init__(context, context_mark, problem, problem_mark)
        self.path = path


class _BoundedLoader(yaml.SafeLoader):
    """``SafeLoader`` that counts nesting while composing and may refuse aliases.

    It keeps the path of keys and indexes to the node being composed, so a refusal
    names where in the document it is (``metadata.a.a…``), as JSON errors do.
    """

    # Only what a JSON store can hold is built as itself (see ._yaml_json).
    yaml_constructors = {**yaml.SafeLoader.yaml_constructors, **JSON_CONSTRUCTORS}

    def __init__(self, stream: str, *, aliases: bool) -> None:
        super().__init__(stream)
        self._aliases = aliases
        self._path: list[str | int] = []

    def _refuse(self, problem: str) -> _Refused:
        mark = self.peek_event().start_mark  # type: ignore[no-untyped-call]
        return _Refused(None, None, problem, mark, path=list(self._path))

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        # PyYAML passes the index in the parent sequence, the key node of a mapping
        # value, or None while composing a key (or the document's root).
        part: str | int | None
        if isinstance(index, int):
            part = index
        elif isinstance(index, ScalarNode):
            part = str(index.value)
        elif index is None:
            part = None
        else:
            part = "?"
        opens = self.check_event(yaml.MappingStartEvent, yaml.SequenceStartEvent)
        if part is not None:
            self._path.append(part)
        try:
            if self.check_event(yaml.AliasEvent) and not self._aliases:
                raise self._refuse("aliases (*name) are not accepted here")
            if opens and len(self._path) >= MAX_DEPTH:
                raise self._refuse(f"nested deeper than {MAX_DEPTH} levels")
            return super().compose_node(parent, index)
        finally:
            if part is not None:
                self._path.pop()


def _children(node: Node) -> list[Node]:
    if isinstance(node, SequenceNode):
        return list(node.value)
    if isinstance(node, MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def _check_expansion(root: Node) -> None:
    """Refuse a node graph that expands past :data:`MAX_YAML_NODES`, or loops.

    An iterative depth-first walk: ``open`` holds the nodes whose subtree is being
    counted — exactly the ancestors of the node in hand — so meeting one of them again
    is a recursive alias.
    """
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()
    stack: list[tuple[Node, bool]] = [(root, False)]
    while stack:
        node, finished = stack.pop()
        key = id(node)
        if finished:
            open_nodes.discard(key)
            total = 1 + sum(sizes[id(child)] for child in _children(node))
            if total > MAX_YAML_NODES:
                raise _Refused(
                    None,
                    None,
                    f"the document expands to more than {MAX_YAML_NODES} nodes "
                    "(aliases repeat what they name)",
                    node.start_mark,
                )
            sizes[key] = total
            continue
        if key in sizes:
            continue
        open_nodes.add(key)
        stack.append((node, True))
        for child in _children(node):
            if id(child) in open_nodes:
                raise _Refused(
                    None, None, "a recursive alias (a node inside itself)", child.start_mark
                )
            if id(child) not in sizes:
                stack.append((child, False))


def _compose(text: str, aliases: bool) -> Any:
    loader = _BoundedLoader(text, aliases=aliases)
    try:
        root = loader.get_single_node()
        if root is None:
            return None
        if aliases:
            _check_expansion(root)
        return loader.construct_document(root)
    finally:
        loader.dispose()


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
    if len(text) > MAX_YAML_CHARS:
        raise SpecError.at("$", f"{what} is longer than {MAX_YAML_CHARS} characters")
    try:
        data = _compose(text, aliases)
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
