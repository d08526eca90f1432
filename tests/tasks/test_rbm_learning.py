"""RBM learning (ACS Table 1): ACS-PCD's schedule (Algorithm 6), and the rbm_learning task end
to end on the fixture images: AIS against exact enumeration for a tiny RBM, ACS-PCD, and
kill/resume."""

from __future__ import annotations

import json
import math

import pytest
import torch

from ebmlab.errors import ConfigError
from ebmlab.learning.acs_pcd import ACSPCD
from ebmlab.models.rbm import BernoulliRBM
from ebmlab.samplers.acs import ACS
from ebmlab.samplers.dlp import DMALA
from tests.helpers import REPO, check_before_compute, from_conf, run_cli

FIX = REPO / "tests" / "fixtures" / "images"
EXP = ["experiment=acs/table1_rbm_learning", "scale=smoke", "dataset=static_mnist"]
TINY = [f"dataset.data_dir={FIX}", "model.n_hidden=8", "run.n_steps=20", "task.n_show=4"]
TINY += ["learner.buffer_size=10", "learner.batch_size=10"]


def _rbm(v: int = 12, h: int = 5, seed: int = 0) -> BernoulliRBM:
    m = from_conf("model/rbm", n_visible=v, n_hidden=h)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        m.W.copy_(torch.randn(m.W.shape, generator=g))
        m.b.copy_(torch.randn(m.b.shape, generator=g))
        m.c.copy_(torch.randn(m.c.shape, generator=g))
    return m


def test_acs_pcd_schedule(gen):
    """Algorithm 6: iteration 0 re-tunes alpha_max, 1 re-tunes alpha_min, the first iteration of
    a later cycle explores without MH (accept 1, explore_steps evaluations), others exploit."""
    model = _rbm(v=16, h=6)
    data = (torch.rand(40, 16, generator=gen) < 0.3).float()
    sampler = from_conf("sampler/acs", tune=False, alpha_ceil=5.0)
    schedule = dict(cycle_length=4, retune_max_every=10, retune_min_every=10, tune_budget=10,
                    adaptive_floor=False, explore_steps=3)  # fmt: skip
    learner = from_conf(
        "learner/acs_pcd", buffer_size=8, batch_size=8, sampler_steps=6, acs=schedule
    )
    assert isinstance(learner, ACSPCD) and isinstance(sampler, ACS)
    learner.setup(model, data, gen, sampler)
    phases, evals, accs = [], [], []
    for _ in range(9):
        info = learner.step(model, gen)
        phases.append(info["phase"])
        evals.append(info["n_log_prob"])
        accs.append(info["accept_rate"])
        assert math.isfinite(info["loss"])
    assert phases == [2.0, 3.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0]
    assert evals[0] == 1 + 10 and evals[4] == 1 + 3 and evals[2] == 1 + 6
    assert accs[4] == 1.0  # exploration: no MH
    tuned = learner.acs.params  # re-tuned in the schedule; the sampler stays as configured
    assert tuned.alpha_max >= tuned.alpha_min > 0 and info["alpha_min"] == tuned.alpha_min
    assert (sampler.alpha_max, sampler.alpha_min) == (5.0, 0.1)


def test_acs_pcd_rejects_other_samplers(gen):
    learner = from_conf("learner/acs_pcd", buffer_size=4, batch_size=4, sampler_steps=2)
    with pytest.raises(ConfigError, match="acs_pcd needs sampler=acs"):
        learner.setup(_rbm(), torch.zeros(5, 12), gen, DMALA(0.2, None))


def test_task_config_errors_name_the_key():
    args = ["experiment=acs/table1_rbm_learning", "run.eval_every=100", "task.ais_every=150"]
    with pytest.raises(ConfigError, match="task.ais_every: must be 0 or a multiple of run.eval"):
        check_before_compute(args)
    with pytest.raises(ConfigError, match="train_n"):
        from_conf("task/rbm_learning", train_n=0)
    with pytest.raises(ConfigError, match="ais_groups"):
        from_conf("task/rbm_learning", ais_chains=3, ais_groups=4)
    with pytest.raises(ConfigError, match="ais_temps_max"):
        from_conf("task/rbm_learning", ais_temps=1000, ais_temps_max=500)
    with pytest.raises(ConfigError, match="ais_spread_max"):
        from_conf("task/rbm_learning", ais_spread_max=-1.0)


