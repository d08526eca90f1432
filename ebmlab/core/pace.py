"""Paper scale on a CPU is never silent: one line with the run's length and an estimate of
its time, from the pace of its first steps, and how to get the CPU-sized version.

The paper-scale settings are meant for a GPU; a run that starts at paper scale on a CPU
(``python -m ebmlab.run experiment=...`` or ``make table-*`` without ``SCALE``) goes on,
but first says what it has started::

    ebmlab: paper scale on a CPU: 50,000 steps; about 2 h 10 min at the pace of its first
    412 steps (add scale=smoke for the CPU-sized run)
"""

from __future__ import annotations

import sys
import time

TIMING_SECONDS = 2.0  # how long the first steps are timed before the line is printed


def format_duration(seconds: float) -> str:
    """``'45 s'``, ``'12 min'``, ``'3 h 20 min'``, ``'2.5 days'``."""
    if seconds < 90:
        return f"{max(seconds, 1):.0f} s"
    minutes = seconds / 60
    if minutes < 90:
        return f"{minutes:.0f} min"
    hours = minutes / 60
    if hours < 48:
        return f"{int(hours)} h {int(minutes - 60 * int(hours))} min"
    return f"{hours / 24:.1f} days"


def paper_scale_line(n_steps: int, start: int, timed_steps: int, timed_seconds: float) -> str:
    """The one line: the run's length in steps and the time its remaining steps take at the
    pace of the ``timed_steps`` it ran in ``timed_seconds``."""
    length = f"{n_steps:,} steps" + (f" (resuming at step {start:,})" if start else "")
    if timed_steps > 0:
        remaining = (n_steps - start) * timed_seconds / timed_steps
        estimate = (
            f"; about {format_duration(remaining)} at the pace of its first "
            f"{timed_steps:,} step{'s' if timed_steps != 1 else ''}"
        )
    else:
        estimate = ""
    return (
        f"ebmlab: paper scale on a CPU: {length}{estimate} (add scale=smoke for the CPU-sized run)"
    )


class PaperScaleOnCpu:
    """Wraps the loop's progress bar; after :data:`TIMING_SECONDS` of steps (or at the last
    step, if sooner) prints :func:`paper_scale_line` once to stderr. Everything else is the
    bar's."""

    def __init__(self, bar, n_steps: int, start: int, clock=time.perf_counter):
        self._bar, self._n_steps, self._start, self._clock = bar, n_steps, start, clock
        self._t0 = clock()
        self._done = 0
        self.printed: str | None = None

    def update(self, n: int = 1):
        self._done += n
        if self.printed is None:
            seconds = self._clock() - self._t0
            if seconds >= TIMING_SECONDS or self._start + self._done >= self._n_steps:
                self.printed = paper_scale_line(self._n_steps, self._start, self._done, seconds)
                from tqdm.auto import tqdm

                tqdm.write(self.printed, file=sys.stderr)
        return self._bar.update(n)

    def __getattr__(self, name):
        return getattr(self._bar, name)


def announce_paper_scale_on_cpu(bar, ctx, n_steps: int, start: int):
    """The loop's progress bar, wrapped to print the line when the run is at paper scale on
    a CPU (and has steps left); else the bar itself."""
    if ctx.scale == "paper" and ctx.device.type == "cpu" and start < n_steps:
        return PaperScaleOnCpu(bar, n_steps, start)
    return bar
