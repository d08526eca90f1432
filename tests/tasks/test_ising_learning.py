"""Ising learning trained by ratio matching (RMwGGIS Table 3, App. J) through the real entry
point; moved here from the flat tests/test_density_modeling.py."""

from __future__ import annotations

import math

import pytest
from hydra import compose, initialize_config_dir
from hydra.utils import get_object

import ebmlab.run  # noqa: F401 - registers resolvers
from ebmlab.learning.ratio_matching_learner import RatioMatchingLearner
from ebmlab.utils.config import validate_node
from tests.helpers import REPO, run_cli

EXP = "experiment=rmwggis/table3_ising_learning"


def test_ising_learning_rmwggis_end_to_end(tmp_path):
    args = [
        EXP,
        "scale=smoke",
        "dataset.n_side=4",
        "dataset.n_samples=200",
        "dataset.gibbs_steps=2000",
        "run.n_steps=30",
        "run.eval_every=10",
        "run.checkpoint_every=10",
        "learner.batch_size=20",
    ]
    r = run_cli(args, tmp_path / "run").results
    assert math.isfinite(r["log_rmse"]) and r["time_per_iter"] > 0
    assert "accept_rate" not in r  # no sampler: no acceptance rate in the results


@pytest.mark.parametrize("learner", ["rm", "rmwggis", "rmwrand"])
def test_ising_rm_experiment_composes_with_each_learner(learner):
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        cfg = compose("config", overrides=[EXP, f"learner={learner}"])
    validate_node(cfg.learner, "learner")
    assert get_object(cfg.learner._target_) is RatioMatchingLearner
    estimator = {"rm": "full", "rmwggis": "ggis", "rmwrand": "uniform"}[learner]
    assert cfg.learner.objective == "eq3" and cfg.learner.estimator == estimator
    assert cfg.learner.l1 == 0.01
    assert cfg.learner.batch_size == 100 and cfg.learner.lr == 1e-4 and cfg.learner.s == 10
