"""A session's settings its client may change for the next turns: :class:`SessionTuning`.

Today one: the sampling temperature (ACP's ``temperature`` config option, category
``model_config``). It overrides the spec's ``executor.config.temperature`` when the
:class:`~._builder.Builder` makes the session's harness, so a harness that reads its
config (``loop``) uses it from the next turn on. Kept in memory, as standing answers
are: a restart forgets it; a deleted session's goes with it.
"""

from __future__ import annotations

import attrs

from ...errors import InvalidInput
from ...spec import ExecutorConfig

__all__ = ["MAX_TEMPERATURE", "SessionTuning"]

MAX_TEMPERATURE = 2.0


class SessionTuning:
    """Per-session overrides of a spec's model settings. Owned by the ``Runtime``."""

    def __init__(self) -> None:
        self._temperatures: dict[str, float] = {}

    def temperature(self, session_id: str) -> float | None:
        """The session's temperature, or ``None`` (the spec's)."""
        return self._temperatures.get(session_id)

    def set_temperature(self, session_id: str, temperature: float | None) -> None:
        """Set (or, with ``None``, clear) the session's temperature.

        Raises:
            InvalidInput: at ``temperature``, for anything but a number in 0..2.
        """
        if temperature is None:
            self._temperatures.pop(session_id, None)
            return
        number = isinstance(temperature, int | float) and not isinstance(temperature, bool)
        if not number or not 0 <= temperature <= MAX_TEMPERATURE:
            raise InvalidInput.at("temperature", "must be a number between 0 and 2")
        self._temperatures[session_id] = float(temperature)

    def forget(self, session_id: str) -> None:
        """Drop a (deleted) session's settings."""
        self._temperatures.pop(session_id, None)

    def applied(self, session_id: str, config: ExecutorConfig) -> ExecutorConfig:
        """``config`` as the session's harness should see it."""
        temperature = self._temperatures.get(session_id)
        if temperature is None or temperature == config.temperature:
            return config
        return attrs.evolve(config, temperature=temperature)
