"""tasks/chains.py: a sampling task's warm-up and its loop steps, one by one or as a block
(what the loop hands a CUDA graph), give the same chains and the same summed scalars."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from types import SimpleNamespace

import torch

from ebmlab.core.loop import Cadence
from ebmlab.tasks.chains import Chains, ChainTask
from tests.exactness import frustrated_ising, random_init
from tests.helpers import from_conf

ACS = dict(
    steps_per_cycle=4, burnin_steps=3, burnin_mh_steps=4, alpha_candidates=3,
    beta_candidates=2, tune_budget=30,
)  # fmt: skip


@dataclass
class Parts:
    chains: Chains


class Toy(ChainTask):
    def __init__(self):
        self.cadence = Cadence(40, 10, 10)  # as the loop sets it from run: (no loop here)


def _start(sampler_cfg: dict):
    model = frustrated_ising(d=10, coupling=0.2, seed=1)
    ctx = SimpleNamespace(
        device=torch.device("cpu"),
        generator=torch.Generator().manual_seed(0),
        clock_paused=contextlib.nullcontext,
        build=lambda group: from_conf("sampler/acs", **sampler_cfg),
    )
    task = Toy()
    sampler = task.build_sampler(ctx)
    x0 = random_init(model, 8, torch.Generator().manual_seed(1))
    return task, Parts(task.start_chains(ctx, model, sampler, x0)), ctx


def test_warm_up_then_steps_one_by_one_or_as_blocks_agree():
    for cfg in (ACS, {**ACS, "tune": False}):
        task, one, ctx1 = _start(cfg)
        sums: dict = {}
        for step in range(1, 41):
            for k, v in task.step(one, step, ctx1).items():
                sums[k] = sums[k] + v if k in sums else v
        task, block, ctx2 = _start(cfg)
        blocks = [task.steps(block, first, 10, ctx2) for first in (1, 11, 21, 31)]
        assert torch.equal(one.chains.x, block.chains.x)
        tuned = one.chains.tune_steps
        assert tuned == block.chains.tune_steps and (tuned > 0) == cfg.get("tune", True)
        assert one.chains.runner.steps == block.chains.runner.steps == tuned + 40
        assert "steps" not in blocks[0] and set(blocks[0]) == set(sums)
        for k, v in sums.items():
            assert float(sum(b[k] for b in blocks)) == float(v), k
