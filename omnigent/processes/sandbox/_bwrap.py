"""The bubblewrap command line of one sandboxed process (``linux_bwrap``).

:func:`bwrap_argv` is pure (no I/O): a policy, the hidden entries found under its roots, what
the system itself needs masked, and the command give one ``argv``. The order of the
mounts is the design — later mounts cover earlier ones:

1. namespaces: everything unshared (user, pid, ipc, uts, cgroup, and the network
   unless ``allow_network`` without ``egress_rules``); ``--die-with-parent``, so
   killing the ``bwrap`` process ends the sandbox's init and with it every process
   of its pid namespace (a ``setsid``-ed or double-forked one included);
2. the system read-only (``--ro-bind / /``), a private ``/dev``, a ``/proc`` of the
   new pid namespace, private empty ``/tmp``, ``/var/tmp`` and ``/run`` (the DNS
   configuration under ``/run`` bound back read-only); as root, the system's
   root-only files (``/etc/shadow``, host keys) masked with ``/dev/null``;
3. the directories hidden whole (the user's home, ``$OMNIGENT_HOME``: other
   sessions' workspaces, the database, provider keys) as empty tmpfs;
4. the roots the policy grants, shallowest first so a deeper grant wins:
   ``read_paths`` read-only, the workspace, ``write_paths`` and ``write_files``
   writable (a read path inside a writable root adds nothing and is skipped);
5. the hidden entries under those roots masked (an empty read-only directory, an
   empty file), and then any path the policy names that lies under a mask bound
   back over it (``write_files: [~/.ssh/known_hosts]`` under a masked ``~/.ssh``);
6. the working directory and the command.

Missing ``read_paths``/``write_paths``/``write_files`` are skipped (``--*-bind-try``):
a spec may name a file some machines lack.
"""

from __future__ import annotations

import functools
import os
import stat
from collections.abc import Iterable, Sequence
from pathlib import Path

import attrs

from ._hidden import HiddenEntries
from ._policy import PRIVATE_DIRS, SandboxPolicy

__all__ = ["BridgeMount", "SystemMasks", "bwrap_argv", "system_masks"]

_ETC_SCAN_CAP = 5_000


@attrs.frozen
class SystemMasks:
    """What of the system a sandbox hides, beyond the policy.

    Attributes:
        tmpfs: directories replaced by an empty private tmpfs (``/tmp``…).
        rebind: directories under those bound back read-only (``/run``'s DNS config).
        files: files masked with ``/dev/null`` (root-only secrets when run as root).
        drop_caps: drop every capability inside (running as root).
    """

    tmpfs: tuple[Path, ...] = ()
    rebind: tuple[Path, ...] = ()
    files: tuple[Path, ...] = ()
    drop_caps: bool = False


@attrs.frozen
class BridgeMount:
    """The egress bridge's needs inside: the proxy's socket, and the launcher that
    starts the bridge and then the command (:mod:`._bridge`)."""

    socket: Path
    launcher: tuple[str, ...]


def _real_dir(path: str) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def _resolver_dirs() -> tuple[Path, ...]:
    """Where ``/etc/resolv.conf`` leads under ``/run`` (systemd-resolved, resolvconf)."""
    try:
        target = Path(os.path.realpath("/etc/resolv.conf"))
    except OSError:
        return ()
    if target.is_relative_to("/run") and target.parent != Path("/run"):
        return (target.parent,)
    return ()


@functools.cache
def _root_only_etc() -> tuple[Path, ...]:
    """Regular files under ``/etc`` that others may not read (``/etc/shadow``, SSH host
    keys): readable by root inside the sandbox, since root owns them. Read once per
    process; bounded."""
    found: list[Path] = []
    visited = 0
    for folder, dirs, files in os.walk("/etc"):
        for name in files:
            visited += 1
            path = os.path.join(folder, name)
            try:
                info = os.lstat(path)
            except OSError:
                continue
            if stat.S_ISREG(info.st_mode) and not info.st_mode & stat.S_IROTH:
                found.append(Path(path))
        visited += len(dirs)
        if visited > _ETC_SCAN_CAP:
            break
    return tuple(found)


