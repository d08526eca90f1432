"""AIS with the schedule and the log weights on the device (issue 46): blocks of temperatures
are ChainRunner.run blocks, captured on the CPU stand-in of core.graphs; the RBM estimate is
bit-identical to the per-temperature loop with Python-float temperatures."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from ebmlab.core import graphs
from ebmlab.core.chain import ChainRunner
from ebmlab.core.state import ChainState
from ebmlab.metrics import ais_blocks
from ebmlab.metrics.ais import (
    IntermediateRBMGibbs,
    linear_betas,
    rbm_ais_log_z,
    rbm_exact_log_z,
    sigmoid_betas,
)
from ebmlab.metrics.tempered_ais import tempered_ais_log_z
from ebmlab.models.resnet_ebm import TemperedEBM
from tests.helpers import from_conf


def _rbm(v=10, h=6, seed=1):
    g = torch.Generator().manual_seed(seed)
    W = torch.randn(h, v, generator=g) * 0.4
    return W, torch.randn(v, generator=g) * 0.2, torch.randn(h, generator=g) * 0.2


def _loop_with_python_betas(W, b, c, base_b, bs, n, gen):
    """The per-temperature loop as it was: Python-float temperatures, one runner.step()."""
    v = torch.bernoulli(torch.sigmoid(base_b).expand(n, -1), generator=gen)
    log_w = torch.zeros(n, dtype=torch.float64)
    gibbs = IntermediateRBMGibbs(W, b, c, base_b)
    chains = ChainRunner(None, gibbs, ChainState(x=v, log_prob=None), gen)
    for k in range(1, len(bs)):
        v = chains.state.x
        a = v @ W.T + c
        a64 = a.to(torch.float64)
        inc = (bs[k] - bs[k - 1]) * (v @ (b - base_b)).to(torch.float64)
        inc += (F.softplus(bs[k] * a64) - F.softplus(bs[k - 1] * a64)).sum(-1)
        log_w += inc
        if k < len(bs) - 1:
            gibbs.beta, chains.state = bs[k], ChainState(x=v, log_prob=None, extra={"a": a})
            chains.step()
    return log_w


def test_log_weights_are_bit_identical_to_python_float_temperatures():
    W, b, c = _rbm()
    base_b = torch.randn(10, generator=torch.Generator().manual_seed(2)) * 0.1
    for betas in (linear_betas(57), sigmoid_betas(31)):
        bs = betas.tolist()
        res = rbm_ais_log_z(W, b, c, base_b, 0, 13, torch.Generator().manual_seed(3), betas=betas)
        ref = _loop_with_python_betas(W, b, c, base_b, bs, 13, torch.Generator().manual_seed(3))
        assert torch.equal(res.log_weights, ref)


def test_blocks_of_temperatures_are_captured_and_replayed(monkeypatch):
    """Blocks of 5 temperatures under the stand-in capture (fails on a host read or a replay
    that differs from its capture): one capture, replays, the eager log weights, and log Z
    within 4 standard errors of the exact value."""
    W, b, c = _rbm()
    base_b = torch.zeros(10)
    made = []

    def stand_in(device):
        made.append(graphs.GraphedSteps(graphs.StandInBackend()))
        return made[-1]

    eager = rbm_ais_log_z(W, b, c, base_b, 302, 64, torch.Generator().manual_seed(0))
    monkeypatch.setattr(ais_blocks, "BLOCK", 5)
    monkeypatch.setattr(graphs, "for_device", stand_in)
    graphed = rbm_ais_log_z(W, b, c, base_b, 302, 64, torch.Generator().manual_seed(0))
    (capture,) = made
    assert capture.backend.captures == 1 and capture.backend.replays == 300 // 5 - 1
    assert torch.equal(graphed.log_weights, eager.log_weights)
    exact = rbm_exact_log_z(W, b, c)
    assert abs(graphed.log_z - exact) < 4 * graphed.log_z_stderr + 0.02


@pytest.mark.parametrize("sampler", ["gwg", "dmala"])
def test_tempered_ais_blocks_are_captured_and_replayed(monkeypatch, sampler):
    """The deep-EBM AIS (DLP Table 1's final evaluation) in blocks of 4 temperatures on the
    stand-in capture: one capture, replays, the eager log weights; tempered.beta is left as
    it was."""
    made = []

    def run():
        torch.manual_seed(0)
        m = from_conf("model/resnet_ebm", dim=12, n_channels=4, n_blocks=1, image_shape=[3, 4])
        m.set_base_mean(torch.rand(12, generator=torch.Generator().manual_seed(1)) * 0.8 + 0.1)
        tempered = TemperedEBM(m)
        g = torch.Generator().manual_seed(3)
        res = tempered_ais_log_z(tempered, from_conf(f"sampler/{sampler}"), linear_betas(22), 9,
                                 g, False)  # fmt: skip
        assert tempered.beta == 1.0 and tempered.last is None
        return res

    eager = run()
    monkeypatch.setattr(ais_blocks, "BLOCK", 4)
    monkeypatch.setattr(graphs, "for_device", lambda d: made.append(_stand_in()) or made[-1])
    graphed = run()
    (capture,) = made
    assert capture.backend.captures == 1 and capture.backend.replays == 20 // 4 - 1
    assert torch.equal(graphed.log_weights, eager.log_weights)


def _stand_in():
    return graphs.GraphedSteps(graphs.StandInBackend())
