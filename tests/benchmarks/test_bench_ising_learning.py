"""The Ising learning benchmark builds every learner from the experiments' own configs."""

from __future__ import annotations

import pytest
import torch

from benchmarks.bench_ising_learning import REF, cases, make_learner

pytestmark = pytest.mark.usefixtures("one_thread")


def test_every_case_is_the_experiment_learner_and_steps():
    found = cases([5], pcd_batch=16)
    assert REF in found and "PCD DMALA, 5 steps" in found
    for label, overrides in found.items():
        model, learner, gen = make_learner(overrides, seed=0)
        if label.startswith("PCD"):
            assert learner.sampler_steps == 5 and learner.buffer.shape == (16, 625)
        if label == "RM (generic)":
            continue  # 625 flipped vectors per sample: seconds per step
        j0 = model.J.detach().clone()
        learner.step(model, gen)
        assert not torch.equal(model.J.detach(), j0), label
