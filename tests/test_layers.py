"""The layers of ``omnigent/``, read from the source: who may import whom.

Three rules, each checked over every module of the package (nothing is imported; the
source is parsed, late imports inside functions included, ``if TYPE_CHECKING:``
blocks left out):

1. **Curated fronts.** A package's private modules (``pkg._x``) are imported only
   from inside that package; everyone else goes through its ``__init__``.
2. **Layers.** Every import points to the same layer or a lower one of
   :data:`LAYERS` (the table ``docs/architecture.md`` draws). A re-export is followed
   to the module that defines the name, so a package's ``__init__`` cannot hide an
   upward import.
3. **No cycle across packages.** Import cycles stay inside one package.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

import omnigent

ROOT = Path(omnigent.__file__).parent

LAYERS: list[tuple[str, ...]] = [
    # Shared ground: ids, configuration, the exception tree, small helpers.
    (
        "omnigent._ids",
        "omnigent._version",
        "omnigent._config",
        "omnigent._gc",
        "omnigent._cancellation",
        "omnigent._grouped",
        "omnigent._private",
        "omnigent._malloc",
        "omnigent.errors",
    ),
    ("omnigent.model",),
    # Traces, metrics, log lines: what every layer above reports through.
    ("omnigent.observability",),
    ("omnigent.outbound",),
    ("omnigent.spec",),
    ("omnigent.providers",),
    # What the core stands on, and what the client may use.
    ("omnigent.rpc", "omnigent.processes", "omnigent.stores"),
    # The runner link's wire, which both the runner and the server's side speak.
    ("omnigent.link",),
    ("omnigent.tools",),
    ("omnigent.harnesses",),
    # The tool bridge: what a native CLI reaches the turn through.
    ("omnigent.harnesses.bridge",),
    (
        "omnigent.harnesses.native",
        "omnigent.harnesses.external",
        "omnigent.harnesses.claude",
        "omnigent.harnesses.codex",
        "omnigent.harnesses.pi",
        "omnigent.harnesses.agents_sdk",
    ),
    ("omnigent.mcp",),
    # The core, lowest first: where work runs, the event log, asking people, the
    # work beside turns, a session's tools, a session, and the runtime over them all.
    ("omnigent.core.cluster",),
    ("omnigent.core.bus",),
    ("omnigent.core.asking",),
    ("omnigent.core.work",),
    ("omnigent.core.tools",),
    ("omnigent.core.session",),
    ("omnigent.core.runtime",),
    ("omnigent.core",),
    # The runner's side of a runner link: harnesses, tools and processes of a remote
    # machine (it needs no core); the server's side is a transport beside the others.
    ("omnigent.runner",),
    ("omnigent.transports.mcp",),
    ("omnigent.transports.runner",),
    ("omnigent.transports.acp",),
    ("omnigent.transports.http",),
    ("omnigent.transports",),
    ("omnigent.client",),
    ("omnigent.testing",),
    ("omnigent.cli",),
    ("omnigent", "omnigent.__main__"),
]
"""Every package (and top-level module) of ``omnigent/``, lowest layer first."""

# Private modules another package may import, each with its reason.
PRIVATE_EXCEPTIONS = {
    # The spec registers its cattrs hooks on the model's one wire converter, and
    # bounds nesting with the model's one depth rule.
    ("omnigent.spec", "omnigent.model._wire"),
    ("omnigent.spec", "omnigent.model._depth"),
}

# The client is a library for talking to a server: it must not drag the server in.
CLIENT_MAY_IMPORT = ("omnigent._", "omnigent.errors", "omnigent.model", "omnigent.rpc")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


MODULES = {_module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


def _is_package(module: str) -> bool:
    return MODULES[module].name == "__init__.py"


def _package_of(module: str) -> str:
    return module if _is_package(module) else module.rpartition(".")[0]


@cache
def _imports(module: str) -> tuple[tuple[str, str | None], ...]:
    """``(module, name)`` pairs ``module`` imports (``name`` None for ``import x``)."""
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    typing_only: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.dump(node.test):
            typing_only.update(id(inner) for inner in ast.walk(node))
    package = _package_of(module)
    found: list[tuple[str, str | None]] = []
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            found.extend((target, alias.name) for alias in node.names)
        elif isinstance(node, ast.Import):
            found.extend((alias.name, None) for alias in node.names)
    return tuple(found)


@cache
def _reexports(package: str) -> dict[str, str]:
    """What ``package``'s ``__init__`` takes from its own modules: name -> module."""
    return {
        name: target
        for target, name in _imports(package)
        if name is not None and target.startswith(package + ".")
    }


