"""Fixtures shared by task tests: a tiny deep EBM trained once per session through the real
entry point (ebm_learning), which the ebm_mixing tests load as their checkpoint."""

from __future__ import annotations

import pytest

from tests.helpers import REPO, run_cli

FIX = str(REPO / "tests" / "fixtures" / "images")

# dlp/table1_ebm_learning at smoke scale, shrunk to seconds on the fixture images
EBM_TINY = [
    "experiment=dlp/table1_ebm_learning",
    "scale=smoke",
    f"dataset.data_dir={FIX}",
    "model.n_channels=4",
    "model.n_blocks=0",
    "learner.buffer_size=16",
    "learner.batch_size=4",
    "learner.sampler_steps=1",
    "learner.warmup_iters=4",
    "run.n_steps=12",
    "run.eval_every=2",
    "run.checkpoint_every=4",
    "task.valid_every=6",
    "task.valid_ais_temps=8",
    "task.valid_ais_chains=4",
    "task.ais_temps=12",
    "task.ais_chains=6",
    "task.n_show=4",
]


@pytest.fixture(scope="session")
def ebm_tiny_args() -> list[str]:
    """Command-line overrides of the tiny ebm_learning run (a copy)."""
    return list(EBM_TINY)


@pytest.fixture(scope="session")
def trained_ebm(tmp_path_factory):
    """(run directory, results) of the tiny ebm_learning run: checkpoints/best.pt holds
    ``model`` and ``learner["ema"]``."""
    d = tmp_path_factory.mktemp("ebm") / "clean"
    return d, run_cli(EBM_TINY, d).results
