"""The process manager's private socket directory, and those crashed runtimes left.

Unix socket paths are limited to ~107 bytes, so a runtime's harness sockets live in a
short private (``0700``) directory in the system temp dir, not under a possibly long
``$OMNIGENT_HOME``. A runtime removes its directory when it closes; one killed with
``kill -9`` cannot. So each directory is recorded in ``$OMNIGENT_HOME/run/sockets``
with the runtime that owns it (pid and start time), and the next runtime on the same
home removes the directories whose owner is gone — only directories this module
makes (named ``omnigent-*`` directly in the temp dir, owned by this user), so a
record that names anything else is dropped and nothing else is touched.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from pathlib import Path

import trio

from ._proc import process_start_time

__all__ = ["open_socket_dir"]

log = logging.getLogger(__name__)

_PREFIX = "omnigent-"


@asynccontextmanager
async def open_socket_dir(
    home: Path, owner: tuple[int, int | None], *, sweep: bool = True
) -> AsyncIterator[Path]:
    """A new private socket directory for the block, recorded under ``home``.

    Args:
        home: ``$OMNIGENT_HOME``; records live in ``home/run/sockets``.
        owner: the runtime's pid and start time (``process_start_time``).
        sweep: first remove the directories of runtimes that are gone.

    Cancellation: the directory and its record are removed however the block ends.
    """
    records = home / "run" / "sockets"
    if sweep:
        await trio.to_thread.run_sync(_sweep, records)
    path = Path(await trio.to_thread.run_sync(lambda: tempfile.mkdtemp(prefix=_PREFIX)))
    record = records / f"{path.name}.json"
    await trio.to_thread.run_sync(_write_record, record, path, owner)
    try:
        yield path
    finally:
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(_remove, path, record)


def _write_record(record: Path, path: Path, owner: tuple[int, int | None]) -> None:
    data = {"socket_dir": str(path), "owner_pid": owner[0], "owner_start_time": owner[1]}
    try:
        record.parent.mkdir(parents=True, exist_ok=True)
        record.write_text(json.dumps(data), encoding="utf-8")
    except OSError:
        log.warning("could not record the socket directory %s", path, exc_info=True)


def _remove(path: Path, record: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)
    with suppress(OSError):
        record.unlink()


def _sweep(records: Path) -> None:
    """Remove the recorded directories whose owning runtime is gone, and their records."""
    try:
        entries = sorted(records.glob("*.json"))
    except OSError:
        return
    for record in entries:
        try:
            data = json.loads(record.read_text(encoding="utf-8"))
            pid, start, path = data["owner_pid"], data["owner_start_time"], data["socket_dir"]
        except (OSError, ValueError, KeyError, TypeError):
            data = None
        if data is not None and isinstance(pid, int) and process_start_time(pid) == start:
            continue  # its runtime is alive
        if data is not None and isinstance(path, str) and _ours(Path(path)):
            log.info("removing the socket directory %s of a runtime that is gone", path)
            shutil.rmtree(path, ignore_errors=True)
        with suppress(OSError):
            record.unlink()


def _ours(path: Path) -> bool:
    """Whether ``path`` is a directory this module made (and this user owns)."""
    try:
        stat = path.lstat()
    except OSError:
        return False
    return (
        path.parent == Path(tempfile.gettempdir())
        and path.name.startswith(_PREFIX)
        and not path.is_symlink()
        and path.is_dir()
        and stat.st_uid == os.getuid()
    )
