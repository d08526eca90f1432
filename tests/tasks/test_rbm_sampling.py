"""RBM sampling task (DLP Fig. 4; ACS Fig. 4, 6, 9): end-to-end through the real entry point on
the fixture images (tests/fixtures/images), mode initialisation, and kill/resume."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from ebmlab.models.rbm import BernoulliRBM
from tests.helpers import from_conf, run_cli

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "images"
EXP = ["experiment=dlp/fig4_rbm_sampling", "scale=smoke", f"dataset.data_dir={FIX}"]
TINY = [*EXP, "model.n_hidden=8", "task.gt_steps=20", "task.gt_n_ref=20", "task.gt_n_floor=10"]


def _log_mmd_rows(run: Path) -> list[dict]:
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    return [r for r in rows if "log_mmd" in r]


def test_rbm_sampling_cli_mode_init(tmp_path):
    """Tiny end-to-end run: CD-trained RBM on the fixture MNIST, mode init, DMALA."""
    cache = tmp_path / "cache"
    args = ["task.init=mode", "run.n_steps=60", "task.gt_steps=30", "task.n_chains=8"]
    p = run_cli([*TINY, *args, "task.ess_chains=2", "task.n_show=8"], tmp_path / "run", cache)
    r = p.results
    assert r["train_split"] == "train"  # the fixture folder has MNIST training files
    for k in ("log_mmd", "log_mmd_floor", "ess", "accept_rate", "jump", "seconds"):
        assert math.isfinite(r[k]), k
    assert 0 < r["accept_rate"] <= 1 and r["grad_evals_per_step"] == 1
    assert r["tune_steps"] == 0 and r["rbm_cached"] is False
    # the mode class is the class of the training split with the highest mean log p~
    (f,) = cache.glob("rbm-*.pt")
    blob = torch.load(f, weights_only=True)
    model = BernoulliRBM(blob["n_visible"], blob["n_hidden"], 0.0, 0)  # weights loaded below
    model.load_state_dict(blob["state_dict"])
    train = from_conf("dataset/mnist_threshold", data_dir=str(FIX)).train
    with torch.no_grad():
        lp = model.log_prob(train.x)
    means = {int(k): float(lp[train.labels == k].mean()) for k in train.labels.unique()}
    assert r["mode_class"] == max(means, key=means.get)
    assert r["mode_class_log_prob"] == pytest.approx(means[r["mode_class"]], rel=1e-5)
    run = tmp_path / "run"
    for fig in ("log_mmd", "samples", "ground_truth", "init"):
        assert (run / "figures" / f"{fig}.png").is_file()
    rows = _log_mmd_rows(run)
    assert [r["step"] for r in rows] == list(range(0, 61, 10))  # step 0 and every 10 steps
    assert rows[-1]["log_mmd"] == r["log_mmd"]
    after0 = [row["log_mmd"] for row in rows[1:]]  # the convergence-speed summary
    assert r["log_mmd_mean"] == pytest.approx(sum(after0) / len(after0), rel=1e-9)


@pytest.mark.slow
def test_rbm_sampling_mode_init_needs_labels(tmp_path):
    p = run_cli([*TINY, "dataset=static_mnist", "task.init=mode"], tmp_path / "run", check=False)
    assert p.returncode == 2
    assert "task.init" in p.stderr and "labels" in p.stderr


@pytest.mark.slow
@pytest.mark.parametrize("sampler", ["dmala", "acs"])
def test_rbm_sampling_resume_matches_uninterrupted(tmp_path, sampler):
    """Killed after step 50 (checkpoint at 40): the resumed run gives the uninterrupted run's
    numbers; ACS is tuned (300 steps) before step 0 and its schedule restored on resume."""
    args = [*TINY, f"sampler={sampler}", "task.n_chains=8", "task.n_show=0"]
    args += ["run.n_steps=300", "run.checkpoint_every=40"] if sampler == "acs" else []
    args += ["run.n_steps=80", "run.checkpoint_every=40"] if sampler != "acs" else []
    cache = tmp_path / "cache"
    full = run_cli(args, tmp_path / "full", cache=cache).results
    env = {"EBMLAB_FAULT_KILL_AT_STEP": "50"}
    killed = run_cli(args, tmp_path / "res", cache=cache, env=env, check=False)
    assert killed.returncode != 0 and killed.results is None
    resumed = run_cli(args, tmp_path / "res", cache=cache).results
    # timings differ, and the first run trained the RBM that the others load from the cache
    timing = {"seconds", "seconds_per_step", "ess_per_second", "tune_seconds", "rbm_cached"}
    assert {k: v for k, v in resumed.items() if k not in timing} == {
        k: v for k, v in full.items() if k not in timing
    }
    if sampler == "acs":
        assert full["tune_steps"] == 300 and full["alpha_max"] >= full["alpha_min"] > 0
    rows_full, rows_res = _log_mmd_rows(tmp_path / "full"), _log_mmd_rows(tmp_path / "res")
    assert [(r["step"], r["log_mmd"]) for r in rows_full] == [
        (r["step"], r["log_mmd"]) for r in rows_res
    ]
