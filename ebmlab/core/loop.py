"""THE run loop: every task runs through :func:`run_task`.

    task.cadence = Cadence.from_config(cfg.run)      # run.n_steps / eval_every / checkpoint_every
    parts = task.build(ctx)                          # validate + build, before compute
    resume from checkpoints/last.pt if present       # task state, history, totals, RNG, clock
    for step in start+1 .. run.n_steps:
        scalars = task.step(parts, step, ctx)        # summed on the device (no host sync)
        every run.eval_every:        metrics = task.evaluate(...)  -> finite? -> history, log
        every run.checkpoint_every:  state finite? -> atomic checkpoint (always at the last step)
        progress bar, fault hook
        a stop signal (SIGTERM, Ctrl-C)? -> checkpoint this step, raise RunStopped
    results = task.finish(parts, history, ctx)       # only from checkpointed state
    results finite? -> returned to run.py, which writes results.json

Evaluation and checkpoint time is excluded from the compute clock (``seconds``), so
curves against wall-clock time measure the method, not the bookkeeping.

A task declares, and the loop does the rest (see :class:`LoopTask`)::

    @dataclass
    class Parts:
        model: BernoulliRBM                        # state_dict / load_state_dict
        learner: PCD                               # state_dict / load_state_dict
        chains: ChainState                         # state_dict() / restored()
        best: dict = field(default_factory=dict)   # a plain value, saved as it is

    class MyTask(LoopTask):
        requires = {                               # checked before the run directory is taken
            "dataset": Requirement(BinaryImages, "a binary image dataset"),
            "model": Requirement(BernoulliRBM, "model=rbm", {"n_visible": "dataset.dim"}),
            "sampler": Requirement(),              # any sampler, but one
            "learner": Requirement(PCD, "learner=pcd or learner=acs_pcd"),
        }
        checkpoint_keys = ("model", "learner", "best")  # Parts fields in the checkpoint
        reports_sampler_cost = True                # results get SAMPLER_COST from the totals

A task takes no length or cadence: every run's config has ``run: {n_steps, eval_every,
checkpoint_every}`` (conf/config.yaml; each conf/task/ file sets its defaults), and the loop
hands the task its :class:`Cadence` as ``task.cadence`` before ``build`` (read it there and
after; validate what depends on it in ``check_config(cfg)`` from ``cfg.run``). A part that
needs the length gets it from the config by interpolation (``n_epochs: ${run.n_steps}``).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import torch
from hydra.utils import get_object
from omegaconf import DictConfig, OmegaConf
from torch import Tensor

from ebmlab.core.context import FAULT_ENV
from ebmlab.core.health import Health
from ebmlab.core.pace import announce_paper_scale_on_cpu
from ebmlab.core.signals import RunStopped, check_stop, stop_requested
from ebmlab.core.state import ChainState
from ebmlab.errors import CheckpointError, ConfigError, DivergenceError
from ebmlab.utils.seeding import restore_generator


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
                raise ConfigError(f"run.{key}", f"must be an integer >= 1 (got {v!r})")

    @classmethod
    def from_config(cls, run) -> Cadence:
        """The cadence of a run's ``run:`` node (a mapping with the three keys)."""
        if run is None or not hasattr(run, "get"):
            raise ConfigError("run", "the config has no run: node (n_steps, eval_every, ...)")
        keys = ("n_steps", "eval_every", "checkpoint_every")
        missing = [k for k in keys if run.get(k) is None]
        if missing:
            raise ConfigError(f"run.{missing[0]}", "must be set (an integer >= 1)")
        return cls(*(run.get(k) for k in keys))

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

    def add(self, scalars: dict[str, Any] | None, steps: int = 1) -> None:
        """Add one step's scalars, or the sums over a block of ``steps`` steps."""
        for k, v in (scalars or {}).items():
            t = v.detach().to(torch.float64) if isinstance(v, Tensor) else float(v)
            for sums, counts in ((self.sums, self.counts), (self._win, self._win_n)):
                if k in sums:
                    sums[k] = sums[k] + t
                else:
                    sums[k] = torch.as_tensor(t, dtype=torch.float64, device=self.device)
                counts[k] = counts.get(k, 0) + steps

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


