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

from ebmlab.core.loop import Requirement
from ebmlab.errors import check
from ebmlab.metrics.ess import trace_ess
from ebmlab.models.enumeration import exact_log_z_and_mean
from ebmlab.models.ising import BAIsing, LatticeIsing
from ebmlab.plotting.sampling_runs import vs_steps_and_seconds
from ebmlab.tasks.chains import Chains, ChainTask


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


@dataclass(eq=False)
class IsingSampling(ChainTask):
    n_chains: int
    burn_in: float
    max_exact_dim: int

    main_metric = "log_rmse"
    progress_desc = "Ising sampling"
    requires = {
        "model": Requirement((LatticeIsing, BAIsing), "a fixed target: ising_lattice, ising_ba"),
        "sampler": Requirement(),
    }
    checkpoint_keys = ("chains", "running", "trace")
    record = staticmethod(states_as_uint8)

    def __post_init__(self):
        check(self.n_chains >= 1, "n_chains", f"must be >= 1 (got {self.n_chains})")
        b = self.burn_in
        check(0 <= b < 1, "burn_in", f"must be a fraction in [0, 1) (got {b})")

    def dim(self, cfg) -> int:
        m = cfg.model  # BAIsing: n_nodes; LatticeIsing: n_side x n_side
        return int(m.n_nodes) if "n_nodes" in m else int(m.n_side) ** 2

    def check_config(self, cfg) -> None:
        d, most = self.dim(cfg), self.max_exact_dim
        msg = f"the exact mean needs dim <= {most} (got {d}): use a smaller model"
        check(d <= most, "model", msg)

    def memory_estimate(self, cfg) -> dict[str, int]:
        d = min(self.dim(cfg), self.max_exact_dim)  # a larger one fails check_config
        return {"trace": int(cfg.run.n_steps) * self.n_chains * d, "enumeration": 2**d * d * 4}

    def build(self, ctx) -> Parts:
        model, sampler = ctx.build("model").to(ctx.device), self.build_sampler(ctx)
        _, exact_mean = exact_log_z_and_mean(model)
        d, dev = model.dim, ctx.device
        x0 = (torch.rand((self.n_chains, d), generator=ctx.generator, device=dev) < 0.5).float()
        trace = torch.zeros(self.cadence.n_steps, self.n_chains, d, dtype=torch.uint8, device=dev)
        running = torch.zeros(d, device=dev, dtype=torch.float64)
        chains = self.start_chains(ctx, model, sampler, x0)
        return Parts(model, exact_mean, chains, running, trace)

    def keep(self, p: Parts, first: int, rows: Tensor) -> None:
        """The states after each step into the trace and the running sum (states are 0/1, so
        the float64 sums are exact in any order and block size)."""
        p.trace[first - 1 : first - 1 + rows.shape[0]] = rows
        p.running += rows.double().sum((0, 1))

    def evaluate(self, p: Parts, step: int, ctx) -> dict:
        mean = p.running / (step * self.n_chains)
        rmse = float(torch.sqrt(((mean.float() - p.exact_mean) ** 2).mean()))
        return {"rmse": rmse, "log_rmse": math.log(max(rmse, 1e-12))}

    def finish(self, p: Parts, history, ctx) -> dict:
        seconds, n = ctx.elapsed(), self.cadence.n_steps
        ess = trace_ess(p.trace, self.burn_in, seconds)  # post-burn-in share of the time
        lr, name = history.column("log_rmse"), ctx.choices.get("sampler", "")
        curves = (history.column("step"), history.column("seconds"), lr)
        title = f"Ising sampling ({name}, {ctx.scale})"
        ctx.save_figure(
            vs_steps_and_seconds("log RMSE", *curves, "log RMSE", title), "log_rmse", step=n
        )
        flips = ctx.totals.sums.get("proposal_flips")
        return {
            "rmse": math.exp(lr[-1]),
            "log_rmse": lr[-1],
            **ess,  # ess, ess_per_step, ess_per_second
            "jump": ctx.totals.mean("jump"),  # the sampler-cost block has the rest
            **({} if flips is None else {"proposal_flips": ctx.totals.mean("proposal_flips")}),
            "seconds": seconds,  # sampling only (a warm-up is not counted here)
        }
