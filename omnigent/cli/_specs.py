"""Spec files the person at the terminal names: theirs, and trusted as theirs.

``omnigent run PATH``, ``chat PATH`` and ``agents add PATH`` read a spec file the
operator wrote, so what it names is allowed as the operator's own: the callables of its
``function`` policies are imported and allowed (:class:`OperatorSpec`). A module beside
the spec file is importable — the file's folder goes on the import path, as Python does
for a script's folder — so ``function: mypol:check`` finds ``mypol.py`` next to the spec
wherever the command runs from.
"""

from __future__ import annotations

from typing import Any

import attrs

from ..core import PolicyFunction
from ..core import load_policy_function as load_function
from ..errors import BadRequest, SpecError
from ..spec import AgentSpec, agent_references, importable_beside

__all__ = ["OperatorSpec", "load_spec"]


def load_spec(path: str) -> AgentSpec:
    """The spec in ``path``.

    Raises:
        BadRequest: the file cannot be read. SpecError: it is not a valid spec.
    """
    try:
        return AgentSpec.load(path)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise BadRequest(f"cannot read agent spec {path!r}: {reason}") from exc
    except UnicodeDecodeError as exc:
        raise BadRequest(f"cannot read agent spec {path!r}: not UTF-8 text") from exc
    except SpecError as exc:
        raise SpecError(f"{path}: {exc.message}", exc.details) from exc


@attrs.frozen
class OperatorSpec:
    """A spec file of the operator's, and what it may name because it is theirs."""

    path: str
    spec: AgentSpec
    policy_functions: dict[str, PolicyFunction] = attrs.field(factory=dict, eq=False)

    @classmethod
    def read(cls, path: str) -> OperatorSpec:
        """Read ``path``, make its folder importable, and import its own policy functions.

        Raises:
            BadRequest, SpecError: as :func:`load_spec`. InvalidInput: a ``function``
                reference cannot be imported.
        """
        spec = load_spec(path)
        importable_beside(path)
        refs = dict.fromkeys(p.function for p in spec.policies if p.function is not None)
        functions = {ref: load_function(ref) for ref in refs if ":" in ref or "." in ref}
        return cls(path, spec, functions)

    def runtime_options(self, *, policy_modules: tuple[str, ...] = ()) -> dict[str, Any]:
        """What ``open_runtime`` needs to allow what this spec names: its function
        policies, and the modules of the ``openai-agents`` agents it names (imported
        only in their harness's process)."""
        agents = tuple(ref.partition(":")[0] for ref in agent_references(self.spec))
        return {
            "policy_functions": self.policy_functions,
            "policy_modules": (*policy_modules, *agents),
        }
