"""The target RBM of the RBM sampling benchmark (ebmlab.learning.rbm_target): the block-Gibbs
ground truth and the ACS mode initialisation (the trained-RBM cache: tests/models/test_rbm.py)."""

from __future__ import annotations

import torch

from ebmlab.learning.rbm_target import ground_truth_samples, mode_init_states
from ebmlab.models.rbm import all_binary


def test_mode_init_picks_highest_mean_log_prob_class(gen, random_rbm):
    model = random_rbm()
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


def test_ground_truth_cached_and_matches_exact_marginal(tmp_path, random_rbm):
    """Block-Gibbs ground truth: exact single-bit marginals within a 5-sigma MC band; the
    second call loads the cached samples bit for bit."""
    model = random_rbm(v=6, h=4, seed=1)
    n, mean = 4000, torch.full((6,), 0.5)
    path = tmp_path / "gt.pt"
    gt = ground_truth_samples(model, mean, n, 50, seed=3, cache_path=path, progress=False)
    assert path.is_file()
    again = ground_truth_samples(model, mean, n, 50, seed=99, cache_path=path, progress=False)
    assert torch.equal(gt, again)
    v = all_binary(6)
    with torch.no_grad():
        p = torch.softmax(model.log_prob(v).double(), 0)
    exact = (p[:, None] * v.double()).sum(0)
    emp = gt.double().mean(0)
    sd = torch.sqrt(exact * (1 - exact) / n)
    assert bool(((emp - exact).abs() <= 5 * sd + 1e-9).all()), (emp, exact)
