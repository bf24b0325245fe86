"""Running the pages of ``docs/`` as a newcomer would: their ``sh`` and ``python`` blocks.

A page's ``sh`` blocks run in order as one bash script (``set -euo pipefail``; whatever
it leaves in the background is stopped with it), and its ``python`` blocks as one
program — a *notebook*: each block in turn, in one ``async def`` body, so a block may
``await`` and use the names the page gave earlier. Both run in a sandbox: a copy of
the repository's ``examples/`` (and what a page names besides), a home of its own, this
checkout's ``omnigent`` on the path, no model key.

What the runner changes in the text, and only this: the ports a page names (6767,
8000, 8123) become free ones, and where a page says so, a value a reader would fill in
(``conv_123``) becomes a real one (:attr:`Page.values`). A page may also give the
notebook a few names of its own before its blocks (:attr:`Page.prelude`: an open
runtime ``rt``, a session) and code to run between two blocks (:attr:`Page.between`).
Templates a reader adapts to their own machines (hosts, keys, installs from PyPI) are
fenced ``text``, not ``sh``, and are not run.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import attrs

REPO = Path(__file__).resolve().parent.parent
DOCS = REPO / "docs"
BLOCK = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)
PORTS = ("6767", "8000", "8123")
RUNS = ("sh", "python")


def blocks(page: str, lang: str) -> list[str]:
    """The ``lang`` blocks of ``docs/page``, in order."""
    text = (DOCS / page).read_text(encoding="utf-8")
    return [code for kind, code in BLOCK.findall(text) if kind == lang]


def pages_with_runnable_blocks() -> set[str]:
    return {
        path.name
        for path in DOCS.glob("*.md")
        if any(kind in RUNS for kind, _ in BLOCK.findall(path.read_text(encoding="utf-8")))
    }


def free_port() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return str(probe.getsockname()[1])


@attrs.frozen
class Page:
    """How a page's blocks run (see the module docstring)."""

    name: str
    values: Mapping[str, str] = attrs.field(factory=dict)
    prelude: str = ""
    between: Mapping[int, str] = attrs.field(factory=dict)
    setup: str = ""
    """Bash run before the page's shell blocks (files a page's commands read)."""
    shell_between: Mapping[int, str] = attrs.field(factory=dict)
    """Bash run after a shell block (by its index among the page's ``sh`` blocks)."""
    postlude: str = ""
    """Python run after the notebook's last block (closing what the prelude opened)."""
    own: frozenset[int] = frozenset()
    """``python`` blocks the page's test runs itself (not in the notebook)."""


@attrs.frozen
class Ran:
    stdout: str
    stderr: str


class Sandbox:
    """A directory to run a page in: examples, a home, this checkout's omnigent."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.home = root / "home"
        self.home.mkdir(parents=True, exist_ok=True)
        for name in ("examples", "benchmarks"):
            shutil.copytree(REPO / name, root / name, ignore=shutil.ignore_patterns("__pycache__"))
        self.ports = {port: free_port() for port in PORTS}
        # `omnigent` is this checkout's, whatever PYTHONPATH a page sets for its own
        # modules (`PYTHONPATH=. omnigent serve …`).
        self.bin = root / "bin"
        self.bin.mkdir()
        command = self.bin / "omnigent"
        command.write_text(
            f"#!{sys.executable}\n"
            "import sys\n"
            f"sys.path.insert(0, {str(REPO)!r})\n"
            "from omnigent.cli import main\n"
            "sys.exit(main())\n"
        )
        command.chmod(0o755)

    @property
    def env(self) -> dict[str, str]:
        env = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith(("OMNIGENT_", "OPENAI_", "ANTHROPIC_"))
        }
        env["HOME"] = str(self.home)
        env["PYTHONPATH"] = str(REPO)  # this checkout's omnigent, for `omnigent` too
        env["PATH"] = os.pathsep.join(
            [str(self.bin), str(Path(sys.executable).parent), env.get("PATH", "")]
        )
        return env

    def text(self, code: str, page: Page) -> str:
        for old, new in {**self.ports, **page.values}.items():
            start = r"\b" if re.match(r"\w", old) else ""
            end = r"\b" if re.search(r"\w$", old) else ""
            code = re.sub(f"{start}{re.escape(old)}{end}", lambda _, new=new: new, code)
        return code

    def shell(self, page: Page, *, timeout: float = 240) -> Ran:
        """Every ``sh`` block of the page, in order, as one script."""
        parts = [
            "set -euo pipefail",
            "trap 'kill $(jobs -p) 2>/dev/null || true' EXIT",
            page.setup,
        ]
        for index, code in enumerate(blocks(page.name, "sh")):
            parts.append(f"echo '== {page.name} sh block {index}' >&2\n{self.text(code, page)}")
            parts.append(page.shell_between.get(index, ""))
        return self._run(["bash", "-c", "\n".join(parts)], timeout)

    def notebook(self, page: Page, *, timeout: float = 240) -> Ran:
        """Every ``python`` block of the page, in order: a whole program (one that calls
        ``trio.run`` itself) as it stands, the others as one notebook."""
        body = [page.prelude]
        outputs: list[Ran] = []
        for index, code in enumerate(blocks(page.name, "python")):
            if index in page.own:
                continue
            if "trio.run(" in code:
                path = self.root / f"{page.name}.{index}.py"
                path.write_text(self.text(code, page), encoding="utf-8")
                outputs.append(self._run([sys.executable, str(path)], timeout))
                continue
            body.append(f"print('== {page.name} python block {index}', file=sys.stderr)")
            body.append(self.text(code, page))
            body.append(page.between.get(index, ""))
        body.append(page.postlude)
        program = "\n".join(
            [
                "import sys, trio",
                "async def __page__():",
                textwrap.indent("\n".join(body) + "\npass", "    "),
                "trio.run(__page__)",
            ]
        )
        path = self.root / f"{page.name}.py"
        path.write_text(program, encoding="utf-8")
        outputs.append(self._run([sys.executable, str(path)], timeout))
        return Ran("".join(r.stdout for r in outputs), "".join(r.stderr for r in outputs))

    @contextmanager
    def server(self, *args: str) -> Iterator[str]:
        """``omnigent serve`` on the port a page calls 6767 (its own store), for pages
        whose blocks talk to a server they do not start; yields its URL."""
        port = self.ports["6767"]
        command = ["omnigent", "serve", "--port", port, "--db", "sqlite:///served.db", *args]
        process = subprocess.Popen(
            command,
            cwd=self.root,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        try:
            assert process.stdout is not None
            line = process.stdout.readline()
            assert line.startswith("omnigent serving on "), line
            yield line.split(" on ", 1)[1].strip()
        finally:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(timeout=15)
            finally:
                if process.returncode is None:
                    process.kill()
                    process.wait()
                if process.stdout is not None:
                    process.stdout.close()

    def _run(self, command: list[str], timeout: float) -> Ran:
        done = subprocess.run(
            command,
            cwd=self.root,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        assert done.returncode == 0, (
            f"stdout:\n{done.stdout[-4000:]}\nstderr:\n{done.stderr[-4000:]}"
        )
        assert "Traceback" not in done.stderr, done.stderr[-4000:]
        return Ran(done.stdout, done.stderr)
