"""The runner token a server leaves its own user beside the store's lock
(``<store>.runner-token``): private, never through a link, ignored unless it is the
user's own private regular file, removed only by the server that wrote it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from omnigent.stores import forget_runner_token, local_runner_token, publish_runner_token


def test_written_private_and_read_back(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'omnigent.db'}"
    token_file = tmp_path / "omnigent.db.runner-token"
    token_file.write_text("old")
    token_file.chmod(0o644)
    assert publish_runner_token(db, "t0ken")
    assert token_file.stat().st_mode & 0o777 == 0o600  # an old file's mode is reset
    assert local_runner_token(db) == "t0ken"
    token_file.chmod(0o640)  # others may read it: no longer a secret, not used
    assert local_runner_token(db) is None
    token_file.chmod(0o600)
    forget_runner_token(db, "another server's")
    assert token_file.exists()  # a newer server's file stays
    forget_runner_token(db, "t0ken")
    assert not token_file.exists()
    assert local_runner_token(db) is None


def test_a_link_is_never_followed(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'omnigent.db'}"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_text("planted")
    elsewhere.chmod(0o600)
    os.symlink(elsewhere, tmp_path / "omnigent.db.runner-token")
    with pytest.raises(OSError):
        publish_runner_token(db, "t0ken")
    assert elsewhere.read_text() == "planted"
    assert local_runner_token(db) is None


def test_no_token_for_memory_or_postgres() -> None:
    assert not publish_runner_token(None, "t")
    assert not publish_runner_token("postgresql://u@h/db", "t")
    assert local_runner_token("postgresql://u@h/db") is None