@dataclass(frozen=True)
class Requirement:
    """What a task requires of one config group, checked from the config alone (the class of
    the group's ``_target_`` and its values) before the run directory is taken.

    ``kind``: the class (or classes) the target must be (a subclass of); None: any target.
    ``options``: the config options that satisfy it, for the message (``"model=rbm"``).
    ``equal``: keys of the group and what each must equal: a literal, or a string naming
    another config value (``{"n_visible": "dataset.dim"}``).
    """

    kind: type | tuple[type, ...] | None = None
    options: str = ""
    equal: dict[str, Any] = field(default_factory=dict)


def check_requirements(task, cfg: DictConfig, choices: dict) -> None:
    """Raise one :class:`ConfigError` for the first requirement the config does not meet:
    the ``run:`` node (:meth:`Cadence.from_config`), ``task.requires`` (group ->
    :class:`Requirement`), then ``task.check_config(cfg)``."""
    cadence = Cadence.from_config(cfg.get("run"))
    for key in task.periods:
        every = cfg.task.get(key)
        if not (isinstance(every, int) and every >= 0 and every % cadence.eval_every == 0):
            msg = f"must be 0 or a multiple of run.eval_every={cadence.eval_every} (got {every!r})"
            raise ConfigError(f"task.{key}", msg)
    name = choices.get("task") or type(task).__name__
    for group, need in task.requires.items():
        node = cfg.get(group)
        wanted = f" ({need.options})" if need.options else ""
        if not (isinstance(node, DictConfig) and "_target_" in node):
            raise ConfigError(group, f"task {name} needs a {group}{wanted}")
        try:
            cls = get_object(node._target_)
        except Exception as e:  # noqa: BLE001 - any import failure is a config error
            raise ConfigError(f"{group}._target_", f"cannot import {node._target_} ({e})") from None
        if need.kind is not None and not (isinstance(cls, type) and issubclass(cls, need.kind)):
            got = choices.get(group) or node._target_
            raise ConfigError(group, f"task {name} needs {need.options or need.kind} (got {got})")
        for key, want in need.equal.items():
            value = OmegaConf.select(cfg, want) if isinstance(want, str) else want
            got = node.get(key)
            if got != value:
                of = f" ({want})" if isinstance(want, str) else ""
                msg = f"must be {value}{of} for task {name} (got {got})"
                raise ConfigError(f"{group}.{key}", msg)
    task.check_config(cfg)


@runtime_checkable
class Stateful(Protocol):
    """A part that checkpoints itself: a model, sampler, learner or optimiser."""

    def state_dict(self) -> dict: ...

    def load_state_dict(self, d: dict) -> None: ...


def saved_part(value: Any) -> Any:
    """What a checkpoint holds of one declared part (:attr:`LoopTask.checkpoint_keys`)."""
    if isinstance(value, ChainState):
        return value.state_dict()
    if isinstance(value, torch.Generator):
        return value.get_state()
    if isinstance(value, Stateful):
        return value.state_dict()
    return value  # a tensor or a plain value (numbers, strings, dicts and lists of them)


def restored_part(current: Any, saved: Any) -> Any:
    """``current`` (the part as ``build`` made it) with its checkpointed value ``saved``: a
    chain state or a tensor on the device ``current`` lives on, a stateful part or a
    generator loaded in place, a plain value as saved."""
    if isinstance(current, ChainState):
        return current.restored(saved)
    if isinstance(current, torch.Generator):
        restore_generator(current, saved)  # a CPU byte tensor, wherever it was loaded to
        return current
    if isinstance(current, Stateful):
        current.load_state_dict(saved)
        return current
    if isinstance(current, Tensor) and isinstance(saved, Tensor):
        return saved.to(current.device)
    return saved


