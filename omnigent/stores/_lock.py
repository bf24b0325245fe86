"""Who holds a SQLite store: the record inside its lock file, and asking whether it is held.

One runtime at a time runs turns on a SQLite file; it holds an advisory lock on
``<file>.lock`` (see :mod:`omnigent.stores.sqlite`) and writes into that file who it is
— :class:`LockHolder`: its process id, host, the command it runs, and, once an
``omnigent serve`` is listening, the address it answers on (:func:`add_server_address`).
Other processes on the machine read it to say who has the store, and the command line
uses the address to talk to that server instead of failing (``sessions list`` through
the server that holds the store).

The record is advice: the lock itself (``flock``) is what decides, and :func:`lock_holder`
asks it first, so a record a dead process left behind is never taken for a live holder.

A server also writes a **local runner token** beside the lock (``<file>.runner-token``,
mode ``0600``, :func:`write_local_token`): a token it admits runners with, readable only
by the user who runs it. The command line of that same user reads it
(:func:`read_local_token`) to start a runner in its own process (``omnigent run``,
``omnigent stdio`` beside a server): being able to read the file is the proof of being
the server's own user, as being able to open the database would be. The record itself
carries no secret (others on the machine may read it to see who holds the store).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import stat
import sys
from pathlib import Path
from typing import Any

import attrs

__all__ = [
    "LockHolder",
    "add_server_address",
    "forget_local_token",
    "lock_holder",
    "lock_path",
    "read_local_token",
    "token_path",
    "write_holder",
    "write_local_token",
]

_MAX_RECORD = 4096
_MAX_TOKEN = 512


@attrs.frozen
class LockHolder:
    """Who holds a store's lock, as it wrote itself down.

    ``url`` is the HTTP address of the ``omnigent serve`` that holds it (``None`` for
    any other holder: an ``omnigent run``, an editor's ``omnigent stdio``, a library
    runtime). Fields the holder did not write (an older record) are ``None``.
    """

    pid: int | None = None
    host: str | None = None
    command: str | None = None
    url: str | None = None

    def who(self) -> str:
        """``pid 123 on HOST``, as known."""
        who = f"pid {self.pid}" if self.pid is not None else "a process"
        return f"{who} on {self.host}" if self.host else who

    def describe(self) -> str:
        """``pid 123 on HOST (omnigent serve at http://127.0.0.1:6767)``, as known."""
        what = [part for part in (self.command, f"at {self.url}" if self.url else None) if part]
        return f"{self.who()} ({' '.join(what)})" if what else self.who()

    def to_json(self) -> str:
        return json.dumps({k: v for k, v in attrs.asdict(self).items() if v is not None})

    @classmethod
    def parse(cls, text: str) -> LockHolder | None:
        """The record in a lock file's text; ``None`` if empty. The plain ``pid N on
        HOST`` of older versions is read too."""
        text = text.strip()
        if not text:
            return None
        try:
            data: Any = json.loads(text)
        except ValueError:
            pid, _, host = text.removeprefix("pid ").partition(" on ")
            return cls(pid=int(pid) if pid.isdigit() else None, host=host or None)
        if not isinstance(data, dict):
            return None

        def field(name: str, kind: type) -> Any:
            value = data.get(name)
            return value if isinstance(value, kind) and not isinstance(value, bool) else None

        return cls(field("pid", int), field("host", str), field("command", str), field("url", str))


def lock_path(db_path: Path) -> Path:
    """The lock file beside the database file ``db_path``."""
    return db_path.with_name(db_path.name + ".lock")


def token_path(db_path: Path) -> Path:
    """The local runner token beside the database file ``db_path``."""
    return db_path.with_name(db_path.name + ".runner-token")


def write_local_token(db_path: Path, token: str) -> None:
    """Write ``token`` beside the store this process holds, readable by its user only
    (``0600``, also when a file was there: its mode is reset; a symbolic link there is
    refused, never followed).

    Raises:
        OSError: the file cannot be written.
    """
    fd = os.open(token_path(db_path), os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, token.encode())
    finally:
        os.close(fd)


def read_local_token(db_path: Path) -> str | None:
    """The local runner token beside ``db_path``, or ``None``: no file, not a regular
    file of this user's, readable by others (not a secret any more), or empty.

    Blocking file I/O, but brief.
    """
    try:
        fd = os.open(token_path(db_path), os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
            return None
        token = os.read(fd, _MAX_TOKEN).decode("ascii", "replace").strip()
    except OSError:
        return None
    finally:
        os.close(fd)
    return token or None


def forget_local_token(db_path: Path, token: str) -> None:
    """Remove the token file beside ``db_path`` if it still holds ``token`` (a server
    that stops; a newer server's file is left alone). Blocking file I/O, but brief."""
    if read_local_token(db_path) == token:
        with contextlib.suppress(OSError):  # already gone, or not ours to remove
            token_path(db_path).unlink()


def _this_command() -> str:
    """What this process runs, for others to read: ``omnigent serve``, ``app.py``."""
    argv = sys.argv
    if not argv or not argv[0]:
        return "python"
    words = [Path(argv[0]).name]
    if len(argv) > 1 and not argv[1].startswith("-") and words[0] in ("omnigent", "__main__.py"):
        words = ["omnigent", argv[1]]
    return " ".join(words)


def write_holder(fd: int, *, url: str | None = None) -> None:
    """Write this process into the lock file open on ``fd`` (whose lock it holds)."""
    holder = LockHolder(os.getpid(), socket.gethostname(), _this_command(), url)
    data = holder.to_json().encode()
    os.ftruncate(fd, 0)
    os.pwrite(fd, data, 0)


def _read(path: Path) -> LockHolder | None:
    try:
        with path.open("rb") as file:
            return LockHolder.parse(file.read(_MAX_RECORD).decode("utf-8", "replace"))
    except OSError:
        return None


def lock_holder(db_path: Path) -> LockHolder | None:
    """Who holds the store at ``db_path`` now, or ``None`` if nobody does.

    Asks the lock itself (a shared lock taken and let go at once, never waited for),
    then reads the record. A holder that wrote nothing is a :class:`LockHolder` with
    every field ``None``. Blocking file I/O, but brief: call it from sync code, or a
    worker thread.
    """
    path = lock_path(db_path)
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None  # no lock file: never opened with a lock
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _read(path) or LockHolder()
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def add_server_address(db_path: Path, url: str) -> bool:
    """Add ``url`` to the record of a lock this process holds (``omnigent serve``, once
    it listens), so the command line can find the server. Returns whether it did: it
    does nothing unless the record names this very process.

    Blocking file I/O, but brief.
    """
    path = lock_path(db_path)
    holder = _read(path)
    if holder is None or holder.pid != os.getpid():
        return False
    try:
        fd = os.open(path, os.O_WRONLY)
    except OSError:
        return False
    try:
        write_holder(fd, url=url)
    finally:
        os.close(fd)
    return True
