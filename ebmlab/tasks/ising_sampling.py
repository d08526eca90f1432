"""Ising sampling (DLP 7.1): RMSE of the running sample mean against the exact mean.

The target is a small lattice Ising (5x5, sigma 0.1, bias 0.2 in the paper),
whose exact mean comes from enumerating all 2^d states. Logged per step:
acceptance and mean Hamming jump; every ``eval_every`` steps: RMSE of the
running mean (over chains and time). At the end: ESS per step and per second
(per-dimension ESS after ``burn_in``, averaged over dimensions and chains).
"""

from __future__ import annotations

import math

import torch

from ebmlab.errors import ConfigError, check
from ebmlab.metrics.ess import ess_per_dim
from ebmlab.models.enumeration import exact_log_z_and_mean
from ebmlab.utils.plotting import side_by_side


class IsingSampling:
    main_metric = "log_rmse"

    def __init__(
        self,
        n_chains: int = 32,
        n_steps: int = 5000,
        eval_every: int = 10,
        burn_in: float = 0.1,
        checkpoint_every: int = 1000,
        max_exact_dim: int = 25,
    ):
        check(n_chains >= 1, "n_chains", f"must be >= 1 (got {n_chains})")
        check(n_steps >= 1, "n_steps", f"must be >= 1 (got {n_steps})")
        check(eval_every >= 1, "eval_every", f"must be >= 1 (got {eval_every})")
        check(0 <= burn_in < 1, "burn_in", f"must be a fraction in [0, 1) (got {burn_in})")
        check(checkpoint_every >= 1, "checkpoint_every", f"must be >= 1 (got {checkpoint_every})")
        self.n_chains, self.n_steps, self.eval_every = n_chains, n_steps, eval_every
        self.burn_in, self.checkpoint_every, self.max_exact_dim = (
            burn_in,
            checkpoint_every,
            max_exact_dim,
        )

    def setup(self, ctx) -> None:
        if not ctx.has("model") or not ctx.has("sampler"):
            raise ConfigError("model", "ising_sampling needs a model and a sampler")
        self.model = ctx.build("model").to(ctx.device)
        if any(p.requires_grad for p in self.model.parameters()):
            raise ConfigError(
                "model",
                "ising_sampling needs a fixed target model "
                "(model=ising_lattice or model=ising_ba), not a learnable one",
            )
        if self.model.dim > self.max_exact_dim:
            raise ConfigError(
                "model",
                f"exact mean needs dim <= {self.max_exact_dim} "
                f"(got {self.model.dim}); use a smaller lattice (model.n_side)",
            )
        self.sampler = ctx.build("sampler")

    def run(self, ctx) -> dict:
        model, sampler, g = self.model, self.sampler, ctx.generator
        _, exact_mean = exact_log_z_and_mean(model)
        d = model.dim
        x0 = (torch.rand((self.n_chains, d), generator=g, device=ctx.device) < 0.5).float()
        state = sampler.init(model, x0)
        trace = torch.zeros(self.n_steps, self.n_chains, d, dtype=torch.uint8, device=ctx.device)
        running = torch.zeros(d, device=ctx.device, dtype=torch.float64)
        start, hist = 0, {"step": [], "seconds": [], "log_rmse": []}
        totals = {"accept": 0.0, "jump": 0.0, "n_log_prob": 0, "n_grad": 0}
        ctx.start_clock()
        ck = ctx.load_checkpoint()
        if ck is not None:
            state = state.replace(x=ck["x"], log_prob=ck["log_prob"], grad=ck["grad"])
            sampler.load_state_dict(ck["sampler"])
            start, running, trace = ck["_run"]["step"], ck["running"], ck["trace"]
            hist, totals = ck["hist"], ck["totals"]
        bar = ctx.progress(self.n_steps, initial=start, desc="Ising sampling")
        for t in range(start, self.n_steps):
            state, info = sampler.step(model, state, g)
            trace[t] = state.x.to(torch.uint8)
            running += state.x.double().sum(0)
            totals["accept"] += float(info.accept_prob.float().mean())
            totals["jump"] += float(info.jump.float().mean())
            totals["n_log_prob"] += info.n_log_prob
            totals["n_grad"] += info.n_grad
            step = t + 1
            if step % self.eval_every == 0 or step == self.n_steps:
                mean = running / (step * self.n_chains)
                rmse = float(torch.sqrt(((mean.float() - exact_mean) ** 2).mean()))
                log_rmse = math.log(max(rmse, 1e-12))
                hist["step"].append(step)
                hist["seconds"].append(ctx.elapsed())
                hist["log_rmse"].append(log_rmse)
                ctx.log(
                    {
                        "rmse": rmse,
                        "log_rmse": log_rmse,
                        "seconds": ctx.elapsed(),
                        **info.scalars(),
                    },
                    step=step,
                )
            if step % self.checkpoint_every == 0 and step < self.n_steps:
                ctx.save_checkpoint(
                    {
                        "x": state.x,
                        "log_prob": state.log_prob,
                        "grad": state.grad,
                        "sampler": sampler.state_dict(),
                        "running": running,
                        "trace": trace,
                        "hist": hist,
                        "totals": totals,
                    },
                    step=step,
                )
            bar.update(1)
            ctx.maybe_fault(step)
        bar.close()
        seconds = ctx.elapsed()
        b = int(self.burn_in * self.n_steps)
        ess = float(ess_per_dim(trace[b:].float()).mean())
        n = self.n_steps
        fig = side_by_side(
            [
                ("vs steps", {"log RMSE": (hist["step"], hist["log_rmse"])}, "step", "log RMSE"),
                (
                    "vs seconds",
                    {"log RMSE": (hist["seconds"], hist["log_rmse"])},
                    "seconds",
                    "log RMSE",
                ),
            ],
            title=f"Ising sampling ({ctx.choices.get('sampler', '')}, {ctx.scale})",
        )
        ctx.save_figure(fig, "log_rmse", step=n)
        return {
            "rmse": math.exp(hist["log_rmse"][-1]),
            "log_rmse": hist["log_rmse"][-1],
            "ess": ess,
            "ess_per_step": ess / (n - b),
            "ess_per_second": ess / (seconds * (n - b) / n),  # post-burn-in share of the time
            "accept_rate": totals["accept"] / n,
            "jump": totals["jump"] / n,
            "log_prob_evals_per_step": totals["n_log_prob"] / n,
            "grad_evals_per_step": totals["n_grad"] / n,
            "seconds": seconds,
        }
