"""AIS for an energy model with a normalised Bernoulli base, run with any kernel (DLP / ACS
deep-EBM protocol, PROTOCOLS.md "Deep EBMs"), and the log-likelihood it feeds.

The intermediate densities are f_b = base + b net (linear from the base to the model); the
transition at each temperature is one step of a kernel on the tempered density, which
leaves f_b invariant. The network's value and gradient at the current states are carried
from one temperature to the next: one forward + backward per temperature.

    test LL = mean_{x in test} log p~(x) - log Z.
"""

from __future__ import annotations

from typing import Any, Protocol

import torch
from torch import Tensor

from ebmlab.core.chain import ChainRunner
from ebmlab.core.protocols import Kernel
from ebmlab.metrics.ais import AISResult, _bar, _check_betas, _summarise
from ebmlab.metrics.ais_blocks import TemperedAISStep, run_temperatures, schedule_state


class TemperedDensity(Protocol):
    """f_beta = base + beta net of ``model`` (e.g. :class:`ebmlab.models.resnet_ebm.TemperedEBM`).

    ``model`` has ``sample_base(n, generator)``, ``base_log_prob(x)`` and ``net(x)``; ``last``
    holds (x, net, grad net) of the last batch ``net_value_and_grad`` evaluated."""

    model: Any
    beta: float
    last: tuple[Tensor, Tensor, Tensor] | None

    def net_value_and_grad(self, x: Tensor) -> tuple[Tensor, Tensor]: ...

    def combine(self, x: Tensor, net: Tensor, gnet: Tensor) -> tuple[Tensor, Tensor]: ...


def tempered_ais_log_z(
    tempered: TemperedDensity,
    sampler: Kernel,
    betas: Tensor,
    n_chains: int,
    generator: torch.Generator,
    progress: bool,
) -> AISResult:
    """AIS estimate of log Z (Neal 2001) with one ``sampler`` step per temperature on
    ``tempered`` (a kernel that evaluates proposals through ``net_value_and_grad``, as GWG and
    DMALA do, so accepted proposals hand their cached values on). The temperatures run as
    chain-runner blocks with the schedule, ``tempered.beta`` and the log weights on the device
    (:class:`~ebmlab.metrics.ais_blocks.TemperedAISStep`; captured as CUDA graphs on a GPU);
    one transition per temperature but the last, as :func:`~ebmlab.metrics.ais.ais_log_z`."""
    bs = _check_betas(betas)
    if n_chains < 1:
        raise ValueError(f"n_chains must be >= 1 (got {n_chains})")
    model, beta_before = tempered.model, tempered.beta
    with torch.no_grad():
        x = model.sample_base(n_chains, generator)
        net, gnet = tempered.net_value_and_grad(x)
        tempered.last = None  # in the state now (a block's key holds the model's attributes)
        tempered.beta = torch.zeros((), dtype=torch.float64, device=x.device)
        kernel = TemperedAISStep(tempered, sampler)
        runner = ChainRunner(tempered, kernel, schedule_state(x, bs, net=net, gnet=gnet), generator)
        bar = _bar(len(bs) - 1, progress, "AIS")
        try:
            run_temperatures(runner, len(bs) - 2, bar)
            log_w, _ = kernel.weigh(runner.state)  # the last temperature: no transition
        finally:
            tempered.beta = beta_before
        if bar is not None:
            bar.update(1)
            bar.close()
    return _summarise(log_w, 0.0)


@torch.no_grad()
def mean_log_prob(model, x: Tensor, chunk: int) -> float:
    """Mean unnormalised log-density over the rows of ``x``, ``chunk`` rows at a time
    (accumulated in float64)."""
    lp = [model.log_prob(x[i : i + chunk]).double() for i in range(0, len(x), chunk)]
    return float(torch.cat(lp).mean())
