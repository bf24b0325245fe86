"""Examples in docs/ that are whole programs run as they stand, failures included."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def first_python_block(doc: str) -> str:
    text = (REPO / "docs" / doc).read_text(encoding="utf-8")
    return text.split("```python\n", 1)[1].split("```", 1)[0]


def run(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_the_tools_example_reads_with_a_str_working_directory(tmp_path: Path) -> None:
    (tmp_path / "README.md").write_text("one\ntwo\n")
    done = run(first_python_block("tools.md"), tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "one\ntwo\n"


def test_the_tools_example_shows_a_failure(tmp_path: Path) -> None:
    done = run(first_python_block("tools.md"), tmp_path)  # no README.md here
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("Error: "), done.stdout
    assert "README.md" in done.stdout


def test_the_subagents_example_sees_its_children_finish() -> None:
    done = run(first_python_block("subagents.md"), REPO)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert {"counter apples completed", "counter pears completed", "slow report completed"} <= set(
        lines
    )
    children = [line.split()[1] for line in lines if line.startswith("conv_")]
    assert sorted(children) == ["counter:apples", "counter:pears", "slow:report"]
