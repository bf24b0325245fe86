"""Which ``function`` policies may run: only the ones the operator allowed.

A ``function`` policy runs Python code, so the reference in a spec must not be able to
name just any importable callable: anyone who can register an agent could otherwise
stop the server (``sys:exit``), run a shell (``subprocess:getoutput``), or run a
module's import-time code merely by naming it (``unittest.__main__:main``). A
:class:`PolicyAllowlist` holds what the operator allowed, and answers two questions:

* :meth:`PolicyAllowlist.problem` — is this reference allowed? Answered from names
  alone: **nothing is imported** for a reference that is not allowed.
* :meth:`PolicyAllowlist.resolve` — the callable, importing only what is allowed.

What counts as allowed, in the order a reference is looked up:

1. a callable registered in Python (``open_runtime(policy_functions=...)``), by the
   name it was registered under (by default ``"module:qualname"``);
2. an entry point of the ``omnigent.policies`` group (an installed package's
   ``[project.entry-points."omnigent.policies"]``), by its name or its value;
3. a reference named by the operator's own default policies (``serve --policies
   FILE``, ``open_runtime(default_policies=...)``), exactly as written there;
4. a callable *defined in* a module the operator listed (``serve --policy-module
   NAME``, ``open_runtime(policy_modules=...)``): ``NAME:attr``, ``NAME.attr`` or
   ``NAME:Class.method``. The path after the module may not pass through another
   module or a dunder name, and the callable's ``__module__`` must be ``NAME`` — so an
   allowed module's own imports (``NAME:os.system``, a ``from sys import exit``) are
   not reachable through it. Exactly the module listed: not its parent, not its
   submodules.

Error handling: :meth:`PolicyAllowlist.resolve` raises
:class:`~omnigent.errors.InvalidInput`, also for a reference that is not allowed.

The same rules decide which Python tools a client's spec may name (``tools.python``:
``serve --tool-module``, ``open_runtime(tool_functions=..., tool_modules=...)``):
:class:`CallableAllowlist` is the rule, and each use sets what it is called and how the
operator allows more (:class:`PolicyAllowlist` here; ``ToolAllowlist`` in
:mod:`omnigent.core.tools._python_tools`, without entry points).
"""

from __future__ import annotations

import functools
import importlib
import inspect
import logging
import re
from collections.abc import Callable, Iterable, Mapping
from importlib.metadata import EntryPoint, entry_points
from typing import Any, ClassVar, Final, TypeAlias

from ...errors import InvalidInput
from ._policy_functions import PolicyFunction, load_function

__all__ = [
    "ENTRY_POINT_GROUP",
    "CallableAllowlist",
    "PolicyAllowlist",
    "PolicyFunctions",
    "function_name",
]

log = logging.getLogger("omnigent.core.tools")

ENTRY_POINT_GROUP: Final = "omnigent.policies"

PolicyFunctions: TypeAlias = Mapping[str, PolicyFunction] | Iterable[PolicyFunction]
"""What ``open_runtime(policy_functions=...)`` takes: callables by name, or callables
(each then named ``"module:qualname"``)."""

_MODULE: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")


def function_name(fn: Callable[..., Any]) -> str:
    """The name a callable is registered under by default: ``"module:qualname"``."""
    module = getattr(fn, "__module__", None) or type(fn).__module__
    qualname = getattr(fn, "__qualname__", None) or type(fn).__qualname__
    return f"{module}:{qualname}"


class CallableAllowlist:
    """The callables an operator allowed a spec to name (see the module docstring).

    A subclass says what they are for (:attr:`what`), where a bad argument is reported
    (:attr:`modules_loc`, :attr:`functions_loc`), how an operator allows more
    (:attr:`how_to_allow`), and which entry-point group it reads, if any.

    Args:
        functions: callables registered in Python, by name (or a plain iterable of
            callables, each named by :func:`function_name`).
        modules: modules whose own callables policies may name.
        trusted: references the operator wrote themselves (default policies).
        load_entry_points: read the ``omnigent.policies`` entry-point group (only the
            metadata, when a reference is first checked: an entry point's module is
            imported when a policy first uses it).

    Raises:
        InvalidInput: a module name that is not a dotted Python name (at
            ``policy_modules``), a registered name that is empty or a registered value
            that is not callable (at ``policy_functions``).
    """

    what: ClassVar[str] = "function"
    modules_loc: ClassVar[str] = "modules"
    functions_loc: ClassVar[str] = "functions"
    how_to_allow: ClassVar[str] = "only functions the operator allowed may run"
    entry_point_group: ClassVar[str | None] = None

    def __init__(
        self,
        *,
        functions: PolicyFunctions | None = None,
        modules: Iterable[str] = (),
        trusted: Iterable[str] = (),
        load_entry_points: bool = True,
    ) -> None:
        self._functions = _named(functions, self.functions_loc)
        self._modules = frozenset(modules)
        for module in self._modules:
            if not isinstance(module, str) or not _MODULE.fullmatch(module):
                raise InvalidInput.at(self.modules_loc, f"not a Python module name: {module!r}")
        self._trusted = frozenset(trusted)
        self._entry_point_group = self.entry_point_group if load_entry_points else None

    @functools.cached_property
    def _entry_points(self) -> dict[str, EntryPoint]:
        # Read when a reference is first checked, not when the runtime opens: scanning
        # every installed distribution's metadata is ≈ 10 ms a server paid before its
        # first request (benchmarks/startup.py).
        group = self._entry_point_group
        return {} if group is None else _read_entry_points(group)

    @property
    def modules(self) -> frozenset[str]:
        """The modules whose own callables may be named."""
        return self._modules

    def problem(self, ref: str) -> str | None:
        """Why ``ref`` may not be used, or ``None`` if it may. Imports nothing."""
        if (
            ref in self._functions
            or ref in self._entry_points
            or ref in self._trusted
            or self._allowed_module(ref) is not None
        ):
            return None
        return f"{ref!r} is not an allowed {self.what}; {self.how_to_allow}"

    def resolve(self, ref: str) -> PolicyFunction:
        """The callable ``ref`` names, if it is allowed.

        Blocking (it may import the allowed module): from async code, call it in a
        worker thread.

        Raises:
            InvalidInput: ``ref`` is not allowed (nothing was imported), or it is and
                cannot be loaded.
        """
        if ref in self._functions:
            return self._functions[ref]
        if ref in self._entry_points:
            return _load_entry_point(self._entry_points[ref])
        if ref in self._trusted:
            return load_function(ref)
        allowed = self._allowed_module(ref)
        if allowed is None:
            raise InvalidInput(f"{ref!r} is not an allowed {self.what}; {self.how_to_allow}")
        return _load_defined_in(ref, *allowed, what=self.what)

    def _allowed_module(self, ref: str) -> tuple[str, list[str]] | None:
        """``(module, attribute path)`` when ``ref`` names into an allowed module."""
        module, colon, attr_path = ref.partition(":")
        if colon:
            if module in self._modules and attr_path:
                return module, attr_path.split(".")
            return None
        parts = ref.split(".")
        for cut in range(len(parts) - 1, 0, -1):
            prefix = ".".join(parts[:cut])
            if prefix in self._modules:
                return prefix, parts[cut:]
        return None


