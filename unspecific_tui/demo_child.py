"""The demo as a child process of the app: it writes one JSON event a line on stdout.

A child, not a thread: quitting the app stops it at once (SIGTERM, then SIGKILL), and since the
demo commits every unit as it finishes, nothing finished is lost; `make demo` again resumes. The
child also watches the app, so an app that dies without quitting (terminal closed) leaves nothing.
Its error output goes to a log file, whose tail the Build screen shows when it fails.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any


class DemoChild:
    def __init__(self, argv: list[str], log_path: Path) -> None:
        self.argv = argv
        self.log_path = log_path
        self.process: subprocess.Popen[str] | None = None

    def start(self) -> None:
        from pipeline.core.processes import PARENT_PID_ENV

        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        # The child follows this process: if the app dies without stopping it (a closed terminal's
        # SIGHUP, SIGKILL), it stops in order within seconds instead of working on for no one.
        env = {**os.environ, PARENT_PID_ENV: str(os.getpid())}
        with self.log_path.open("w", encoding="utf-8") as log:
            # A session of its own: Ctrl-C in the app's terminal is the app's, not the child's.
            self.process = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL,
                                            stdout=subprocess.PIPE, stderr=log,
                                            text=True, bufsize=1, start_new_session=True, env=env)

    def events(self) -> Iterator[dict[str, Any]]:
        """Each event the child writes, until its stdout closes; lines that are not JSON are skipped."""
        assert self.process is not None and self.process.stdout is not None
        for line in self.process.stdout:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if isinstance(event, dict):
                yield event

    def wait(self) -> int:
        assert self.process is not None
        return self.process.wait()

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self, grace_s: float = 3.0) -> None:
        proc = self.process
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()  # the demo turns SIGTERM into an orderly stop (runs paused, server stopped)
        try:
            proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            proc.kill()  # its llama.cpp server watches its parent and goes too
            proc.wait(5.0)

    def log_tail(self, lines: int = 15) -> str:
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            return ""
        return "\n".join(text[-lines:])