# The sampler-cost block the loop appends to the results of a task that sets
# ``reports_sampler_cost``: result key -> the per-step scalar (StepInfo / learner ``step``) it
# averages over the run's steps; keys the steps never reported are left out. Records made
# before issue 44 spell log_prob_evals_per_step of the learning tasks (ising_learning,
# ebm_learning, rbm_learning) ``evals_per_iter``: the same number (a loop step is an
# iteration); no claim or table reads it. ``jump`` is a mixing statistic, not a cost: the
# sampling tasks report it themselves (in a PCD learner's exploration phase it is NaN).
SAMPLER_COST = {
    "accept_rate": "accept_rate",
    "log_prob_evals_per_step": "n_log_prob",
    "grad_evals_per_step": "n_grad",
}


def sampler_cost(totals: Totals) -> dict[str, float]:
    """The :data:`SAMPLER_COST` block of a run's totals."""
    return {out: totals.mean(key) for out, key in SAMPLER_COST.items() if key in totals.sums}


def _with_sampler_cost(task, results: dict, totals: Totals) -> dict:
    if not task.reports_sampler_cost:
        return results
    block = sampler_cost(totals)
    clash = sorted(set(block) & set(results))
    if clash:
        raise RuntimeError(
            f"{type(task).__name__}.finish returns {', '.join(clash)}, which the loop's "
            "sampler-cost block reports (reports_sampler_cost): leave them out of finish"
        )
    return {**results, **block}


class LoopTask:
    """Base class with the optional callbacks of :class:`~ebmlab.core.protocols.Task`.

    A subclass implements ``build``, ``step``, ``evaluate`` and ``finish``; the loop sets
    ``cadence`` (a :class:`Cadence` from the config's ``run:``) before ``build``; it declares

    - ``requires``: config group -> :class:`Requirement`, checked by :func:`check_requirements`
      before the run directory is taken (``check_config(cfg)`` for what a table cannot say);
    - ``checkpoint_keys``: the fields of its parts a checkpoint holds, saved and restored by the
      default ``state_dict`` / ``load_state_dict`` (:func:`saved_part`, :func:`restored_part`);
    - ``reports_sampler_cost``: the loop appends :data:`SAMPLER_COST` to its results;
    - ``periods``: its task keys of heavier evaluations done at some loop evaluations (e.g.
      ``mmd_every``), each checked by :func:`check_requirements` to be 0 (only at the end) or
      a multiple of ``run.eval_every``.

    The defaults cover a task without per-step state or special divergence handling.
    """

    main_metric: str = ""
    progress_desc: str = ""
    cadence: Cadence  # run.*: steps, how often to evaluate and checkpoint (set by the loop)
    requires: dict[str, Requirement] = {}
    checkpoint_keys: tuple[str, ...] = ()
    reports_sampler_cost: bool = False
    periods: tuple[str, ...] = ()  # task keys: 0 or a multiple of run.eval_every

    def memory_estimate(self, cfg) -> dict[str, int]:
        """Bytes of the largest tensors this config will allocate, by name, computed from the
        config alone; the runner refuses a run that cannot fit before building anything."""
        return {}

    def check_config(self, cfg) -> None:  # noqa: B027 - optional hook
        """Requirements across config groups that ``requires`` cannot state (and those on
        ``cfg.run``, e.g. a task period that must be a multiple of ``run.eval_every``);
        ConfigError."""

    def state_dict(self, parts) -> dict:
        return {k: saved_part(getattr(parts, k)) for k in self.checkpoint_keys}

    def load_state_dict(self, parts, d: dict) -> None:
        missing = [k for k in self.checkpoint_keys if k not in d]
        if missing:
            raise CheckpointError(
                f"the checkpoint holds no {', '.join(missing)} of {type(self).__name__} (it has "
                f"{', '.join(map(str, d)) or 'nothing'}): written by another task or version"
            )
        for k in self.checkpoint_keys:
            setattr(parts, k, restored_part(getattr(parts, k), d[k]))

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
    inside torch reported as the divergence it is (at the step a part recorded, if one did)."""
    try:
        return fn(parts, step, ctx)
    except (RuntimeError, OverflowError, ValueError) as e:
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        if not any(m in first.lower() for m in _NONFINITE_MESSAGES):
            raise
        check_divergence(parts)
        raise DivergenceError(step, f"a value inside the computation ({first})") from None


def check_divergence(parts) -> None:
    """Each part's ``check_divergence()`` (a PCD learner keeps its finiteness checks on the
    device, so its iterations read nothing back): its DivergenceError names the iteration it
    diverged at. Called at every evaluation and checkpoint."""
    held = parts if isinstance(parts, dict) else getattr(parts, "__dict__", {})
    for part in list(held.values()):
        f = getattr(part, "check_divergence", None)
        if callable(f):
            f()


def _guarded_step(task, parts, step: int, ctx):
    return _guarded(task.step, parts, step, ctx)


# Blocks of loop steps (issue 46). A task that defines ``steps(parts, first, n, ctx)`` (loop
# steps first .. first+n-1 in one call, e.g. ``ChainRunner.run(n)``, returning their summed
# scalars) gets blocks on CUDA, where the chain runner captures them as CUDA graphs; every
# block ends at an evaluation, a checkpoint, a progress point (a multiple of PROGRESS_EVERY),
# the fault-injection step and the last step, so cadence, resume and signals are unchanged,
# and after every step the task's ``block_ends()`` names (e.g. the end of a burn-in whose steps
# report other scalars). Elsewhere (every CPU run) the loop calls ``step`` once per step.
PROGRESS_EVERY = 100


def step_spans(task, ctx, cadence: Cadence, start: int):
    """(first, last) loop steps of each call, from ``start + 1`` to the run's last step."""
    blocks = _blocks(task, ctx)
    fault = os.environ.get(FAULT_ENV)
    fault = int(fault) if fault and fault.lstrip("-").isdigit() else None
    declared = getattr(task, "block_ends", None)
    declared = sorted(declared()) if blocks and callable(declared) else []
    first = start + 1
    while first <= cadence.n_steps:
        last = first
        if blocks:
            last = min(
                cadence.n_steps,
                _next_multiple(first, cadence.eval_every),
                _next_multiple(first, cadence.checkpoint_every),
                _next_multiple(first, PROGRESS_EVERY),
                fault if fault is not None and fault >= first else cadence.n_steps,
                *(end for end in declared if end >= first),
            )
        yield first, last
        first = last + 1