def system_masks() -> SystemMasks:
    """This machine's :class:`SystemMasks` (blocking: reads the filesystem)."""
    root = os.geteuid() == 0
    return SystemMasks(
        tmpfs=tuple(p for p in PRIVATE_DIRS if _real_dir(str(p))),
        rebind=_resolver_dirs() if _real_dir("/run") else (),
        files=_root_only_etc() if root else (),
        drop_caps=root,
    )


def _depth(path: Path) -> int:
    return len(path.parts)


def _under(path: Path, roots: Iterable[Path]) -> bool:
    return any(path != root and path.is_relative_to(root) for root in roots)


def _grants(policy: SandboxPolicy, extra_reads: Sequence[Path]) -> list[tuple[Path, str]]:
    """Every granted root with its bwrap option, shallowest first."""
    writable = policy.writable_roots()
    grants = [(policy.workspace, "--bind")]
    grants += [(p, "--bind-try") for p in policy.write_paths]
    grants += [(p, "--bind-try") for p in policy.write_files]
    grants += [
        (p, "--ro-bind-try")
        for p in (*policy.read_paths, *extra_reads)
        if not (p in writable or _under(p, writable))
    ]
    return sorted(grants, key=lambda grant: _depth(grant[0]))


def bwrap_argv(
    bwrap: str,
    policy: SandboxPolicy,
    command: Sequence[str],
    *,
    cwd: Path,
    hidden: HiddenEntries,
    system: SystemMasks,
    interactive: bool = False,
    bridge: BridgeMount | None = None,
) -> list[str]:
    """The full argv running ``command`` in ``cwd`` inside ``policy``'s sandbox.

    Args:
        bwrap: the bubblewrap binary.
        policy: the session's sandbox.
        command: what runs inside (``["/bin/sh", "-c", …]``).
        cwd: its working directory (inside the workspace).
        hidden: the hidden entries under the policy's roots (:func:`scan_hidden`).
        system: what of the system to mask (:func:`system_masks`).
        interactive: a terminal's command: keeps the caller's Unix session, so a
            shell in a tmux pane keeps its controlling terminal and job control.
        bridge: with ``egress_rules``, the proxy's socket and the interpreter that
            runs the in-sandbox bridge; ``command`` then runs under the launcher.
    """
    share_net = policy.allow_network and policy.egress is None
    argv = [bwrap, "--unshare-all", "--die-with-parent"]
    if share_net:
        argv.append("--share-net")
    if not interactive:
        # A command of its own in a new Unix session: it cannot reach a terminal of
        # ours (TIOCSTI) even if one were inherited.
        argv.append("--new-session")
    if system.drop_caps:
        argv += ["--cap-drop", "ALL"]
    argv += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    for folder in system.tmpfs:
        argv += ["--tmpfs", str(folder)]
    for folder in system.rebind:
        argv += ["--ro-bind-try", str(folder), str(folder)]
    for file in system.files:
        argv += ["--ro-bind", "/dev/null", str(file)]
    for folder in sorted(policy.hide, key=_depth):
        argv += ["--tmpfs", str(folder)]
    grants = _grants(policy, policy.runtime_reads)
    for path, option in grants:
        argv += [option, str(path), str(path)]
    masked_dirs = sorted(hidden.dirs, key=_depth)
    for folder in masked_dirs:
        argv += ["--tmpfs", str(folder)]
    for file in hidden.files:
        argv += ["--ro-bind", "/dev/null", str(file)]
    for path, option in grants:
        if _under(path, masked_dirs) or _under(path, hidden.files):
            argv += [option, str(path), str(path)]
    if bridge is not None:
        argv += ["--ro-bind", str(bridge.socket), str(bridge.socket)]
    for folder in masked_dirs:
        argv += ["--remount-ro", str(folder)]
    argv += ["--chdir", str(cwd), "--"]
    if bridge is not None:
        argv += [*bridge.launcher, str(bridge.socket), "--"]
    argv += list(command)
    return argv
