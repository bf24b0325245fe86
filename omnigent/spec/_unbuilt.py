"""Spec keys whose feature is not built yet: refused, never silently ignored.

The spec's shape is the whole contract (``API.md``, "Agent spec"), so a key can parse
before the runtime does anything with it. Until its feature lands, a spec that sets it
is refused at registration with an error naming the key — a user who writes
``terminals:`` must not believe they got terminals.

:data:`UNBUILT` is the one table to edit: when a feature lands, delete its rows. A key
set to its default (``spawn: false``, ``sub_agents: []``) asks for nothing and passes.
"""

from __future__ import annotations

from typing import Any, Final

import attrs

from ..errors import ErrorDetail

__all__ = ["UNBUILT", "unbuilt_keys"]

UNBUILT: Final[dict[str, str]] = {
    # spec key (dotted path)     the feature it asks for
    "os_env.fork": "forking the working directory for each session",
    "os_env.start_in_scratch": "starting the sandbox in a scratch directory",
}


def unbuilt_keys(spec: Any) -> list[ErrorDetail]:
    """One problem per :data:`UNBUILT` key that ``spec`` (an ``AgentSpec``) sets."""
    problems = []
    for key, feature in UNBUILT.items():
        if _is_set(spec, key.split(".")):
            message = f"needs {feature}, which this omnigent does not have yet: remove the key"
            problems.append(ErrorDetail(key, message))
    return problems


def _is_set(obj: Any, path: list[str]) -> bool:
    """Whether the attrs field at ``path`` holds something other than its default."""
    *parents, name = path
    for part in parents:
        obj = getattr(obj, part)
        if obj is None:
            return False  # an optional block that is absent sets nothing
    field = attrs.fields_dict(type(obj))[name]
    default: Any = field.default
    if isinstance(default, attrs.Factory):  # type: ignore[arg-type]
        default = default.factory()
    value = getattr(obj, name)
    return bool(value != default)