class PolicyAllowlist(CallableAllowlist):
    """The function policies an operator allowed (see the module docstring)."""

    what = "policy function"
    modules_loc = "policy_modules"
    functions_loc = "policy_functions"
    how_to_allow = (
        "only functions the operator allowed may run: list the module with "
        "'serve --policy-module MODULE', install it in the omnigent.policies entry-point "
        "group, or register the callable with open_runtime(policy_functions=...)"
    )
    entry_point_group = ENTRY_POINT_GROUP


def _named(functions: PolicyFunctions | None, loc: str) -> dict[str, PolicyFunction]:
    if functions is None:
        return {}
    pairs = (
        functions.items()
        if isinstance(functions, Mapping)
        else ((function_name(fn), fn) for fn in functions)
    )
    named: dict[str, PolicyFunction] = {}
    for name, fn in pairs:
        if not isinstance(name, str) or not name:
            raise InvalidInput.at(loc, f"needs a non-empty name, got {name!r}")
        if not callable(fn):
            problem = f"{name!r} is a {type(fn).__name__}, not callable"
            raise InvalidInput.at(loc, problem)
        named[name] = fn
    return named


def _read_entry_points(group: str) -> dict[str, EntryPoint]:
    """The group's entry points by name and by value (the first of a name wins)."""
    found: dict[str, EntryPoint] = {}
    for ep in entry_points(group=group):
        for key in (ep.name, ep.value):
            if key in found and found[key].value != ep.value:
                log.warning("policy entry point %r is defined twice; using the first", key)
                continue
            found.setdefault(key, ep)
    return found


def _load_entry_point(ep: EntryPoint) -> PolicyFunction:
    try:
        fn = ep.load()
    except (Exception, SystemExit) as exc:
        raise InvalidInput(f"cannot load policy entry point {ep.name!r}: {exc!r}") from exc
    if not callable(fn):
        raise InvalidInput(f"policy entry point {ep.name!r} is a {type(fn).__name__}")
    return fn  # type: ignore[no-any-return]


def _load_defined_in(
    ref: str, module_name: str, attr_path: list[str], *, what: str
) -> PolicyFunction:
    """The callable at ``attr_path`` in the allowed ``module_name``, defined there."""
    try:
        target: Any = importlib.import_module(module_name)
    except (Exception, SystemExit) as exc:  # an import may call sys.exit (unittest.__main__)
        raise InvalidInput(f"cannot load {ref!r}: importing {module_name} raised {exc!r}") from exc
    for attr in attr_path:
        if not attr.isidentifier() or (attr.startswith("__") and attr.endswith("__")):
            raise InvalidInput(f"cannot load {ref!r}: {attr!r} is not a {what} name")
        try:
            target = getattr(target, attr)
        except AttributeError as exc:
            raise InvalidInput(f"cannot load {ref!r}: {module_name} has no {attr!r}") from exc
        if inspect.ismodule(target):
            raise InvalidInput(
                f"cannot load {ref!r}: {attr!r} is a module; only {module_name}'s own "
                "callables are allowed"
            )
    if not callable(target):
        raise InvalidInput(f"cannot load {ref!r}: {type(target).__name__} is not callable")
    defined_in = getattr(target, "__module__", None) or type(target).__module__
    if defined_in != module_name:
        raise InvalidInput(
            f"cannot load {ref!r}: it is defined in {defined_in}, not in {module_name}; "
            f"only {module_name}'s own callables are allowed"
        )
    return target  # type: ignore[no-any-return]
