"""PCD with GWG-1 on models with a single-flip cache (RBM, learnable Ising) is captured once and
replayed (issue 46): the cache's tag holds the parameter versions, which PCD's optimiser moves
in place every iteration, and the capture key no longer depends on them."""

from __future__ import annotations

import pytest
import torch

from ebmlab.core import graphs
from ebmlab.learning.pcd import PersistentChains
from tests.helpers import from_conf


def _rbm():
    m = from_conf("model/rbm", n_visible=12, n_hidden=5, init_std=0.01, init_seed=0)
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in (m.W, m.b, m.c):
            p.copy_(torch.randn(p.shape, generator=g) * 0.5)
    return m


def _ising():
    torch.manual_seed(0)
    return from_conf("model/ising", dim=12, init_scale=0.1, learn_bias=True)


def _trained(make_model, capture, n_iters: int, sampler: str = "gwg"):
    model = make_model()
    learner = from_conf("learner/pcd", buffer_size=10, batch_size=8, sampler_steps=5, lr=0.01)
    data = (torch.rand(40, 12, generator=torch.Generator().manual_seed(0)) < 0.3).float()
    g = torch.Generator().manual_seed(0)
    learner.setup(model, data, g, from_conf(f"sampler/{sampler}", n_flips=1))
    learner.chains = PersistentChains(capture)
    infos = [learner.step(model, g) for _ in range(n_iters)]
    params = [p.detach().clone() for p in model.parameters()]
    return learner, params, infos


@pytest.mark.parametrize("make_model", [_rbm, _ising], ids=["rbm", "ising"])
def test_pcd_with_gwg1_captures_once_and_replays(make_model):
    """Eight iterations: one warm-up block, one capture (replayed at once), six more replays
    (the old key held the flip cache's parameter versions: a new key, so a warm-up, every
    iteration), with the eager run's buffer, parameters, acceptances and evaluation counts."""
    capture = graphs.GraphedSteps(graphs.StandInBackend())
    graphed, params, infos = _trained(make_model, capture, 8)
    eager, params0, infos0 = _trained(make_model, None, 8)
    backend = capture.backend
    assert (backend.warms, backend.captures, backend.replays) == (1, 1, 7)
    assert torch.equal(graphed.buffer, eager.buffer)
    assert all(map(torch.equal, params, params0))
    for a, b in zip(infos, infos0):
        assert torch.equal(a["accept_rate"], b["accept_rate"])
        assert torch.equal(a["loss"], b["loss"])
        assert (a["n_log_prob"], a["n_grad"]) == (b["n_log_prob"], b["n_grad"]) == (6, 6)