def _defining_module(target: str, name: str | None) -> str | None:
    """The omnigent module an import really reaches (re-exports followed)."""
    if name is not None and f"{target}.{name}" in MODULES:
        return f"{target}.{name}"
    seen: set[str] = set()
    while target in MODULES and _is_package(target) and name in _reexports(target):
        if target in seen:
            break
        seen.add(target)
        target = _reexports(target)[name]  # type: ignore[index]
    return target if target in MODULES else None


def _edges() -> Iterator[tuple[str, str]]:
    """Every ``(importer, imported module)`` edge, re-exports followed."""
    for module in MODULES:
        for target, name in _imports(module):
            reached = _defining_module(target, name)
            if reached is None or reached == module:
                continue
            if _is_package(module) and reached.startswith(module + "."):
                continue  # a package's front importing its own modules
            yield module, reached


def _layer_of(module: str) -> int:
    """The index in LAYERS of the most specific entry that contains ``module``."""
    best, best_len = -1, -1
    for index, members in enumerate(LAYERS):
        for member in members:
            inside = module == member or module.startswith(member + ".")
            if inside and len(member) > best_len:
                best, best_len = index, len(member)
    return best


def test_every_module_has_a_layer() -> None:
    assert [m for m in MODULES if _layer_of(m) < 0] == []
    named = {member for members in LAYERS for member in members}
    assert sorted(named - set(MODULES)) == []


def test_private_modules_are_imported_only_from_inside_their_package() -> None:
    offenders = []
    for module in MODULES:
        for target, name in _imports(module):
            for candidate in (target, f"{target}.{name}"):
                if candidate not in MODULES or _is_package(candidate):
                    continue
                owner, _, leaf = candidate.rpartition(".")
                if not leaf.startswith("_") or leaf == "__main__":
                    continue
                if module == owner or module.startswith(owner + "."):
                    continue
                if any(
                    module.startswith(who) and candidate == what for who, what in PRIVATE_EXCEPTIONS
                ):
                    continue
                offenders.append(f"{module} imports {candidate}")
    assert sorted(set(offenders)) == []


def test_imports_point_to_the_same_layer_or_lower() -> None:
    upward = [
        f"{importer} ({LAYERS[_layer_of(importer)][0]}) imports {imported}"
        f" ({LAYERS[_layer_of(imported)][0]})"
        for importer, imported in _edges()
        if _layer_of(imported) > _layer_of(importer)
        # A package may pick among its own subpackages (the harness registry does).
        and not imported.startswith(_package_of(importer) + ".")
    ]
    assert upward == []


def test_no_import_cycle_spans_packages() -> None:
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for importer, imported in _edges():
        graph[importer].add(imported)
    spanning = [
        sorted(component)
        for component in _strongly_connected(graph)
        if len({_package_of(m) for m in component}) > 1
    ]
    assert spanning == []


def test_the_client_imports_no_server_code() -> None:
    offenders = [
        f"{importer} imports {imported}"
        for importer, imported in _edges()
        if importer.startswith("omnigent.client")
        and not imported.startswith("omnigent.client")
        and not imported.startswith(CLIENT_MAY_IMPORT)
    ]
    assert offenders == []


def test_importing_the_client_loads_neither_quart_nor_the_core() -> None:
    code = (
        "import sys, omnigent.client\n"
        "loaded = sorted(m for m in sys.modules if m.startswith(('quart', 'hypercorn',"
        " 'omnigent.core', 'omnigent.transports', 'omnigent.stores', 'omnigent.harnesses')))\n"
        "print(loaded)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert out.stdout.strip() == "[]"


def _strongly_connected(graph: dict[str, set[str]]) -> list[set[str]]:
    """Tarjan's strongly connected components with more than one member."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(component)

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for node in graph:
        if node not in index:
            visit(node)
    return found


@pytest.mark.parametrize("members", LAYERS, ids=lambda members: members[0])
def test_layers_name_real_modules(members: tuple[str, ...]) -> None:
    assert all(member in MODULES for member in members)
