"""Ising sampling (DLP 7.1): RMSE of the running sample mean against the exact mean.

The target is a small lattice Ising (5x5, sigma 0.1, bias 0.2 in the paper), whose
exact mean comes from enumerating all 2^d states. One loop step is one sampler step;
every ``run.eval_every`` steps: RMSE of the running mean (over chains and time). At the end:
ESS per step and per second (per-dimension ESS after ``burn_in``, averaged over
dimensions and chains). The chains run as in every sampling task (:mod:`ebmlab.tasks.chains`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from ebmlab.errors import ConfigError, check
from ebmlab.metrics.ess import ess_per_dim
from ebmlab.models.enumeration import exact_log_z_and_mean
from ebmlab.tasks.chains import Chains, ChainTask
from ebmlab.utils.plotting import side_by_side


def states_as_uint8(state) -> Tensor:
    """The chains of ``state`` as the trace stores them (uint8 0/1)."""
    return state.x.to(torch.uint8)


@dataclass
class Parts:
    model: torch.nn.Module
    exact_mean: Tensor
    chains: Chains
    running: Tensor  # sum of all states so far, float64 [d]
    trace: Tensor  # uint8 [n_steps, chains, d]


class IsingSampling(ChainTask):
    main_metric = "log_rmse"
    progress_desc = "Ising sampling"
    checkpoint_keys = ("chains", "running", "trace")

    def __init__(
        self,
        n_chains: int,
        burn_in: float,
        max_exact_dim: int,
    ):
        check(n_chains >= 1, "n_chains", f"must be >= 1 (got {n_chains})")
        check(0 <= burn_in < 1, "burn_in", f"must be a fraction in [0, 1) (got {burn_in})")
        self.n_chains, self.burn_in, self.max_exact_dim = n_chains, burn_in, max_exact_dim

    def memory_estimate(self, cfg) -> dict[str, int]:
        d = int(cfg.model.n_side) ** 2 if "n_side" in cfg.model else self.max_exact_dim
        return {"trace": int(cfg.run.n_steps) * self.n_chains * d, "enumeration": 2**d * d * 4}

    def build(self, ctx) -> Parts:
        model = ctx.build("model").to(ctx.device)
        if any(p.requires_grad for p in model.parameters()):
            raise ConfigError(
                "model",
                "ising_sampling needs a fixed target model "
                "(model=ising_lattice or model=ising_ba), not a learnable one",
            )
        if model.dim > self.max_exact_dim:
            raise ConfigError(
                "model",
                f"exact mean needs dim <= {self.max_exact_dim} "
                f"(got {model.dim}); use a smaller lattice (model.n_side)",
            )
        sampler = self.build_sampler(ctx)
        _, exact_mean = exact_log_z_and_mean(model)
        d, dev = model.dim, ctx.device
        x0 = (torch.rand((self.n_chains, d), generator=ctx.generator, device=dev) < 0.5).float()
        trace = torch.zeros(self.cadence.n_steps, self.n_chains, d, dtype=torch.uint8, device=dev)
        running = torch.zeros(d, device=dev, dtype=torch.float64)
        chains = self.start_chains(ctx, model, sampler, x0)
        return Parts(model, exact_mean, chains, running, trace)

    def legacy(self, p: Parts, d: dict) -> dict:
        chains = p.chains.legacy_state(d, d["sampler"])  # the chains were top-level keys
        return {"chains": chains, "running": d["running"], "trace": d["trace"]}

    def step(self, p: Parts, step: int, ctx) -> dict:
        info = self.advance(p, step, ctx)
        p.trace[step - 1] = p.chains.x.to(torch.uint8)
        p.running += p.chains.x.double().sum(0)
        return info.totals()

    def steps(self, p: Parts, first: int, n: int, ctx) -> dict:
        """Loop steps ``first`` .. ``first + n - 1`` as one block (on CUDA, captured as a
        graph): the block's states come back stacked and go into the trace and the running
        sum once, on the device (states are 0/1, so the float64 sums are exact in any order:
        the same numbers as :meth:`step`)."""
        sums = self.advance_block(p, first, n, ctx, record=states_as_uint8)
        block = sums.pop("record")
        p.trace[first - 1 : first - 1 + n] = block
        p.running += block.double().sum((0, 1))
        return sums

    def evaluate(self, p: Parts, step: int, ctx) -> dict:
        mean = p.running / (step * self.n_chains)
        rmse = float(torch.sqrt(((mean.float() - p.exact_mean) ** 2).mean()))
        return {"rmse": rmse, "log_rmse": math.log(max(rmse, 1e-12))}

    def finish(self, p: Parts, history, ctx) -> dict:
        seconds, n = ctx.elapsed(), self.cadence.n_steps
        b = int(self.burn_in * n)
        ess = float(ess_per_dim(p.trace[b:].float()).mean())
        steps, secs, lr = (
            history.column("step"),
            history.column("seconds"),
            history.column("log_rmse"),
        )
        fig = side_by_side(
            [
                ("vs steps", {"log RMSE": (steps, lr)}, "step", "log RMSE"),
                ("vs seconds", {"log RMSE": (secs, lr)}, "seconds", "log RMSE"),
            ],
            title=f"Ising sampling ({ctx.choices.get('sampler', '')}, {ctx.scale})",
        )
        ctx.save_figure(fig, "log_rmse", step=n)
        totals = ctx.totals
        return {
            "rmse": math.exp(lr[-1]),
            "log_rmse": lr[-1],
            "ess": ess,
            "ess_per_step": ess / (n - b),
            "ess_per_second": ess / (seconds * (n - b) / n),  # post-burn-in share of the time
            "jump": ctx.totals.mean("jump"),  # the sampler-cost block has the rest
            **(
                {"proposal_flips": totals.mean("proposal_flips")}
                if "proposal_flips" in totals.sums
                else {}
            ),
            "seconds": seconds,
        }
