"""``omnigent init``: write a first agent spec — a sandboxed one.

The spec it writes is the safe starting point: its shell, terminals and the other
processes it starts run in this platform's sandbox (``os_env.sandbox.type: auto``:
bubblewrap on Linux), with the working directory writable, the home directory, other
workspaces and dotfiles hidden, and no network; ``omnigent run`` then asks before each
command. Every line that matters is commented, so loosening it is an edit the user
makes on purpose. The text is checked against the spec's own rules before it is
written.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from ..errors import BadRequest
from ..spec import AgentSpec

__all__ = ["agent_template", "declare_init"]

_NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,99}")

TEMPLATE = """\
# An omnigent agent. Try it:
#
#   omnigent run {path} "What is in this directory?"
#
# With no model key at hand, `omnigent mock-llm --port 8000 &` and
# `export OPENAI_BASE_URL=http://127.0.0.1:8000/v1 OPENAI_API_KEY=unused` stand in.
# Every key is documented in docs/spec.md; the sandbox in docs/sandbox.md.
name: {name}
description: A careful coding agent, sandboxed.
prompt: |
  You are a careful coding agent. Work in the current directory; say what you are
  about to do before you run a command.
executor:
  type: omnigent
  config:
    harness: loop                # or claude-code, codex (pip install 'omnigent[claude]')
    model: {model}               # the endpoint: OPENAI_BASE_URL / OPENAI_API_KEY
os_env:
  type: caller_process
  cwd: .                         # the directory omnigent runs in
  sandbox:
    type: auto                   # linux_bwrap on Linux (apt-get install bubblewrap)
    # What the agent's processes (shell, terminals, MCP servers) may touch. The
    # working directory is writable; the rest of the system is read-only; your home
    # directory, other sessions and hidden files (.git, .env, ...) are invisible.
    read_paths: []               # e.g. ["~/.gitconfig"]
    write_paths: []              # more writable directories
    cwd_allow_hidden: [.venv]    # hidden names to show, e.g. [.git, .venv]
    allow_network: false         # true: network on; with egress_rules, only what they name
    # egress_rules: ["GET pypi.org/**", "GET files.pythonhosted.org/**"]
# `omnigent run` asks before every command and every write outside the working
# directory; a policy decides instead (docs/policies.md):
policies: []
#  - {{name: shells_ok, type: allow_tools, tools: [sys_os_shell]}}
#  - {{name: no_edits, type: deny_tools, tools: [sys_os_write, sys_os_edit]}}
"""


def agent_template(name: str, model: str, path: str) -> str:
    """The spec ``omnigent init`` writes (checked to be a valid spec).

    Raises:
        BadRequest: ``name`` is not an agent name.
    """
    if not _NAME.fullmatch(name):
        raise BadRequest(f"--name must match [a-z0-9][a-z0-9._-]*, got {name!r}")
    text = TEMPLATE.format(name=name, model=model, path=path)
    AgentSpec.from_yaml(text)  # a template that drifted from the spec fails here
    return text


def _cmd_init(args: argparse.Namespace) -> int:
    path = Path(args.path)
    text = agent_template(args.name, args.model, args.path)
    if path.exists() and not args.force:
        raise BadRequest(f"{args.path} exists; choose another path or pass --force")
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise BadRequest(f"cannot write {args.path}: {exc.strerror or exc}") from exc
    print(f'wrote {args.path}: a sandboxed agent. Run it: omnigent run {args.path} "hi"')
    return 0


def declare_init(init: argparse.ArgumentParser) -> None:
    """The ``init`` options (``handler=_cmd_init``)."""
    init.add_argument(
        "path", metavar="PATH", nargs="?", default="agent.yaml", help="where (default agent.yaml)"
    )
    init.add_argument("--name", default="coder", help="the agent's name (default coder)")
    init.add_argument("--model", default="gpt-4o-mini", help="its model (default gpt-4o-mini)")
    init.add_argument("--force", action="store_true", help="overwrite PATH if it exists")
    init.set_defaults(handler=_cmd_init)
