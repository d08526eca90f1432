"""The floor rows of benchmarks/bench_samplers.py do the same work as the samplers they bound."""

import torch

from benchmarks.bench_samplers import floor_ops, make_sampler
from ebmlab.models.rbm import BernoulliRBM


def _rbm():
    m = BernoulliRBM(n_visible=12, n_hidden=5, init_std=0.5, init_seed=3)
    for p in m.parameters():
        p.requires_grad_(False)
    return m


def test_floor_steps_match_dmala_and_dula():
    model = _rbm()
    x0 = (torch.rand(64, 12, generator=torch.Generator().manual_seed(1)) < 0.5).float()
    for label, floor in (("DMALA", "floor DMALA"), ("DULA", "floor DULA")):
        sampler = make_sampler(label)
        state = sampler.init(model, x0)
        new, _ = sampler.step(model, state, torch.Generator().manual_seed(7))
        ops = floor_ops(model, x0, torch.Generator().manual_seed(7))
        torch.testing.assert_close(ops[floor](), new.x, rtol=0, atol=0)


def test_floor_dmala_applies_the_accept_test():
    """On the benchmark's 25x25 Ising after a short burn-in about half of DMALA's proposals are
    rejected, so this checks the floor's MH test, not only its proposal."""
    from benchmarks.bench_samplers import make_model

    model = make_model("ising", torch.device("cpu"))
    g = torch.Generator().manual_seed(1)
    sampler = make_sampler("DMALA")
    state = sampler.init(model, (torch.rand(64, model.dim, generator=g) < 0.5).float())
    for _ in range(30):
        state, _ = sampler.step(model, state, g)
    x0 = state.x.clone()
    new, info = sampler.step(model, sampler.init(model, x0), torch.Generator().manual_seed(7))
    moved = info.proposed_jump > 0
    assert (~info.accepted & moved).sum() >= 10 and (info.accepted & moved).sum() >= 10
    out = floor_ops(model, x0, torch.Generator().manual_seed(7))["floor DMALA"]()
    torch.testing.assert_close(out, new.x, rtol=0, atol=0)
