"""Stopping a run on a signal (a scheduler's SIGTERM, a Ctrl-C, SLURM's pre-timeout signal).

``install_stop_handlers(signals)`` makes each listed signal a *stop request*: the run loop
notices it at the next step boundary (:func:`stop_requested`), writes a checkpoint if its last
one is older than that step, releases the run directory's lock and exits with
:func:`exit_code` after one line (``ebmlab: stopped at step N by SIGTERM; rerun the same
command to resume``). A second signal exits at once: every file ebmlab writes is replaced
atomically, so nothing is left half-written; the lock is released first.

Exit codes follow the shell's convention, 128 + the signal's number: 143 for SIGTERM, 130 for
SIGINT (Ctrl-C), 140 for SIGUSR2 (the launcher's pre-timeout signal on SLURM).
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

_STATE: dict = {"signal": None, "locks": set()}


class RunStopped(BaseException):
    """A run (or sweep) stopped on a signal. A BaseException, so that a launcher that records
    a job's ordinary exceptions and goes on with the next job lets it through: the sweep stops."""

    def __init__(self, signum: int, step: int | None = None):
        self.signum, self.step = signum, step
        super().__init__(message(signum, step))


def signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def exit_code(signum: int) -> int:
    """The process's exit code after a stop on ``signum``: 128 + its number."""
    return 128 + int(signum)


def message(signum: int, step: int | None) -> str:
    where = f"stopped at step {step}" if step is not None else "stopped before the run started"
    return f"{where} by {signal_name(signum)}; rerun the same command to resume"


def _handle(signum, frame) -> None:
    if _STATE["signal"] is not None:  # the second signal: exit now
        for lock in list(_STATE["locks"]):
            try:
                os.unlink(lock)
            except OSError:
                pass
        try:
            os.write(2, f"ebmlab: {signal_name(signum)} again: exiting now\n".encode())
        except OSError:
            pass
        os._exit(exit_code(_STATE["signal"]))
    _STATE["signal"] = signum


def install_stop_handlers(signals=(signal.SIGTERM, signal.SIGINT)) -> None:
    """Make each of ``signals`` (numbers or names such as ``"SIGUSR2"``) a stop request.
    Safe to call more than once; only the main thread can install handlers (elsewhere this
    does nothing)."""
    for s in signals:
        signum = getattr(signal, s) if isinstance(s, str) else int(s)
        try:
            signal.signal(signum, _handle)
        except ValueError:  # not the main thread
            return


def stop_requested() -> int | None:
    """The signal that asked the run to stop, or None."""
    return _STATE["signal"]


def check_stop(step: int | None) -> None:
    """Raise :class:`RunStopped` if a stop was requested."""
    if _STATE["signal"] is not None:
        raise RunStopped(_STATE["signal"], step)


def hold_lock(path: Path) -> None:
    """Register a lock file to remove if a second signal ends the process at once."""
    _STATE["locks"].add(str(path))


def release_lock(path: Path) -> None:
    _STATE["locks"].discard(str(path))


def report_stop(stopped: RunStopped) -> None:
    """Print the one line a stop ends with."""
    print(f"ebmlab: {stopped}", file=sys.stderr)
