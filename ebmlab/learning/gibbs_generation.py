"""Samples of a learned binary energy by Gibbs sampling from given start bits (RMwGGIS Sec. 5:
the model samples of the synthetic MMD and the generated graphs)."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from ebmlab.core.chain import ChainRunner
from ebmlab.samplers.gibbs import RandomScanGibbs, SweepGibbs


def gibbs_samples(
    model,
    x0: Tensor,
    sweeps: int,
    generator: torch.Generator,
    random_scan: bool = False,
    on_sweep: Callable[[], None] | None = None,
) -> Tensor:
    """``sweeps`` Gibbs sweeps from ``x0``: systematic (one :class:`SweepGibbs` step a sweep)
    or random scan (``D`` single-site steps a sweep); the model is in eval mode meanwhile.
    ``on_sweep`` is called after each sweep (a progress bar); without it the sweeps run as
    one block of the chain runner."""
    sampler = RandomScanGibbs() if random_scan else SweepGibbs()
    per_sweep, was_training = (x0.shape[1] if random_scan else 1), model.training
    model.eval()
    runner = ChainRunner(model, sampler, sampler.init(model, x0), generator)
    if on_sweep is None:  # one block of every step (one CUDA graph)
        runner.run(sweeps * per_sweep)
    for _ in range(sweeps if on_sweep is not None else 0):  # a block a sweep
        runner.run(per_sweep)
        on_sweep()
    model.train(was_training)
    return runner.state.x
