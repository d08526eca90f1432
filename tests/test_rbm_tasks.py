"""RBM sampling / RBM learning tasks: end-to-end through the real entry point on the fixture
images (tests/fixtures/images), plus the pieces the tasks add (mode init, ground-truth cache,
ACS-PCD schedule)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from ebmlab.learning.acs_pcd import ACSPCD
from ebmlab.models.rbm import BernoulliRBM
from ebmlab.samplers.acs import ACS
from ebmlab.tasks.rbm_sampling import ground_truth_samples, mode_init_states
from tests.helpers import run_cli

FIX = Path(__file__).parent / "fixtures" / "images"
TINY = [f"dataset.data_dir={FIX}", "model.n_hidden=8"]


def _rbm(v: int = 12, h: int = 5, seed: int = 0) -> BernoulliRBM:
    m = BernoulliRBM(v, h)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        m.W.copy_(torch.randn(m.W.shape, generator=g))
        m.b.copy_(torch.randn(m.b.shape, generator=g))
        m.c.copy_(torch.randn(m.c.shape, generator=g))
    return m


def test_mode_init_picks_highest_mean_log_prob_class(gen):
    model = _rbm()
    x = (torch.rand(60, 12, generator=gen) < 0.5).float()
    labels = torch.arange(60) % 4
    with torch.no_grad():
        lp = model.log_prob(x)
    means = torch.stack([lp[labels == k].mean() for k in range(4)])
    cls, got_means, x0 = mode_init_states(model, x, labels, 7, gen)
    assert cls == int(means.argmax())
    torch.testing.assert_close(got_means.to(means.dtype), means)
    # every initial state is a training image of that class
    member = (x0[:, None, :] == x[labels == cls][None]).all(-1).any(-1)
    assert x0.shape == (7, 12) and bool(member.all())
    # fewer class members than chains: drawn with replacement, still from the class
    _, _, x_many = mode_init_states(model, x, labels, 40, gen)
    assert bool((x_many[:, None, :] == x[labels == cls][None]).all(-1).any(-1).all())


def test_ground_truth_cached_and_matches_exact_marginal(tmp_path):
    """Block-Gibbs ground truth: exact single-bit marginals within a 5-sigma MC band; the
    second call loads the cached samples bit for bit."""
    model = _rbm(v=6, h=4, seed=1)
    n = 4000
    path = tmp_path / "gt.pt"
    gt = ground_truth_samples(model, torch.full((6,), 0.5), n, 50, seed=3, cache_path=path)
    assert path.is_file()
    again = ground_truth_samples(model, torch.full((6,), 0.5), n, 50, seed=99, cache_path=path)
    assert torch.equal(gt, again)
    from ebmlab.models.rbm import all_binary

    v = all_binary(6)
    with torch.no_grad():
        p = torch.softmax(model.log_prob(v).double(), 0)
    exact = (p[:, None] * v.double()).sum(0)
    emp = gt.double().mean(0)
    sd = torch.sqrt(exact * (1 - exact) / n)
    assert bool(((emp - exact).abs() <= 5 * sd + 1e-9).all()), (emp, exact)


def test_acs_pcd_schedule(gen):
    """Algorithm 6: iteration 0 re-tunes alpha_max, 1 re-tunes alpha_min, the first iteration of
    a later cycle explores without MH (accept 1, explore_steps evaluations), others exploit."""
    model = _rbm(v=16, h=6)
    data = (torch.rand(40, 16, generator=gen) < 0.3).float()
    sampler = ACS(
        tune=False,
        alpha_ceil=5.0,
        pcd_cycle_length=4,
        pcd_retune_max_every=10,
        pcd_retune_min_every=10,
        pcd_tune_budget=10,
    )
    learner = ACSPCD(buffer_size=8, batch_size=8, sampler_steps=6, explore_steps=3)
    learner.setup(model, sampler, data, gen)
    phases, evals, accs = [], [], []
    for _ in range(9):
        info = learner.step(model, learner.sample_batch(data, gen), gen)
        phases.append(info["phase"])
        evals.append(info["n_log_prob"])
        accs.append(info["accept_rate"])
        assert math.isfinite(info["loss"])
    assert phases == [2.0, 3.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0]
    assert evals[0] == 1 + 10 and evals[4] == 1 + 3 and evals[2] == 1 + 6
    assert accs[4] == 1.0  # exploration: no MH
    assert sampler.alpha_max >= sampler.alpha_min > 0


def test_acs_pcd_rejects_other_samplers(gen):
    from ebmlab.errors import ConfigError
    from ebmlab.samplers.dlp import DMALA

    learner = ACSPCD(buffer_size=4, batch_size=4, sampler_steps=2)
    with pytest.raises(ConfigError, match="acs_pcd needs sampler=acs"):
        learner.setup(_rbm(), DMALA(0.2), torch.zeros(5, 12), gen)


def test_rbm_sampling_cli_mode_init(tmp_path):
    """Tiny end-to-end run: CD-trained RBM on the fixture MNIST, mode init, DMALA."""
    cache = tmp_path / "cache"
    p = run_cli(
        [
            "experiment=rbm_sampling_smoke",
            *TINY,
            "task.init=mode",
            "task.n_steps=60",
            "task.gt_steps=30",
            "task.gt_n_ref=20",
            "task.gt_n_floor=10",
            "task.n_chains=8",
            "task.ess_chains=2",
            "task.n_show=8",
        ],
        tmp_path / "run",
        cache=cache,
    )
    r = p.results
    assert r["train_split"] == "train"  # the fixture folder has MNIST training files
    for k in ("log_mmd", "log_mmd_floor", "ess", "accept_rate", "jump", "seconds"):
        assert math.isfinite(r[k]), k
    assert 0 < r["accept_rate"] <= 1 and r["grad_evals_per_step"] == 1
    # the mode class is the class of the training split with the highest mean log p~
    (f,) = cache.glob("rbm-*.pt")
    blob = torch.load(f, weights_only=True)
    model = BernoulliRBM(blob["n_visible"], blob["n_hidden"])
    model.load_state_dict(blob["state_dict"])
    from ebmlab.data.binary_images import BinaryImages

    train = BinaryImages("mnist_threshold", str(FIX)).train
    with torch.no_grad():
        lp = model.log_prob(train.x)
    means = {int(k): float(lp[train.labels == k].mean()) for k in train.labels.unique()}
    assert r["mode_class"] == max(means, key=means.get)
    assert r["mode_class_log_prob"] == pytest.approx(means[r["mode_class"]], rel=1e-5)
    run = tmp_path / "run"
    for fig in ("log_mmd", "samples", "ground_truth", "init"):
        assert (run / "figures" / f"{fig}.png").is_file()
    rows = [line for line in (run / "metrics.jsonl").read_text().splitlines() if "log_mmd" in line]
    assert len(rows) == 60 // 10 + 1  # step 0 and every 10 steps


def test_rbm_learning_cli_ais_close_to_exact(tmp_path):
    """Tiny RBM (8 hidden units): the task's AIS log Z / test LL match exact enumeration."""
    p = run_cli(
        [
            "experiment=rbm_learning_smoke",
            *TINY,
            "sampler=gwg",
            "task.n_iters=20",
            "task.ais_temps=500",
            "task.n_show=4",
            "learner.buffer_size=10",
            "learner.batch_size=10",
        ],
        tmp_path / "run",
    )
    r = p.results
    assert math.isfinite(r["test_ll"]) and r["n_iters"] == 20
    tol = 0.05 + 5 * r["log_z_stderr"]
    assert abs(r["log_z"] - r["log_z_exact"]) < tol
    assert abs(r["test_ll"] - r["test_ll_exact"]) < tol


