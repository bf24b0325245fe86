"""Whether bubblewrap can run here: installed, and able to create its namespaces.

A sandbox that cannot be created must refuse, never run the command bare: the probe
runs ``bwrap`` once per binary (a real sandbox around ``true``) and remembers the
answer for the life of the process. The causes it reports are the ones people meet:
``bwrap`` is not installed (``apt-get install bubblewrap``), or the kernel (or a
container's seccomp profile, or AppArmor's ``apparmor_restrict_unprivileged_userns``)
forbids an unprivileged user the user namespace bubblewrap needs.
"""

from __future__ import annotations

import functools
import shutil
import subprocess

__all__ = ["bwrap_problem", "find_bwrap"]

_PROBE_TIMEOUT = 10.0


def find_bwrap(path: str | None = None) -> str | None:
    """The ``bwrap`` binary on ``path`` (default: ``$PATH``), or None."""
    return shutil.which("bwrap", path=path)


@functools.cache
def bwrap_problem(binary: str) -> str | None:
    """Why ``binary`` cannot sandbox here (None: it can). Blocking; remembered."""
    argv = [
        binary,
        "--unshare-all",
        "--die-with-parent",
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        "--",
        "true",
    ]
    try:
        done = subprocess.run(
            argv,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=_PROBE_TIMEOUT,
            check=False,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return f"{binary} could not be run: {exc}"
    if done.returncode == 0:
        return None
    said = done.stderr.decode("utf-8", "replace").strip().splitlines()
    detail = said[-1] if said else f"exit status {done.returncode}"
    return f"{binary} cannot create the sandbox's namespaces here ({detail})"
