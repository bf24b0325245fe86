"""Configuration read from the environment.

``OMNIGENT_HOME`` (default ``~/.omnigent``) holds the default database and the
per-session workspaces; ``OMNIGENT_DB`` overrides the database URL the command line
uses. ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY`` are read by the ``loop`` harness and
``OMNIGENT_ELICITATION_MODE`` by the elicitation core, where they are used.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["default_db_url", "omnigent_home"]


def omnigent_home() -> Path:
    """``$OMNIGENT_HOME``, else ``~/.omnigent`` (``~`` expanded)."""
    return Path(os.environ.get("OMNIGENT_HOME") or "~/.omnigent").expanduser()


def default_db_url() -> str:
    """``$OMNIGENT_DB``, else ``sqlite:///$OMNIGENT_HOME/omnigent.db``: the CLI's store."""
    return os.environ.get("OMNIGENT_DB") or f"sqlite:///{omnigent_home() / 'omnigent.db'}"
