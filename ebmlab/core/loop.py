"""THE run loop: every task runs through :func:`run_task`.

    parts = task.build(ctx)                          # validate + build, before compute
    resume from checkpoints/last.pt if present       # task state, history, totals, RNG, clock
    for step in start+1 .. n_steps:
        scalars = task.step(parts, step, ctx)        # summed on the device (no host sync)
        every eval_every:        metrics = task.evaluate(...)  -> finite? -> history, log
        every checkpoint_every:  state finite? -> atomic checkpoint (always at the last step)
        progress bar, fault hook
        a stop signal (SIGTERM, Ctrl-C)? -> checkpoint this step, raise RunStopped
    results = task.finish(parts, history, ctx)       # only from checkpointed state
    results finite? -> returned to run.py, which writes results.json

Evaluation and checkpoint time is excluded from the compute clock (``seconds``), so
curves against wall-clock time measure the method, not the bookkeeping.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from ebmlab.core.health import Health
from ebmlab.core.pace import announce_paper_scale_on_cpu
from ebmlab.core.signals import RunStopped, check_stop, stop_requested
from ebmlab.errors import ConfigError, DivergenceError


@dataclass(frozen=True)
class Cadence:
    """How many loop steps a task runs, and how often it evaluates and checkpoints.

    The last step is always evaluated and checkpointed, so a run killed after it
    resumes straight into ``finish`` with every number restored.
    """

    n_steps: int
    eval_every: int
    checkpoint_every: int

    def __post_init__(self):
        for key in ("n_steps", "eval_every", "checkpoint_every"):
            v = getattr(self, key)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ConfigError(f"task.{key}", f"must be an integer >= 1 (got {v!r})")

    def evaluates(self, step: int) -> bool:
        return step % self.eval_every == 0 or step == self.n_steps

    def checkpoints(self, step: int) -> bool:
        return step % self.checkpoint_every == 0 or step == self.n_steps


class History:
    """Rows of evaluated metrics (each with ``step`` and ``seconds``), checkpointed."""

    def __init__(self, rows: list[dict] | None = None):
        self.rows: list[dict] = list(rows or [])

    def append(self, row: dict) -> None:
        self.rows.append(dict(row))

    def column(self, key: str) -> list:
        return [r[key] for r in self.rows if key in r]

    def last(self, key: str, default: Any = None) -> Any:
        for r in reversed(self.rows):
            if key in r:
                return r[key]
        return default

    def __len__(self) -> int:
        return len(self.rows)

    def state_dict(self) -> list[dict]:
        return [dict(r) for r in self.rows]


class Totals:
    """Sums of per-step scalars kept on the device (read back only when asked).

    ``mean(key)`` averages over every step that reported ``key``; ``window()`` the
    means since the last call to ``window()`` (what the evaluation log shows).
    Sums are float64 so they equal an exact host-side running sum.
    """

    def __init__(self, device: torch.device):
        self.device = device
        self.sums: dict[str, Tensor] = {}
        self.counts: dict[str, int] = {}
        self._win: dict[str, Tensor] = {}
        self._win_n: dict[str, int] = {}

    def add(self, scalars: dict[str, Any] | None) -> None:
        for k, v in (scalars or {}).items():
            t = v.detach().to(torch.float64) if isinstance(v, Tensor) else float(v)
            for sums, counts in ((self.sums, self.counts), (self._win, self._win_n)):
                if k in sums:
                    sums[k] = sums[k] + t
                else:
                    sums[k] = torch.as_tensor(t, dtype=torch.float64, device=self.device)
                counts[k] = counts.get(k, 0) + 1

    def mean(self, key: str, default: float = math.nan) -> float:
        if key not in self.sums:
            return default
        return float(self.sums[key]) / self.counts[key]

    def total(self, key: str, default: float = 0.0) -> float:
        return float(self.sums[key]) if key in self.sums else default

    def window(self) -> dict[str, float]:
        out = {k: float(v) / self._win_n[k] for k, v in self._win.items()}
        self._win, self._win_n = {}, {}
        return out

    def state_dict(self) -> dict:
        return {
            "sums": {k: v.cpu() for k, v in self.sums.items()},
            "counts": dict(self.counts),
            "window": {k: v.cpu() for k, v in self._win.items()},
            "window_counts": dict(self._win_n),
        }

    def load_state_dict(self, d: dict) -> None:
        self.sums = {k: v.to(self.device) for k, v in d["sums"].items()}
        self.counts = {k: int(v) for k, v in d["counts"].items()}
        self._win = {k: v.to(self.device) for k, v in d.get("window", {}).items()}
        self._win_n = {k: int(v) for k, v in d.get("window_counts", {}).items()}


class LoopTask:
    """Base class with the optional callbacks of :class:`~ebmlab.core.protocols.Task`.

    A subclass implements ``build``, ``cadence``, ``step``, ``evaluate`` and ``finish``;
    the defaults below cover a task without per-step state or special divergence handling.
    """

    main_metric: str = ""
    progress_desc: str = ""

    def memory_estimate(self, cfg) -> dict[str, int]:
        """Bytes of the largest tensors this config will allocate, by name, computed from the
        config alone; the runner refuses a run that cannot fit before building anything."""
        return {}

    def state_dict(self, parts) -> dict:
        return {}

    def load_state_dict(self, parts, d: dict) -> None:  # noqa: B027 - optional hook
        pass

    def on_divergence(self, parts, error: DivergenceError, history: History, ctx) -> dict:
        """Called when a step or evaluation diverges; re-raise (default) or return results
        computed from the last good state (the task then records ``diverged_at``)."""
        raise error


def _nonfinite_metrics(metrics: dict) -> list[str]:
    bad = []
    for k, v in metrics.items():
        if isinstance(v, Tensor):
            if v.is_floating_point() and not bool(torch.isfinite(v).all()):
                bad.append(k)
        elif isinstance(v, float) and not math.isfinite(v):
            bad.append(k)
    return bad


def nonfinite_leaves(obj: Any, prefix: str = "") -> list[str]:
    """Dotted names of the floating tensors / floats inside ``obj`` that hold NaN or Inf."""
    bad: list[str] = []
    if isinstance(obj, Tensor):
        if obj.is_floating_point() and obj.numel() and not bool(torch.isfinite(obj).all()):
            bad.append(prefix or "<tensor>")
    elif isinstance(obj, float):
        if not math.isfinite(obj):
            bad.append(prefix or "<float>")
    elif isinstance(obj, dict):
        for k, v in obj.items():
            bad += nonfinite_leaves(v, f"{prefix}.{k}" if prefix else str(k))
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            bad += nonfinite_leaves(v, f"{prefix}[{i}]")
    return bad


def check_finite(obj: Any, step: int, what: str) -> None:
    """Raise :class:`DivergenceError` naming the first non-finite entries of ``obj``."""
    bad = nonfinite_leaves(obj)
    if bad:
        shown = ", ".join(bad[:3]) + (f" (+{len(bad) - 3} more)" if len(bad) > 3 else "")
        raise DivergenceError(step, f"{what} ({shown})")


# torch's messages for a non-finite value inside an op: an overflow (an optimiser step at
# ``lr=1e38``), or NaN/Inf probabilities handed to a draw (``multinomial``, ``bernoulli``)
_NONFINITE_MESSAGES = ("overflow", "inf, nan", "inf`, `nan", "probability tensor contains")


def _guarded(fn, parts, step: int, ctx):
    """``fn(parts, step, ctx)`` (a task's step or evaluation), with a non-finite value met
    inside torch reported as the divergence it is."""
    try:
        return fn(parts, step, ctx)
    except (RuntimeError, OverflowError, ValueError) as e:
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        if not any(m in first.lower() for m in _NONFINITE_MESSAGES):
            raise
        raise DivergenceError(step, f"a value inside the computation ({first})") from None


def _guarded_step(task, parts, step: int, ctx):
    return _guarded(task.step, parts, step, ctx)


def run_task(task, ctx) -> dict:
    """Build, resume, loop, finish. Returns the results (all finite) for ``results.json``;
    warnings about finite but suspect numbers (:mod:`ebmlab.core.health`) go to ``ctx.warnings``."""
    health = Health.from_config(ctx.cfg.get("health"))
    parts = task.build(ctx)
    cadence: Cadence = task.cadence(parts)
    history = History()
    totals = Totals(ctx.device)
    ctx.totals = totals  # finish() reads the run's totals from the context
    ctx.n_steps = cadence.n_steps
    ctx.start_clock()
    ckpt = ctx.load_checkpoint()
    start = 0
    if ckpt is not None:
        task.load_state_dict(parts, ckpt["task"])
        history = History(ckpt["history"])
        totals.load_state_dict(ckpt["totals"])
        health.load_state_dict(ckpt.get("health"))
        start = int(ckpt["_run"]["step"])
    ctx.last_good_step = start if ckpt is not None else None
    bar = ctx.progress(cadence.n_steps, initial=start, desc=task.progress_desc or "run")
    bar = announce_paper_scale_on_cpu(bar, ctx, cadence.n_steps, start)  # one line, then on
    step = start

    def checkpoint(step: int) -> None:
        with ctx.clock_paused():
            state = task.state_dict(parts)
            check_finite(state, step, "the state to checkpoint")
            ctx.save_checkpoint(
                {
                    "task": state,
                    "history": history.state_dict(),
                    "totals": totals.state_dict(),
                    "health": health.state_dict(),
                },
                step=step,
            )
            ctx.last_good_step = step

    try:
        check_stop(step)  # a signal while the parts were built
        for step in range(start + 1, cadence.n_steps + 1):
            totals.add(_guarded_step(task, parts, step, ctx))
            if cadence.evaluates(step):
                with ctx.clock_paused():
                    metrics = _guarded(task.evaluate, parts, step, ctx)
                    check_finite(metrics, step, "an evaluated metric")
                    row = {"step": step, "seconds": ctx.elapsed(), **metrics}
                    history.append(row)
                    window = totals.window()
                    health.observe(window, step)
                    ctx.log({**window, **row}, step=step)  # evaluated values win
                    main = metrics.get(task.main_metric)
                    if isinstance(main, float):
                        bar.set_postfix({task.main_metric: f"{main:.4g}"}, refresh=False)
            if cadence.checkpoints(step):
                checkpoint(step)
            bar.update(1)
            ctx.maybe_fault(step)
            if stop_requested() is not None:  # SIGTERM / Ctrl-C: stop at this step boundary
                if ctx.last_good_step != step:
                    checkpoint(step)
                check_stop(step)
    except RunStopped:
        bar.close()
        raise
    except DivergenceError as e:
        bar.close()
        ctx.warnings = health.messages()
        results = task.on_divergence(parts, e, history, ctx)
        check_finite(results, e.step, "a result")
        return results
    bar.close()
    ctx.warnings = health.messages()
    results = task.finish(parts, history, ctx)
    check_finite(results, step, "a result")
    return results