@pytest.mark.slow
def test_rbm_sampling_mode_init_needs_labels(tmp_path):
    p = run_cli(
        ["experiment=rbm_sampling_smoke", "dataset=static_mnist", *TINY, "task.init=mode"],
        tmp_path / "run",
        check=False,
    )
    assert p.returncode == 2
    assert "task.init" in p.stderr and "labels" in p.stderr


@pytest.mark.slow
def test_rbm_learning_acs_cli(tmp_path):
    p = run_cli(
        [
            "experiment=rbm_learning_acs_smoke",
            *TINY,
            "sampler=acs",
            "task.n_iters=20",
            "task.ais_temps=300",
            "learner.buffer_size=10",
            "learner.batch_size=10",
        ],
        tmp_path / "run",
    )
    assert math.isfinite(p.results["test_ll"])


@pytest.mark.slow
def test_rbm_sampling_resume_matches_uninterrupted(tmp_path):
    args = [
        "experiment=rbm_sampling_smoke",
        *TINY,
        "task.n_steps=80",
        "task.gt_steps=20",
        "task.gt_n_ref=20",
        "task.gt_n_floor=10",
        "task.n_chains=8",
        "task.checkpoint_every=40",
        "task.n_show=0",
    ]
    cache = tmp_path / "cache"
    full = run_cli(args, tmp_path / "full", cache=cache).results
    env = {"EBMLAB_FAULT_KILL_AT_STEP": "50"}
    killed = run_cli(args, tmp_path / "res", cache=cache, env=env, check=False)
    assert killed.returncode != 0 and killed.results is None
    resumed = run_cli(args, tmp_path / "res", cache=cache).results
    for k in ("log_mmd", "ess", "accept_rate", "jump"):
        assert resumed[k] == pytest.approx(full[k], rel=1e-6), k
