"""PCD learners keep their divergence checks on the device (issue 46): an iteration reads
nothing back; the run loop asks at its evaluation and checkpoint points, and the error names
the first iteration that failed and the check that failed."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from ebmlab.core.loop import Cadence, LoopTask
from ebmlab.errors import DivergenceError
from tests.core.test_loop import make_ctx
from tests.helpers import from_conf, run_toy


def _data(n=40, d=9, seed=0):
    return (torch.rand(n, d, generator=torch.Generator().manual_seed(seed)) < 0.5).float()


def _pcd(seed=0, **kw):
    torch.manual_seed(seed)
    model = from_conf("model/ising", dim=9)
    learner = from_conf("learner/pcd", buffer_size=8, batch_size=8, sampler_steps=2, **kw)
    g = torch.Generator().manual_seed(seed)
    learner.setup(model, _data(), g, from_conf("sampler/gwg"))
    return learner, model, g


def test_the_first_failed_iteration_and_check_are_named():
    """A NaN parameter before iteration 3 (its loss is NaN too: the loss check, first, is
    named), then two more iterations: step 3; a NaN in the second data batch: step 2; an
    optimiser step that leaves a NaN parameter: step 1, a model parameter."""
    learner, model, g = _pcd()
    for i in range(5):
        if i == 2:
            with torch.no_grad():
                model.J_raw[0, 1] = float("nan")
        learner.step(model, g)
    with pytest.raises(DivergenceError, match="step 3: the PCD loss"):
        learner.check_divergence()
    learner, model, g = _pcd()
    learner.step(model, g)
    learner.check_divergence()  # nothing failed
    bad = _data(8, seed=3)
    bad[0, 0] = float("nan")
    learner.update(model, bad, g)
    with pytest.raises(DivergenceError, match="step 2: the PCD loss"):
        learner.check_divergence()
    learner, model, g = _pcd()
    step = learner.optimizer.step

    def overflowing_step():  # a finite loss, an optimiser step that leaves a NaN
        step()
        model.J_raw.data[0, 1] = float("nan")

    learner.optimizer.step = overflowing_step
    learner.step(model, g)
    with pytest.raises(DivergenceError, match="step 1: a model parameter"):
        learner.check_divergence()


def test_replay_buffer_loss_bound_names_its_value():
    """A finite loss beyond max_abs_loss is named as out of bounds with its value, not as
    "not finite" (the smoke deep-EBM divergence said "|loss| <= max_abs_loss (-1.11e+06) is
    not finite")."""
    torch.manual_seed(0)
    m = from_conf("model/resnet_ebm", dim=12, n_channels=4, n_blocks=1, image_shape=[3, 4])
    learner = from_conf("learner/pcd_buffer", buffer_size=12, batch_size=6, sampler_steps=2,
                        max_abs_loss=1e-9)  # fmt: skip
    g = torch.Generator().manual_seed(0)
    learner.setup(m, _data(6, 12), g, from_conf("sampler/dmala"))
    info = learner.step(m, g)
    with pytest.raises(
        DivergenceError, match=r"step 1: the PCD loss \((.+)\) exceeds max_abs_loss"
    ) as e:
        learner.check_divergence()
    assert f"({float(info['loss']):.3g})" in str(e.value)
    assert "not finite" not in str(e.value)


class PCDTask(LoopTask):
    """The loop around a PCD learner on a dense Ising; a NaN parameter before ``nan_at``."""

    checkpoint_keys = ("model", "learner")

    def __init__(self, nan_at: int):
        self.cad = Cadence(12, 5, 5)
        self.nan_at = nan_at

    def build(self, ctx):
        learner, model, _ = _pcd()
        return SimpleNamespace(model=model, learner=learner)

    def step(self, p, step, ctx):
        if step == self.nan_at:
            with torch.no_grad():
                p.model.J_raw[0, 1] = float("nan")
        return p.learner.step(p.model, ctx.generator)

    def evaluate(self, p, step, ctx):
        return {"loss_seen": 0.0}

    def finish(self, p, history, ctx):
        return {"ok": 1.0}


def test_the_loop_reports_the_iteration_a_learner_diverged_at(tmp_path):
    """Diverged at iteration 7, between the loop's checks at 5 and 10: the loop stops at 10
    with the error of step 7, and the last checkpoint stays at 5."""
    ctx = make_ctx(tmp_path)
    with pytest.raises(DivergenceError, match="step 7: the PCD loss"):
        run_toy(PCDTask(nan_at=7), ctx)
    assert ctx.workspace.load()["_run"]["step"] == 5 and ctx.last_good_step == 5
    assert run_toy(PCDTask(nan_at=99), make_ctx(tmp_path / "clean")) == {"ok": 1.0}
