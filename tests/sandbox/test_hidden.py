"""The hidden-entry scan: what a sandbox masks under its roots (no bubblewrap needed)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from omnigent.processes.sandbox import Overflow, scan_hidden
from omnigent.processes.sandbox._hidden import HiddenScanOverflow


def tree(root: Path) -> Path:
    for path in ("a/.env", "a/b/.npmrc", ".git/config", ".venv/bin/python", "src/x.py"):
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text("x")
    (root / "node_modules" / "pkg").mkdir(parents=True)
    (root / "node_modules" / "pkg" / ".npmignore").write_text("x")
    (root / ".link").symlink_to("src")
    return root


def scan(root: Path, **options: object) -> tuple[set[str], set[str]]:
    settings: dict[str, object] = {
        "allow": frozenset({".venv"}),
        "max_entries": 1000,
        "overflow": Overflow.WARN,
        **options,
    }
    found = scan_hidden([root], **settings)  # type: ignore[arg-type]
    rel = lambda paths: {str(p.relative_to(root)) for p in paths}  # noqa: E731
    return rel(found.dirs), rel(found.files)


def test_hidden_entries_at_any_depth_are_found_and_masked_dirs_not_entered(
    tmp_path: Path,
) -> None:
    dirs, files = scan(tree(tmp_path))
    assert dirs == {".git"}  # .venv is allowed; .git/config is not looked at
    assert files == {"a/.env", "a/b/.npmrc", "node_modules/pkg/.npmignore"}


def test_allowed_names_kept_paths_and_star(tmp_path: Path) -> None:
    root = tree(tmp_path)
    dirs, files = scan(root, allow=frozenset({".git", ".venv"}), keep=frozenset({root / "a/.env"}))
    assert dirs == set() and files == {"a/b/.npmrc", "node_modules/pkg/.npmignore"}
    assert scan(root, allow=frozenset({"*"})) == (set(), set())


def test_node_modules_is_walked_last(tmp_path: Path) -> None:
    root = tmp_path
    (root / "node_modules" / "p").mkdir(parents=True)
    for n in range(50):
        (root / "node_modules" / "p" / f".f{n}").write_text("x")
    (root / "zsrc" / "deep").mkdir(parents=True)
    (root / "zsrc" / "deep" / ".env").write_text("x")
    _, files = scan(root, max_entries=5)
    assert files == {"zsrc/deep/.env"}


def test_overflow(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    root = tree(tmp_path)
    with pytest.raises(HiddenScanOverflow, match="cwd_hidden_scan_max_entries"):
        scan(root, max_entries=3, overflow=Overflow.ERROR)
    with caplog.at_level(logging.WARNING):
        found = scan_hidden([root], allow=frozenset(), max_entries=3, overflow=Overflow.WARN)
    assert found.truncated and "stopped at 3 entries" in caplog.text
    assert not scan_hidden(
        [root], allow=frozenset(), max_entries=3, overflow=Overflow.UNLIMITED
    ).truncated
