"""Harness names, aliases and factories: one registry per runtime.

Built in: ``loop`` (aliases ``agent``, ``default``, ``omnigent``, ``openai``),
``scripted`` (aliases ``script``, ``mock``) and ``external`` (the program named
by ``executor.config.command``, see :mod:`omnigent.harnesses.subprocess`). Packages
add harnesses through the ``omnigent.harnesses`` entry-point group: each entry point
loads a factory (a callable ``HarnessEnv -> Harness``, such as
:func:`omnigent.harnesses.subprocess.external_harness` builds) registered under the
entry point's name.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from importlib.metadata import entry_points

import attrs

from ..errors import Conflict, UnknownHarness
from .base import Harness, HarnessEnv, HarnessFactory

__all__ = ["HarnessInfo", "HarnessRegistry"]

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "omnigent.harnesses"


@attrs.frozen
class HarnessInfo:
    name: str
    factory: HarnessFactory
    aliases: tuple[str, ...] = ()


def _make_loop(env: HarnessEnv) -> Harness:
    from .loop import LoopHarness

    return LoopHarness(env)


def _make_scripted(env: HarnessEnv) -> Harness:
    from .scripted import ScriptedHarness

    return ScriptedHarness(env)


def _make_external(env: HarnessEnv) -> Harness:
    from .subprocess import make_external

    return make_external(env)


class HarnessRegistry:
    """Maps names and aliases to harness factories."""

    def __init__(self, *, builtins: bool = True) -> None:
        self._harnesses: dict[str, HarnessInfo] = {}
        self._aliases: dict[str, str] = {}
        if builtins:
            self.register("loop", _make_loop, aliases=("agent", "default", "omnigent", "openai"))
            self.register("scripted", _make_scripted, aliases=("script", "mock"))
            self.register("external", _make_external)

    def register(
        self,
        name: str,
        factory: HarnessFactory,
        *,
        aliases: Iterable[str] = (),
        replace: bool = False,
    ) -> None:
        """Register a harness under ``name`` (and ``aliases``).

        Raises:
            Conflict: a name or alias is taken and ``replace`` is false.
        """
        aliases = tuple(aliases)
        for key in (name, *aliases):
            if not replace and (key in self._harnesses or key in self._aliases):
                raise Conflict(f"harness name {key!r} is already registered")
        self._harnesses[name] = HarnessInfo(name, factory, aliases)
        self._aliases.pop(name, None)
        for alias in aliases:
            self._aliases[alias] = name

    def load_entry_points(self) -> None:
        """Register every harness advertised in the ``omnigent.harnesses`` group."""
        for ep in entry_points(group=ENTRY_POINT_GROUP):
            if ep.name in self._harnesses or ep.name in self._aliases:
                continue
            try:
                self.register(ep.name, ep.load())
            except Exception:
                log.warning("could not load harness entry point %s", ep.name, exc_info=True)

    def canonical(self, name: str) -> str:
        """The canonical name for ``name`` or an alias of it.

        Raises:
            UnknownHarness: nothing is registered under ``name``.
        """
        if name in self._harnesses:
            return name
        if name in self._aliases:
            return self._aliases[name]
        raise UnknownHarness(name, self.names())

    def known(self, name: str) -> bool:
        """Whether ``name`` is a registered name or alias."""
        return name in self._harnesses or name in self._aliases

    def names(self) -> list[str]:
        return sorted(self._harnesses)

    def create(self, name: str, env: HarnessEnv) -> Harness:
        """A new harness instance for one session."""
        return self._harnesses[self.canonical(name)].factory(env)
