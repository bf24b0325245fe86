"""The models a single-vendor harness runs: :class:`ModelRule`, and the rules of the
native harnesses (:data:`CLAUDE_MODELS`, :data:`GPT_MODELS`).

Pure, and apart from :mod:`omnigent.harnesses.native` (which re-exports them) so that
the registry can hold each harness's rule without importing the harnesses themselves:
a server imports a native harness when a session first uses it.
"""

from __future__ import annotations

import fnmatch

import attrs

__all__ = ["CLAUDE_MODELS", "GPT_MODELS", "ModelRule"]


@attrs.frozen
class ModelRule:
    """The models a single-vendor harness runs.

    Attributes:
        family: what the rule says (``Claude models``).
        patterns: case-insensitive :mod:`fnmatch` patterns a model name must match.
        examples: names to show in listings (``sys_list_models``).
    """

    family: str
    patterns: tuple[str, ...]
    examples: tuple[str, ...] = ()

    def accepts(self, model: str) -> bool:
        name = model.lower()
        return any(fnmatch.fnmatchcase(name, pattern) for pattern in self.patterns)

    def refusal(self, harness: str, model: str) -> str | None:
        """The message refusing ``model`` on ``harness``, or ``None`` if it may run it."""
        if self.accepts(model):
            return None
        return (
            f"harness {harness!r} only runs {self.family} ({', '.join(self.patterns)}); "
            f"{model!r} is not one"
        )


CLAUDE_MODELS = ModelRule(
    "Claude models",
    ("*claude*", "sonnet", "opus", "haiku", "opusplan"),
    ("claude-opus-5-5", "claude-sonnet-4-5", "claude-haiku-4-5", "opus", "sonnet", "haiku"),
)
GPT_MODELS = ModelRule(
    "GPT models",
    ("*gpt*", "*codex*", "o[1-9]*"),
    ("gpt-5.5", "gpt-5-codex", "o4-mini"),
)
"""What Codex runs: an id naming ``gpt`` or ``codex`` anywhere — a gateway's spelling
(``databricks-gpt-5-4``) included — or an ``o``-series id."""
