"""Shared test helpers: running the real entry point, and building parts from conf/."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from omegaconf import OmegaConf

from ebmlab.models.base import EnergyModel
from ebmlab.utils.config import build

REPO = Path(__file__).resolve().parents[1]


def from_conf(option: str, **overrides):
    """Build ``conf/<option>.yaml`` (e.g. ``"model/rbm"``) with ``overrides`` merged in.

    The YAML is the one source of hyperparameters: a test sets only what it is about (and
    the keys that interpolate other groups, such as ``n_visible: ${dataset.dim}``).
    """
    group = option.split("/")[0]
    node = OmegaConf.load(REPO / "conf" / f"{option}.yaml")
    if group in node and "_target_" not in node:  # a `# @package _global_` file (task/)
        node = node[group]
    return build(OmegaConf.merge(node, overrides), group)


def run_cli(
    args: list[str],
    run_dir: Path | None,
    cache: Path | None = None,
    env: dict | None = None,
    check: bool = True,
    multirun: bool = False,
    timeout: float = 600,
    cwd: Path = REPO,
):
    """``python -m ebmlab.run <args>`` from ``cwd`` into ``run_dir`` (logger off, no progress
    bars); ``run_dir=None`` leaves the directory to Hydra's default (then ``cache`` is needed).

    Returns the CompletedProcess; its ``results`` attribute holds results.json's
    metrics when the run wrote one.
    """
    assert run_dir is not None or cache is not None, "run_dir=None needs a cache"
    base = ["logger=none", "progress=false"]
    if multirun:
        base += [f"hydra.sweep.dir={run_dir}"] if run_dir else []
        args = ["-m", *args]  # the flag must precede the overrides
    elif run_dir:
        base += [f"hydra.run.dir={run_dir}"]
    e = dict(os.environ)
    e["EBMLAB_CACHE"] = str(cache or run_dir.parent / "cache")
    e.setdefault("OMP_NUM_THREADS", "1")
    e["HYDRA_FULL_ERROR"] = "0"
    if cwd != REPO:  # the checkout stays importable from another directory
        e["PYTHONPATH"] = str(REPO) + os.pathsep + e.get("PYTHONPATH", "")
    e.update(env or {})
    p = subprocess.run(
        [sys.executable, "-m", "ebmlab.run", *args, *base],
        cwd=cwd,
        env=e,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if check and p.returncode != 0:
        raise AssertionError(f"run failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
    res = run_dir / "results.json" if run_dir else None
    p.results = json.loads(res.read_text())["metrics"] if res and res.exists() else None
    return p


def run_inprocess(args: list[str], run_dir: Path, monkeypatch, logger: str = "none") -> int:
    """``python -m ebmlab.run <args>`` in this process (fast) into ``run_dir`` with the given
    ``logger`` and no progress bars; returns the exit code (0 when it returned normally)."""
    import ebmlab.run as entry

    monkeypatch.setenv("EBMLAB_CACHE", str(run_dir.parent / "cache"))
    argv = [entry.__file__, f"--config-path={REPO / 'conf'}", *args]
    argv += [f"logger={logger}", "progress=false", f"hydra.run.dir={run_dir}"]
    monkeypatch.setattr(sys, "argv", argv)
    monkeypatch.setitem(entry._STATE, "task_started", False)
    try:
        entry.cli()
    except SystemExit as e:
        return e.code or 0
    return 0


def run_device() -> str:
    """The device a run with ``device=auto`` (the default) uses on this machine."""
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def assert_same_results(a: dict, b: dict, device: str | None = None) -> None:
    """A resumed run's results equal an uninterrupted run's as docs/gpu.md states for
    ``device`` (default: the one ``device=auto`` picks here): bit-identical on a CPU, within
    ebmlab.utils.same_results.CUDA_REL_TOL on CUDA; timings are not compared."""
    from ebmlab.utils.same_results import differences

    found = differences(a, b, device or run_device())
    assert not found, "results differ: " + "; ".join(found[:10])


class Counting(EnergyModel):
    """Wraps a model and counts batched log_prob calls."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner
        self.dim, self.state_kind, self.n_states = inner.dim, inner.state_kind, inner.n_states
        self.calls = 0

    def log_prob(self, x):
        self.calls += 1
        return self.inner.log_prob(x)


def check_before_compute(args: list[str]) -> None:
    """The checks ``python -m ebmlab.run <args>`` makes of a composed config before any compute
    (the task's constructor, the ``run:`` node, the task's requirements and periods); raises
    the :class:`~ebmlab.errors.ConfigError` the run would exit 2 with."""
    from ebmlab.core.loop import check_requirements
    from ebmlab.utils.config import compose_job

    choices, cfg = compose_job(args)
    check_requirements(build(cfg.task, "task"), cfg, choices)


def run_toy(task, ctx) -> dict:
    """``run_task`` of a toy task that states its cadence as ``task.cad``: the loop reads the
    cadence from the config's ``run:`` node, so that is where it goes."""
    from ebmlab.core.loop import run_task

    c = task.cad
    run = {"n_steps": c.n_steps, "eval_every": c.eval_every, "checkpoint_every": c.checkpoint_every}
    ctx.cfg = OmegaConf.merge(ctx.cfg, {"run": run})
    return run_task(task, ctx)
