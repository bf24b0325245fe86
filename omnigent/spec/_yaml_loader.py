"""The bounded YAML loader under :func:`~._yaml.load_yaml`: a ``SafeLoader`` that
counts nesting while composing (and may refuse aliases), and the walk that bounds a
document's expanded size. See :mod:`._yaml` for the bounds and why.

Imported by the first document read (it imports PyYAML).
"""

from __future__ import annotations

from typing import Any

import yaml
from yaml.composer import ComposerError
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from ..model._depth import MAX_DEPTH
from ._yaml_json import JSON_CONSTRUCTORS

__all__ = ["compose"]


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


def _check_expansion(root: Node, max_nodes: int) -> None:
    """Refuse a node graph that expands past ``max_nodes``, or loops.

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
            if total > max_nodes:
                raise _Refused(
                    None,
                    None,
                    f"the document expands to more than {max_nodes} nodes "
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


def compose(text: str, aliases: bool, max_nodes: int) -> Any:
    """The document ``text`` composed within the bounds (with ``aliases``, expanding
    to at most ``max_nodes`` nodes), then constructed.

    Raises:
        yaml.YAMLError: invalid YAML, or a bound broken (with the path where).
    """
    loader = _BoundedLoader(text, aliases=aliases)
    try:
        root = loader.get_single_node()
        if root is None:
            return None
        if aliases:
            _check_expansion(root, max_nodes)
        return loader.construct_document(root)
    finally:
        loader.dispose()
