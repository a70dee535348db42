"""Processes: whether one is still there (the one check behind interrupted runs, batch claims, the
writer lock's holder and the embedded server's state file), and nothing outliving its parent.

``interrupt_on_signals`` turns SIGTERM and SIGHUP (a closed terminal) into an orderly stop that may
take ``ORDERLY_STOP_S`` at most, and ``follow_parent`` stops a child (the app's demo) whose parent
died without a word."""

from __future__ import annotations

import os
import signal
import threading
import time


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


# -- outliving no parent ------------------------------------------------------------------

# How long an orderly stop on a signal may take before the process exits anyway: with the
# children's own watch (1 s), everything is gone within 5 s of a closed terminal.
ORDERLY_STOP_S = 2.5
PARENT_PID_ENV = "UNSPECIFIC_PARENT_PID"  # set by a parent that wants its child to follow it


def interrupt_on_signals(signals: tuple[signal.Signals, ...] = (signal.SIGTERM, signal.SIGHUP),
                         grace_s: float = ORDERLY_STOP_S) -> None:
    """Turn these signals (SIGHUP: the terminal was closed) into KeyboardInterrupt, the orderly
    stop every command has (runs paused, servers stopped); should that stop hang, the process
    exits after ``grace_s`` anyway, and its children, which watch it, follow."""

    def on_signal(signum: int, frame: object) -> None:
        exit_after(grace_s, 130)
        raise KeyboardInterrupt

    for sig in signals:
        signal.signal(sig, on_signal)


def exit_after(seconds: float, code: int) -> None:
    timer = threading.Timer(seconds, os._exit, args=(code,))
    timer.daemon = True
    timer.start()


def follow_parent(poll_s: float = 0.25) -> None:
    """Send ourselves SIGTERM when our parent dies, however it died (SIGKILL included): a
    child no one reads must not work on, owned by init. The parent is the one named in
    ``$UNSPECIFIC_PARENT_PID`` (so a parent that died before we got here is noticed), else
    our parent now. Polled, not PR_SET_PDEATHSIG, which fires when the parent's *thread* ends."""
    named = os.environ.get(PARENT_PID_ENV, "")
    parent = int(named) if named.isdigit() else os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(poll_s)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="follow-parent", daemon=True).start()
