"""Model ids: what a clean one looks like, its vendor family, and its local spelling.

Pure functions, no I/O. A model id asked for by an orchestrator (``sys_session_send``
``args.model``) crosses into a child's harness — a command line, an HTTP body — so it
is checked against a conservative character set first (:func:`check_model_id`). Then:

* the **family guard** is the harness registry's (``HarnessRegistry.model_problem``):
  a single-vendor harness refuses an id of another family, checked on the id exactly as
  it was asked for, before localisation, so the error quotes the caller's own words;
* **localisation** (:func:`localise_model`): the same model is spelled differently by a
  vendor (``claude-sonnet-4-6``) and by a gateway whose ids carry a prefix
  (``databricks-claude-sonnet-4-6``). A bare canonical id gets the gateway's prefix, a
  gateway id loses it for a vendor-direct provider (an API key or a CLI login); ids that
  are already local, vendor-prefixed (``anthropic/claude-x``, ``us.anthropic.claude-x``)
  or of no known family pass through, and so does every id when the provider cannot be
  determined.
"""

from __future__ import annotations

import re
from typing import Literal

from ._config import Provider

__all__ = [
    "MAX_MODEL_ID",
    "canonical_spelling",
    "check_model_id",
    "family_of",
    "localise_model",
]

MAX_MODEL_ID = 200

# A letter or digit first, so an id can never read as a command-line flag
# (``--model --evil``); then the characters real ids use (``gpt-4.1-mini``,
# ``openai/gpt-4o``, ``vendor:tag``, ``name@version``). Also a valid model_override.
_MODEL_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/@-]*")

# Bare canonical vendor ids, the only ones with a mechanical gateway spelling.
_CANONICAL = re.compile(r"(?:claude|gpt)-[a-z0-9][a-z0-9.-]*")

# Gateways whose prefix is known even when the configuration names none.
WELL_KNOWN_PREFIXES = ("databricks-",)


def check_model_id(value: object) -> str:
    """``value`` as a model id, surrounding whitespace removed.

    Raises:
        ValueError: it is not a string, is blank, is too long, or holds a character
            outside letters, digits and ``. _ : / @ -`` (spaces and shell characters
            included), or does not start with a letter or digit. The message says
            which, in words a model can act on.
    """
    if not isinstance(value, str):
        # One exception type for every way an id is wrong: callers catch one.
        raise ValueError(f"'model' must be a string, got {_kind(value)}")  # noqa: TRY004
    stripped = value.strip()
    if not stripped:
        raise ValueError("'model' must not be blank")
    if len(stripped) > MAX_MODEL_ID:
        raise ValueError(f"'model' is longer than {MAX_MODEL_ID} characters")
    if not _MODEL_ID.fullmatch(stripped):
        raise ValueError(
            f"'model' {stripped!r} is not a model id: it must start with a letter or digit "
            "and hold only letters, digits and . _ : / @ - (no spaces or shell characters)"
        )
    return stripped


def _kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, list | tuple):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def family_of(model: str) -> Literal["claude", "openai", "other"]:
    """The vendor family a model id names by its tokens (a label for listings)."""
    lower = model.lower()
    if "claude" in lower:
        return "claude"
    if "gpt" in lower or "codex" in lower:
        return "openai"
    return "other"


def canonical_spelling(model: str, prefixes: tuple[str, ...] = WELL_KNOWN_PREFIXES) -> str:
    """``model`` without a gateway prefix, when what remains is a canonical vendor id."""
    for prefix in prefixes:
        if prefix and model.startswith(prefix) and _CANONICAL.fullmatch(model[len(prefix) :]):
            return model[len(prefix) :]
    return model


def localise_model(
    model: str, provider: Provider | None, gateway_prefixes: tuple[str, ...] = ()
) -> str:
    """How ``model`` is spelled for a child routed through ``provider``.

    Args:
        model: a checked id (:func:`check_model_id`).
        provider: the provider the child's harness uses; ``None`` when it cannot be
            determined (the id passes untouched).
        gateway_prefixes: the prefixes of every gateway the configuration knows (the
            ones a vendor-direct provider strips), besides the well-known ones.
    """
    if provider is None:
        return model
    if provider.kind == "gateway":
        prefix = provider.model_prefix
        if prefix and not model.startswith(prefix) and _CANONICAL.fullmatch(model):
            return prefix + model
        return model
    known = tuple(dict.fromkeys((*gateway_prefixes, *WELL_KNOWN_PREFIXES)))
    return canonical_spelling(model, known)
