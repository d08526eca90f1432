"""A sampling task's warm-up (ACS's Algorithm 2) runs once per run: killed after it and
resumed, the run proposes no tuning step again and gives the uninterrupted run's numbers
(issue 44; before it, ``build`` re-ran the whole tuning on every resume)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import REPO

ARGS = [
    "experiment=acs/fig1_toy", "scale=smoke", "sampler=acs", "sampler.tune=true",
    "sampler.tune_budget=40", "sampler.burnin_steps=5", "sampler.burnin_mh_steps=0",
    "sampler.steps_per_cycle=4", "sampler.alpha_candidates=3", "sampler.beta_candidates=2",
    "task.n_chains=8", "run.n_steps=120", "run.eval_every=20", "run.checkpoint_every=40",
]  # fmt: skip

# the entry point with every tuning proposal (the tuner's kernel_step) counted in a file
DRIVER = """
import runpy, sys
import ebmlab.samplers.acs.tune as tune
real = tune.kernel_step
def counted(*a, **k):
    with open(COUNT, "a") as f:
        f.write("x")
    return real(*a, **k)
tune.kernel_step = counted
sys.argv = ["ebmlab.run", *sys.argv[1:]]
runpy.run_module("ebmlab.run", run_name="__main__")
"""


def _run(run_dir: Path, count: Path, kill_at: int | None = None):
    env = {**os.environ, "EBMLAB_CACHE": str(run_dir.parent / "cache"), "OMP_NUM_THREADS": "1"}
    env.pop("EBMLAB_FAULT_KILL_AT_STEP", None)
    if kill_at is not None:
        env["EBMLAB_FAULT_KILL_AT_STEP"] = str(kill_at)
    code = f"COUNT = {str(count)!r}\n" + DRIVER
    args = [*ARGS, "logger=none", "progress=false", f"hydra.run.dir={run_dir}"]
    p = subprocess.run(
        [sys.executable, "-c", code, *args], cwd=REPO, env=env, capture_output=True, text=True
    )
    res = run_dir / "results.json"
    results = json.loads(res.read_text())["metrics"] if res.exists() else None
    n = len(count.read_text()) if count.exists() else 0
    return p, results, n


@pytest.mark.slow
@pytest.mark.parametrize("kill_at", [40, 60])  # at a checkpoint, between two
def test_resume_after_the_warm_up_runs_no_tuning_step_again(tmp_path, kill_at):
    ref, full, n_full = _run(tmp_path / "full", tmp_path / "full.count")
    assert ref.returncode == 0, ref.stderr
    assert n_full == full["tune_steps"] > 0  # every warm-up step is a tuning proposal
    killed, none, n_killed = _run(tmp_path / "run", tmp_path / "run.count", kill_at)
    assert killed.returncode != 0 and none is None and n_killed == n_full
    again, resumed, n_total = _run(tmp_path / "run", tmp_path / "run.count")
    assert again.returncode == 0, again.stderr
    assert n_total == n_full  # the resumed process proposed no tuning step
    timing = {"seconds"}
    assert {k: v for k, v in resumed.items() if k not in timing} == {
        k: v for k, v in full.items() if k not in timing
    }
