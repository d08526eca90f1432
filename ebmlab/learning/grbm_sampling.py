"""Images from a trained GRBM as the paper shows them (App. B): chains from N(0, I) noise, each
shown as the conditional mean W h + mu with h ~ p(h|v) (:func:`sample_from_noise`)."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from ebmlab.core.chain import ChainRunner
from ebmlab.learning.grbm_cd import sample_from_noise

ToImage = Callable[[Tensor], Tensor]  # model-space rows [n, D] -> images [n, C, H, W]


@torch.no_grad()
def generate(
    model, sampler, n: int, n_steps: int, chunk: int, generator: torch.Generator, to_image: ToImage
) -> Tensor:
    """``n`` displayed samples after ``n_steps`` steps, run ``chunk`` chains at a time (the
    chunk size changes the random draws); images on the CPU."""
    out = []
    for s in range(0, n, chunk):
        _, shown = sample_from_noise(model, sampler, min(chunk, n - s), n_steps, generator)
        out.append(to_image(shown).cpu())
    return torch.cat(out)


@torch.no_grad()
def intermediate_samples(
    model,
    sampler,
    n_chains: int,
    n_steps: int,
    n_snapshots: int,
    generator: torch.Generator,
    to_image: ToImage,
) -> Tensor:
    """Fig. 2: the displayed samples of ``n_chains`` chains at ``n_snapshots`` evenly spaced
    steps of ``n_steps`` (duplicates removed). Returns images [n_chains, n_shown, C, H, W]."""
    at = {max(1, round(n_steps * (k + 1) / n_snapshots)) for k in range(n_snapshots)}
    v0 = torch.randn((n_chains, model.n_visible), generator=generator, device=model.W.device)
    runner = ChainRunner(model, sampler, sampler.init(model, v0, horizon=n_steps), generator)
    snaps = []
    for t in sorted(at):  # blocks of steps between snapshots
        runner.run(t - runner.steps)
        h = model.sample_h_given_v(runner.state.x, generator)
        snaps.append(to_image(model.mean_v_given_h(h)).cpu())
    return torch.stack(snaps, 1)