def _blocks(task, ctx) -> bool:
    return callable(getattr(task, "steps", None)) and ctx.device.type == "cuda"


def _next_multiple(step: int, every: int) -> int:
    return -(-step // every) * every


def _guarded_span(task, parts, first: int, last: int, ctx):
    if not _blocks(task, ctx):
        return _guarded_step(task, parts, last, ctx)
    return _guarded(lambda p, s, c: task.steps(p, first, last - first + 1, c), parts, last, ctx)


def run_task(task, ctx) -> dict:
    """Build, resume, loop, finish. Returns the results (all finite) for ``results.json``;
    warnings about finite but suspect numbers (:mod:`ebmlab.core.health`) go to ``ctx.warnings``."""
    health = Health.from_config(ctx.cfg.get("health"))
    cadence = task.cadence = Cadence.from_config(ctx.cfg.get("run"))  # before build reads it
    parts = task.build(ctx)
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
            check_divergence(parts)
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
        for first, step in step_spans(task, ctx, cadence, start):  # (s, s) but in CUDA blocks
            totals.add(_guarded_span(task, parts, first, step, ctx), steps=step - first + 1)
            if cadence.evaluates(step):
                with ctx.clock_paused():
                    check_divergence(parts)
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
            bar.update(step - first + 1)
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
        results = _with_sampler_cost(task, task.on_divergence(parts, e, history, ctx), totals)
        check_finite(results, e.step, "a result")
        return results
    bar.close()
    ctx.warnings = health.messages()
    results = _with_sampler_cost(task, task.finish(parts, history, ctx), totals)
    check_finite(results, step, "a result")
    return results
