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
from ebmlab.core.state import ChainState
from ebmlab.metrics.ais import AISResult, ais_log_z


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
    DMALA do, so accepted proposals hand their cached values on)."""
    model = tempered.model
    cache: dict = {}  # x, net(x), grad net(x) of the current chains; the chain runner

    def base_sample(n: int, gen: torch.Generator) -> Tensor:
        x = model.sample_base(n, gen)
        cache["x"] = x
        cache["net"], cache["gnet"] = tempered.net_value_and_grad(x)
        return x

    def target_log_prob(x: Tensor) -> Tensor:
        net = cache["net"] if x is cache.get("x") else model.net(x)
        return model.base_log_prob(x) + net

    def transition(x: Tensor, beta: float, gen: torch.Generator) -> Tensor:
        if x is not cache.get("x"):
            cache["x"] = x
            cache["net"], cache["gnet"] = tempered.net_value_and_grad(x)
        net, gnet = cache["net"], cache["gnet"]
        tempered.beta = float(beta)
        lp, g = tempered.combine(x, net, gnet)
        tempered.last = None
        state = ChainState(x=x, log_prob=lp, grad=g)
        runner = cache.setdefault("runner", ChainRunner(tempered, sampler, state, gen))
        runner.state = state
        runner.step()
        y = runner.state.x
        if tempered.last is not None:  # proposal evaluated: take its values where accepted
            py, ny, gy = tempered.last
            took = (y.reshape(y.shape[0], -1) == py.reshape(py.shape[0], -1)).all(-1)
            net = torch.where(took, ny, net)
            gnet = torch.where(took.view(-1, *([1] * (gnet.dim() - 1))), gy, gnet)
        cache["x"], cache["net"], cache["gnet"] = y, net, gnet
        return y

    return ais_log_z(
        base_sample,
        model.base_log_prob,
        target_log_prob,
        transition,
        betas,
        n_chains,
        generator,
        progress=progress,
    )


@torch.no_grad()
def mean_log_prob(model, x: Tensor, chunk: int) -> float:
    """Mean unnormalised log-density over the rows of ``x``, ``chunk`` rows at a time
    (accumulated in float64)."""
    lp = [model.log_prob(x[i : i + chunk]).double() for i in range(0, len(x), chunk)]
    return float(torch.cat(lp).mean())
