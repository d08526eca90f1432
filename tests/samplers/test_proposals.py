"""The factorised Langevin proposal is written once (ebmlab.samplers.proposals): DMALA, AB-1st
at alpha = 1/2 and the ACS kernel at beta = 1/2 with the same step size are one proposal."""

from __future__ import annotations

import pytest
import torch

from ebmlab.samplers import proposals
from ebmlab.samplers.ab import AB1stKernel
from ebmlab.samplers.acs import ACSKernel
from ebmlab.samplers.base import value_and_grad
from ebmlab.samplers.dlp import DMALA
from ebmlab.samplers.proposals import Langevin
from ebmlab.samplers.spaces import StateSpace
from tests.exactness import (
    enumerate_states,
    ordinal_target,
    proposal_matrix,
    random_init,
    rows_sum_to_one,
    strong_rbm,
)

STEP = 0.3


def _three():
    return {
        "dmala": DMALA(STEP, None),
        "ab1st": AB1stKernel(sigma=STEP, alpha=0.5),
        "acs": ACSKernel(alpha=STEP, beta=0.5, mh=True, state_kind="auto"),
    }


def test_binary_proposals_and_log_q_are_identical():
    """Same flip logits to the last bit: identical q(y|x) over every pair of states."""
    model = strong_rbm()
    mats = {k: proposal_matrix(s, model) for k, s in _three().items()}
    assert rows_sum_to_one(mats["dmala"])
    assert torch.equal(mats["dmala"], mats["ab1st"]) and torch.equal(mats["dmala"], mats["acs"])


def test_ordinal_proposals_agree():
    """Ordinal: DMALA and ACS share the step-size form (identical); AB writes the same term as
    a precision 1/sigma (equal up to rounding)."""
    model = ordinal_target(d=3)
    mats = {k: proposal_matrix(s, model) for k, s in _three().items()}
    assert rows_sum_to_one(mats["dmala"])
    assert torch.equal(mats["dmala"], mats["acs"])
    assert (mats["dmala"] - mats["ab1st"]).abs().max() < 1e-10


@pytest.mark.parametrize("make", [strong_rbm, ordinal_target], ids=["binary", "ordinal"])
def test_one_step_draws_the_same_move(make):
    """From the same generator state the three samplers propose the same y and take the same
    MH decision (their log-ratios agree to rounding)."""
    model = make()
    x0 = random_init(model, 500, torch.Generator().manual_seed(0))
    out = {}
    for name, s in _three().items():
        g = torch.Generator().manual_seed(1)
        st = s.init(model, x0)
        new, info = s.step(model, st, g)
        out[name] = (new.x, info.accept_prob, info.jump)
    ref = out["dmala"]
    for name in ("ab1st", "acs"):
        assert torch.equal(out[name][0], ref[0]), name
        assert torch.equal(out[name][2], ref[2]), name
        torch.testing.assert_close(out[name][1], ref[1], rtol=0, atol=1e-5)


def test_step_and_precision_forms_are_one_proposal():
    """Langevin(step=alpha) and Langevin(precision=1/alpha) give the same log q."""
    model = ordinal_target(d=3)
    X = enumerate_states(model).double()
    _, g = value_and_grad(model, X)
    space = StateSpace("ordinal", model.n_states)
    y = X.flip(0)
    a = proposals.log_q(space, X, g, Langevin(0.7, step=0.4), y)
    b = proposals.log_q(space, X, g, Langevin(0.7, precision=1 / 0.4), y)
    torch.testing.assert_close(a, b, rtol=0, atol=1e-12)
    with pytest.raises(ValueError, match="exactly one"):
        Langevin(0.5)
    with pytest.raises(ValueError, match="exactly one"):
        Langevin(0.5, step=1.0, precision=1.0)


def test_binary_draw_matches_its_log_q():
    """sample() returns log q(y|x) of the y it drew, and the Hamming jump."""
    model = strong_rbm()
    x = random_init(model, 64, torch.Generator().manual_seed(0)).double()
    _, g = value_and_grad(model, x)
    space, p = StateSpace("binary", 2), Langevin(0.8, step=1.5)
    y, lq, jump = proposals.propose(space, x, g, p, torch.Generator().manual_seed(2))
    torch.testing.assert_close(lq, proposals.log_q(space, x, g, p, y), rtol=0, atol=0)
    assert torch.equal(jump, (y != x).sum(-1).to(jump.dtype))


def test_uniform_draws():
    """The CPU float32 uniforms: on the 2^-24 grid in [0, 1), uniform moments, reproducible
    from the seed, independent halves of each 64-bit draw; other dtypes are torch.rand."""
    u = proposals.uniform((400, 501), torch.Generator().manual_seed(0), "cpu", torch.float32)
    assert u.shape == (400, 501) and u.dtype == torch.float32
    assert float(u.min()) >= 0.0 and float(u.max()) < 1.0
    assert torch.equal(u * 2**24, (u * 2**24).round())
    assert abs(float(u.mean()) - 0.5) < 3e-3 and abs(float(u.var()) - 1 / 12) < 2e-3
    flat = u.flatten().double()
    pairs = torch.stack([flat[0:-1:2], flat[1::2]])
    assert abs(float(torch.corrcoef(pairs)[0, 1])) < 0.01
    again = proposals.uniform((400, 501), torch.Generator().manual_seed(0), "cpu", torch.float32)
    assert torch.equal(u, again)
    other = proposals.uniform((400, 501), torch.Generator().manual_seed(1), "cpu", torch.float32)
    assert not torch.equal(u, other)
    d = proposals.uniform((3, 4), torch.Generator().manual_seed(0), "cpu", torch.float64)
    assert torch.equal(
        d, torch.rand(3, 4, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    )
