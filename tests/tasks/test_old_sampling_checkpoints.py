"""Checkpoints of the sampling tasks written before the chain runner (base commit 4bfdce4)
still resume, to the numbers of an uninterrupted run of today's code.

tests/fixtures/checkpoints/<case>_4bfdce4.pt holds the ``task`` entry of ``last.pt`` of a run
made by that commit's code with the arguments below, killed by the fault hook after ``step``.
The test kills the same run of today's code at that step, puts the old entry in place of its
own and resumes.
"""

from __future__ import annotations

import pytest
import torch

from ebmlab.utils.workspace import Workspace
from tests.helpers import REPO, run_cli

FIXTURES = REPO / "tests" / "fixtures" / "checkpoints"
FIX = REPO / "tests" / "fixtures" / "images"
CASES = {
    "ising_gwg": [
        "experiment=dlp/fig3_ising_sampling", "scale=smoke", "model.n_side=3",
        "run.n_steps=80", "run.checkpoint_every=40", "task.n_chains=4", "sampler=gwg",
    ],
    "toy_acs": [  # ACS with fixed schedules (tune: false), at cycle position 40 mod 20
        "experiment=acs/fig1_toy", "scale=smoke", "sampler=acs", "model.spacing=10",
        "task.mode_radius=3", "task.n_chains=8", "run.n_steps=80", "run.eval_every=20",
        "run.checkpoint_every=40",
    ],
    "rbm_acs_tuned": [  # ACS tuned before the run (Algorithm 2), sampling at step 40 of 60
        "experiment=dlp/fig4_rbm_sampling", "scale=smoke", f"dataset.data_dir={FIX}",
        "model.n_hidden=8", "task.gt_steps=20", "task.gt_n_ref=20", "task.gt_n_floor=10",
        "sampler=acs", "task.n_chains=4", "task.ess_chains=1", "task.n_show=0",
        "run.n_steps=60", "run.checkpoint_every=20", "sampler.tune_budget=40",
        "sampler.burnin_steps=5", "sampler.burnin_mh_steps=0", "sampler.steps_per_cycle=4",
        "sampler.alpha_candidates=3", "sampler.beta_candidates=2",
    ],
}  # fmt: skip
TIMING = {"seconds", "seconds_per_step", "ess_per_second", "tune_seconds", "rbm_cached"}


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(CASES))
def test_a_sampling_task_resumes_an_old_checkpoint(tmp_path, case):
    args, cache = CASES[case], tmp_path / "cache"
    full = run_cli(args, tmp_path / "full", cache=cache).results
    old = torch.load(FIXTURES / f"{case}_4bfdce4.pt", weights_only=True)
    run = tmp_path / "old"
    env = {"EBMLAB_FAULT_KILL_AT_STEP": str(old["step"])}
    assert run_cli(args, run, cache=cache, env=env, check=False).returncode != 0
    ws = Workspace(run)
    ckpt = ws.load("last")
    assert ckpt["_run"]["step"] == old["step"] and "chains" in ckpt["task"]
    ckpt["task"] = old["task"]  # the state the old code wrote
    ws.save(ckpt, "last")
    resumed = run_cli(args, run, cache=cache).results
    assert {k: v for k, v in resumed.items() if k not in TIMING} == {
        k: v for k, v in full.items() if k not in TIMING
    }