def test_rbm_learning_cli_ais_close_to_exact(tmp_path):
    """Tiny RBM (8 hidden units): the task's AIS log Z / test LL match exact enumeration, and a
    running AIS is logged at every ais_every-th evaluation before the last."""
    args = [*EXP, *TINY, "sampler=gwg", "task.ais_temps=500", "run.eval_every=5"]
    p = run_cli([*args, "task.ais_every=10", "task.ais_every_temps=50"], tmp_path / "run")
    r = p.results
    assert math.isfinite(r["test_ll"]) and r["n_iters"] == 20 and r["log_prob_evals_per_step"] == 11
    tol = 0.05 + 5 * r["log_z_stderr"]
    assert abs(r["log_z"] - r["log_z_exact"]) < tol
    assert abs(r["test_ll"] - r["test_ll_exact"]) < tol
    assert 0 < r["log_z_spread"] < 10 * tol  # 4 groups of 25 chains around the same log Z
    assert 50 < r["log_z_weight_ess"] <= 100  # a tiny RBM's AIS: most of the 100 chains count
    run = tmp_path / "run"
    rows = [line for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert sum('"log_z_running"' in row for row in rows) == 1  # step 10 (not 20: final AIS)
    assert (run / "figures" / "loss.png").is_file() and (run / "figures" / "buffer.png").is_file()


def test_final_ais_repeats_with_more_temperatures_while_its_groups_disagree(tmp_path):
    """A spread bound no AIS meets doubles the temperatures up to ais_temps_max (says so on
    stderr and reports the temperatures used); a loose bound keeps the first AIS."""
    args = [*EXP, *TINY, "sampler=gwg", "run.n_steps=5", "run.eval_every=5"]
    strict = ["task.ais_temps=3", "task.ais_temps_max=10", "task.ais_spread_max=1e-9"]
    p = run_cli([*args, *strict], tmp_path / "strict")
    assert p.results["ais_temps"] == 10  # 3 -> 6 -> 10 (capped)
    assert "again with 6" in p.stderr and "again with 10" in p.stderr
    assert "still" in p.stderr and p.results["log_z_spread"] > 1e-9
    rows = (tmp_path / "strict" / "metrics.jsonl").read_text().splitlines()
    tried = [json.loads(r)["ais_attempt_temps"] for r in rows if "ais_attempt_temps" in r]
    assert tried == [3, 6, 10]  # every attempt is kept in the metric log
    ess = [json.loads(r)["ais_attempt_weight_ess"] for r in rows if "ais_attempt_temps" in r]
    assert len(ess) == 3 and all(0 < e <= 100 for e in ess)
    loose = ["task.ais_temps=3", "task.ais_temps_max=10", "task.ais_spread_max=1e9"]
    q = run_cli([*args, *loose], tmp_path / "loose")
    assert q.results["ais_temps"] == 3 and "again with" not in q.stderr


@pytest.mark.slow
def test_rbm_learning_acs_cli(tmp_path):
    exp = ["experiment=acs/table1_rbm_learning_acs", "scale=smoke", "dataset=static_mnist"]
    p = run_cli([*exp, *TINY, "task.ais_temps=300"], tmp_path / "run")
    assert math.isfinite(p.results["test_ll"]) and 0 < p.results["accept_rate"] <= 1


@pytest.mark.slow
@pytest.mark.parametrize("kill_at", [13, 20], ids=["mid_run", "after_last_checkpoint"])
def test_rbm_learning_resume_after_sigkill_is_exact(tmp_path, kill_at):
    args = [*EXP, *TINY, "task.ais_temps=200", "run.eval_every=5", "run.checkpoint_every=10"]
    clean = run_cli(args, tmp_path / "clean").results
    env = {"EBMLAB_FAULT_KILL_AT_STEP": str(kill_at)}
    killed = run_cli(args, tmp_path / "killed", check=False, env=env)
    assert killed.returncode == -9 and killed.results is None, killed.stderr
    resumed = run_cli(args, tmp_path / "killed").results
    timing = {"seconds", "time_per_iter", "ais_seconds"}
    assert {k: v for k, v in resumed.items() if k not in timing} == {
        k: v for k, v in clean.items() if k not in timing
    }


def test_the_pcd_schedule_check_reads_the_declarations(monkeypatch):
    """rbm_learning asks for the learner that follows a sampler's declared ``pcd_schedule``,
    whatever the sampler's class (here DMALA declaring ACS's schedule)."""
    from omegaconf import OmegaConf

    task = from_conf("task/rbm_learning")

    def cfg(sampler: str, learner: str):
        targets = {"sampler": f"ebmlab.samplers.{sampler}", "learner": f"ebmlab.learning.{learner}"}
        return OmegaConf.create({k: {"_target_": v} for k, v in targets.items()})

    task.check_config(cfg("dlp.DMALA", "pcd.PCD"))  # no schedule declared: any PCD learner
    with pytest.raises(ConfigError, match="use learner=acs_pcd"):
        task.check_config(cfg("acs.ACS", "pcd.PCD"))
    monkeypatch.setattr(DMALA, "pcd_schedule", "acs")
    with pytest.raises(ConfigError, match="use learner=acs_pcd"):
        task.check_config(cfg("dlp.DMALA", "pcd.PCD"))
    task.check_config(cfg("dlp.DMALA", "acs_pcd.ACSPCD"))
    monkeypatch.setattr(ACSPCD, "follows_pcd_schedule", None)  # the learner's declaration read
    with pytest.raises(ConfigError, match="use learner=acs_pcd"):
        task.check_config(cfg("dlp.DMALA", "acs_pcd.ACSPCD"))
