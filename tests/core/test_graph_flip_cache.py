"""Captured blocks of kernels that use the model's single-flip cache (GWG-1, Gibbs-1; issue 46),
on the CPU stand-in of core.graphs. The cache's tag holds the parameter versions it was computed
with; a capture key holds only whether it is the model's current tag, so parameters updated in
place (a PCD optimiser step) keep the graph, while a cache restored from a checkpoint is still
checked (on the host, so eagerly) at every resume."""

from __future__ import annotations

import pytest
import torch

from ebmlab.core import graphs
from ebmlab.core.chain import ChainRunner
from ebmlab.core.state import RESTORED
from ebmlab.models.rbm import BernoulliRBM
from tests.helpers import from_conf

D, CHAINS = 16, 8

SAMPLERS = {
    "GWG-1": lambda: from_conf("sampler/gwg", n_flips=1),
    "Gibbs-1": lambda: from_conf("sampler/gibbs"),
}


def _runner(name, capture):
    model = BernoulliRBM(n_visible=D, n_hidden=6, init_std=0.5, init_seed=3)
    for p in model.parameters():
        p.requires_grad_(False)
    g = torch.Generator().manual_seed(0)
    x0 = (torch.rand(CHAINS, D, generator=g) < 0.5).float()
    kernel = SAMPLERS[name]()
    return ChainRunner(model, kernel, kernel.init(model, x0), g, capture=capture)


def _same_sums(a, b):
    assert a.keys() == b.keys()
    for k in a:
        same = torch.equal(a[k], b[k]) if isinstance(a[k], torch.Tensor) else a[k] == b[k]
        assert same, k


@pytest.mark.parametrize("name", list(SAMPLERS))
def test_a_kept_runner_under_in_place_updates_captures_once(name):
    """The model's parameters scaled in place between blocks, the chains kept (their cache goes
    stale and the block's first step rebuilds it): one capture for the stale-cache block, then
    replays; the same chains, caches and sums (the rebuild's evaluation counted) as eager, and
    a replayed state's cache is tagged with the parameters' current versions, so an eager step
    after it uses the cache without a rebuild."""
    capture = graphs.GraphedSteps(graphs.StandInBackend())
    graphed, eager = _runner(name, capture), _runner(name, None)
    for i in range(6):
        for r in (graphed, eager) if i else ():
            with torch.no_grad():
                r.model.W.mul_(0.9)
                r.model.c.add_(0.1)
        _same_sums(graphed.run(5), eager.run(5))
        assert graphed.state.aux["flip"][0] == graphed.model.flip_tag()
    backend = capture.backend
    assert (backend.warms, backend.captures, backend.replays) == (2, 1, 4)
    graphed.capture = None  # eager from here: the cache is used as it is, no re-evaluation
    _same_sums(graphed.run(3), eager.run(3))
    assert torch.equal(graphed.state.x, eager.state.x)
    assert torch.equal(graphed.state.aux["flip"][1][0], eager.state.aux["flip"][1][0])
    assert torch.equal(graphed.generator.get_state(), eager.generator.get_state())


@pytest.mark.parametrize("stale", [False, True], ids=["same-parameters", "parameters-moved"])
def test_a_restored_flip_cache_is_checked_eagerly_at_every_resume(stale):
    """The same checkpoint restored three times into one runner (its graphs kept): each first
    block checks the restored cache on the host (eagerly; the old key captured it the second
    time, and the check's allclose failed inside the capture) and keeps it, or rebuilds it when
    the parameters moved since; the blocks after it replay. Same sums as eager."""
    capture = graphs.GraphedSteps(graphs.StandInBackend())
    graphed, eager = _runner("GWG-1", capture), _runner("GWG-1", None)
    for r in (graphed, eager):
        for _ in range(3):
            r.run(4)
    saved = graphed.state_dict(), graphed.generator.get_state()
    if stale:
        for r in (graphed, eager):
            with torch.no_grad():
                r.model.W.mul_(0.5)
    for _ in range(3):
        for r in (graphed, eager):
            r.load_state_dict(saved[0])
            r.generator.set_state(saved[1])
            assert r.state.aux["flip"][0] == RESTORED
        for _ in range(3):
            _same_sums(graphed.run(4), eager.run(4))
        assert torch.equal(graphed.state.x, eager.state.x)
    assert capture.backend.captures == 1 and capture.backend.replays >= 7
