"""A sandboxed command for a tmux pane, whose command line is bounded.

The launch carries no environment: bubblewrap clears the pane's (``--clearenv``) and
sets the sandbox's from the same file (``--setenv``), keeping only tmux's ``TERM``.

tmux passes a new session's command through its own command line, whose messages
are bounded (16 KiB), and a sandbox's bubblewrap arguments grow with every hidden
entry it masks. So a terminal's launch puts those arguments in a file bubblewrap
reads at start (``--args FD``): the pane runs ``/bin/sh -c 'exec 3<"$1" && shift &&
exec "$0" --args 3 "$@"' bwrap FILE -- COMMAND…`` (bubblewrap takes options from the
file, and the command from its own command line). The file lives in a private
directory (mode 0700) until the terminal ends; the sandbox's own ``/tmp`` is a fresh
tmpfs, so it is not visible inside.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import trio

from ._sandbox import Launch, Sandbox

__all__ = ["open_pane_launch"]

# The pane's TERM is tmux's (set in the pane's environment): it overrides the one the
# file sets, since bubblewrap applies --setenv in order.
_READ_ARGS = 'exec 3<"$1" && shift && exec "$0" --args 3 --setenv TERM "${TERM:-screen}" "$@"'


def _write_args(args: Sequence[str]) -> Path:
    folder = Path(tempfile.mkdtemp(prefix="omnigent-pane-"))
    path = folder / "bwrap.args"
    path.write_bytes(b"".join(arg.encode() + b"\0" for arg in args))
    return path


@asynccontextmanager
async def open_pane_launch(
    box: Sandbox, argv: Sequence[str], *, cwd: Path, env: Mapping[str, str]
) -> AsyncIterator[Launch | None]:
    """The launch of a terminal's ``argv`` inside ``box``, for as long as the terminal
    lives; None when ``box`` confines nothing (the pane runs ``argv`` as it is).

    Raises:
        SandboxUnavailable: the sandbox refuses (see :meth:`Sandbox.wrap`).

    Cancellation: leaving the block removes the arguments file.
    """
    if not box.confined:
        yield None
        return
    launch = await box.wrap(argv, cwd=cwd, env=env, interactive=True)
    bwrap, *args = launch.argv
    split = args.index("--")
    # The environment goes in the file too: bubblewrap clears the pane's (the tmux
    # server's, the runtime's own) and sets the sandbox's.
    environment = ["--clearenv"]
    for name, value in (launch.env or {}).items():
        environment += ["--setenv", name, value]
    path = await trio.to_thread.run_sync(_write_args, [*args[:split], *environment])
    try:
        pane = ("/bin/sh", "-c", _READ_ARGS, bwrap, str(path), *args[split:])
        yield Launch(pane, cwd, None)
    finally:
        # Done in place: a cancelled block cannot hop to a thread.
        with contextlib.suppress(OSError):
            os.unlink(path)
        shutil.rmtree(path.parent, ignore_errors=True)
