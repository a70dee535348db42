"""Whether a process is still there: the one check behind interrupted runs, batch claims, the
writer lock's holder and the embedded server's state file."""

from __future__ import annotations

import os


def process_alive(pid: int | None) -> bool:
    """True while ``pid`` runs (someone else's process included); a zombie, killed but not yet
    reaped by its parent, counts as gone."""
    if not pid:
        return False
    pid = int(pid)
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process: alive
    return not _zombie(pid)


def _zombie(pid: int) -> bool:
    """A killed child its parent has not reaped yet still answers kill(0)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return False
