"""DLP Table 1 (deep-EBM learning) at smoke scale with GWG: the first run a new user makes.

With the smoke preset's 5 sampler steps, GWG (one pixel per step) could not keep its replay
buffer near the model and the PCD loss ran away to |loss| > 1e6 at iteration 101 (seed 0).
GWG now keeps the paper's 40 steps per iteration at smoke scale
(conf/when/dlp/table1_ebm_learning/sampler-scale/gwg-smoke.yaml); the paper-scale config and
its divergence guard are unchanged.
"""

from __future__ import annotations

import pytest
import torch

from ebmlab.data.binary_images import binarize_batch
from ebmlab.errors import DivergenceError
from ebmlab.utils.config import build, compose_job

EXP = "experiment=dlp/table1_ebm_learning"


def _cfg(scale: str, sampler: str = "gwg", dataset: str = "static_mnist"):
    return compose_job([EXP, f"scale={scale}", f"sampler={sampler}", f"dataset={dataset}"])[1]


@pytest.mark.parametrize("dataset", ["static_mnist", "caltech"])
def test_smoke_gwg_chains_get_the_papers_steps_per_visit(dataset):
    """Between two visits of a replay-buffer chain (every buffer_size / batch_size iterations)
    the model moves by about lr * buffer_size / batch_size; the chain then gets sampler_steps
    steps. At smoke scale GWG gets the paper's steps per visit (the old preset gave it 5, 1/8
    of the paper's; the model's move per visit is the paper's on static MNIST), and a
    divergence is caught the same way at both scales."""
    paper, smoke = _cfg("paper", dataset=dataset), _cfg("smoke", dataset=dataset)

    def per_visit(c):
        ln = c.learner
        return ln.sampler_steps, ln.lr * ln.buffer_size / ln.batch_size

    (paper_steps, paper_move), (smoke_steps, smoke_move) = per_visit(paper), per_visit(smoke)
    assert paper_steps == 40  # DLP App. I.4 / the reference scripts: 40 sampling steps
    assert smoke_steps == paper_steps
    if dataset == "static_mnist":  # Caltech's paper buffer is 1,000: 1e-3 per visit there
        assert smoke_move == pytest.approx(paper_move, rel=1e-9)
    for c in (paper, smoke):  # the divergence guard: |loss| bound, best.pt evaluated
        assert c.learner.max_abs_loss == paper.learner.max_abs_loss == 1e6
        assert c.task.on_divergence == "evaluate_best"
    # the DLP samplers (about 10 flips per step) keep the smoke preset's 5 steps
    assert _cfg("smoke", sampler="dmala").learner.sampler_steps == 5


@pytest.mark.slow
def test_smoke_gwg_training_runs_past_the_old_divergence():
    """The smoke GWG learner, built from the composed config with seed 0 as a run seeds it,
    trains 110 iterations (the old preset diverged at iteration 101, |loss| 1.1e6) with the
    PCD loss bounded and the negatives overtaking the data at least once (loss > 0: the
    sampler reaches the network's high-density region, which it never did before)."""
    cfg = _cfg("smoke")
    torch.manual_seed(0)
    data = build(cfg.dataset, "dataset")
    x_train = data.split("train").x
    model = build(cfg.model, "model")
    model.set_base_mean(x_train.mean(0))
    learner, sampler = build(cfg.learner, "learner"), build(cfg.sampler, "sampler")
    g = torch.Generator().manual_seed(0)
    mode = data.split("train").binarize  # as the task: each drawn batch is binarised
    learner.setup(model, x_train, g, sampler, lambda b, gg: binarize_batch(b, mode, gg))
    losses = [float(learner.step(model, g)["loss"]) for _ in range(110)]
    try:
        learner.check_divergence()
    except DivergenceError as e:  # the old preset: "training diverged at step 101: ..."
        pytest.fail(f"smoke GWG training diverged: {e}")
    assert max(abs(v) for v in losses) < 1e3, max(losses, key=abs)
    assert max(losses) > 0
