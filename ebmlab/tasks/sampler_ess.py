"""Sampler efficiency by effective sample size (AB paper, Sun et al. ICLR 2023, Sec. 5.1-5.3,
Tables 1-5, Fig. 1-3).

One run = one sampler on one fixed target (``model=``): ``n_chains`` chains for ``n_steps``
steps, the first ``burn_in`` of which are burn-in (paper: 100 chains, 100,000 steps, 20,000
burn-in). The chain is summarised by its Hamming distance to a fixed random reference state
(DISCS convention; the reference is drawn from ``ref_seed`` so every sampler and seed shares
it), and the ESS of that series is computed per chain after burn-in
(:func:`ebmlab.metrics.ess.ess_1d`) and averaged over chains. Reported:

* ``ess_n``: ESS per 10,000 log-likelihood queries. A query is one batched evaluation of f
  at one state (``StepInfo.n_log_prob``, per chain); a gradient at a state whose f is also
  evaluated costs ``grad_query_cost`` extra queries (default 0: f and its gradient from one
  forward/backward are one query; the gradient's price shows in ``ess_t``). Queries are
  counted over the post-burn-in steps, the ones the ESS is computed on.
* ``ess_t``: ESS per second of post-burn-in sampling (wall clock of the sampler steps only).
* acceptance rate and mean jump distance (Hamming / L1) after burn-in, and the sampler's
  tuned parameters.

Burn-in is where samplers adapt: with ``sync_burn_in`` the sampler's own adaptation window
(``burn_in`` of the AB samplers, ``adapt_steps`` of RWM) is set to the task's burn-in, so the
reported chain is a fixed, exact kernel. ``tune_accept`` > 0 additionally tunes the sampler
attribute ``tune_attr`` (e.g. DMALA's ``step_size``) during burn-in by Robbins-Monro on its
logarithm towards that acceptance rate: the paper's LB baseline is DLP tuned to 0.574
(Sun et al. 2022b), its RWM tuned to 0.234.

``python -m ebmlab.tasks.sampler_ess grid SWEEP_DIR --out FIG.png`` draws the ESS over a
(sigma, alpha) sweep (AB Fig. 1-3: one line per sigma, ESS against alpha).
"""

from __future__ import annotations

import math
import time

import torch

from ebmlab.errors import ConfigError, check
from ebmlab.metrics.ess import ess_1d, hamming_to_reference
from ebmlab.samplers.base import ChainState

INITS = ("uniform",)
_TUNED_ATTRS = ("sigma", "alpha", "step_size", "radius")


def random_states(model, n: int, generator: torch.Generator, device) -> torch.Tensor:
    """n uniformly random states [n, dim] of a binary or ordinal model."""
    kind = getattr(model, "state_kind", "binary")
    d = int(model.dim)
    if kind == "binary":
        return (torch.rand((n, d), generator=generator, device=device) < 0.5).float()
    if kind == "ordinal":
        S = int(model.n_states)
        return torch.randint(0, S, (n, d), generator=generator, device=device).float()
    raise ConfigError("model", f"sampler_ess needs a binary or ordinal model (got {kind!r})")


def ess_per_queries(ess: float, queries: float, per: float = 10_000.0) -> float:
    """ESS per ``per`` log-likelihood queries (AB's ESS_n): ess * per / queries."""
    if queries <= 0:
        raise ValueError(f"queries must be > 0 (got {queries})")
    return float(ess) * per / float(queries)


class AcceptanceTuner:
    """Robbins-Monro on log(sampler.<attr>) towards a target acceptance rate (burn-in only).

    log v <- log v + rate * t^-0.6 * (mean accept - target), clipped to [1e-6, 1e6].
    """

    def __init__(self, sampler, attr: str, target: float, rate: float = 1.0):
        self.sampler, self.attr, self.target, self.rate = sampler, attr, target, rate
        self.t = 0

    def update(self, accept: float) -> None:
        self.t += 1
        v = float(getattr(self.sampler, self.attr))
        log_v = math.log(v) + self.rate * self.t**-0.6 * (accept - self.target)
        setattr(self.sampler, self.attr, min(max(math.exp(log_v), 1e-6), 1e6))

    def state_dict(self) -> dict:
        return {"t": self.t, "value": float(getattr(self.sampler, self.attr))}

    def load_state_dict(self, d: dict) -> None:
        self.t = int(d["t"])
        setattr(self.sampler, self.attr, float(d["value"]))


class SamplerESS:
    """Task ``sampler_ess``: ESS_n / ESS_t of one sampler on one target (AB Tables 1-5).

    target: free label naming the target in tables (e.g. "grid_J0.4407"); not used otherwise.
    ref_seed: seed of the fixed random reference state of the Hamming summary.
    init: initial states ("uniform": independent uniform states per chain).
    """

    main_metric = "ess_n"

    def __init__(
        self,
        n_chains: int = 100,
        n_steps: int = 100000,
        burn_in: int = 20000,
        target: str = "",
        init: str = "uniform",
        ref_seed: int = 12345,
        sync_burn_in: bool = True,
        tune_accept: float = 0.0,
        tune_attr: str = "step_size",
        tune_rate: float = 1.0,
        grad_query_cost: float = 0.0,
        log_every: int = 100,
        checkpoint_every: int = 10000,
    ):
        check(n_chains >= 1, "n_chains", f"must be >= 1 (got {n_chains})")
        check(n_steps >= 5, "n_steps", f"must be >= 5 (got {n_steps})")
        check(
            0 <= burn_in <= n_steps - 4,
            "burn_in",
            f"must be in [0, n_steps - 4] so the ESS has >= 4 steps (got {burn_in})",
        )
        check(init in INITS, "init", f"must be one of {list(INITS)} (got {init!r})")
        check(ref_seed >= 0, "ref_seed", f"must be >= 0 (got {ref_seed})")
        check(
            tune_accept == 0 or 0 < tune_accept < 1,
            "tune_accept",
            f"must be 0 (off) or a rate in (0, 1) (got {tune_accept})",
        )
        check(
            tune_accept == 0 or burn_in > 0,
            "tune_accept",
            f"acceptance tuning runs during burn-in, which is 0 steps (got {tune_accept})",
        )
        check(tune_rate > 0, "tune_rate", f"must be > 0 (got {tune_rate})")
        check(grad_query_cost >= 0, "grad_query_cost", f"must be >= 0 (got {grad_query_cost})")
        check(log_every >= 1, "log_every", f"must be >= 1 (got {log_every})")
        check(checkpoint_every >= 1, "checkpoint_every", f"must be >= 1 (got {checkpoint_every})")
        self.n_chains, self.n_steps, self.burn_in = n_chains, n_steps, burn_in
        self.target, self.init, self.ref_seed = target, init, ref_seed
        self.sync_burn_in, self.tune_accept = sync_burn_in, tune_accept
        self.tune_attr, self.tune_rate = tune_attr, tune_rate
        self.grad_query_cost = grad_query_cost
        self.log_every, self.checkpoint_every = log_every, checkpoint_every

    # ------------------------------------------------------------------------------ setup
    def setup(self, ctx) -> None:
        if not ctx.has("model") or not ctx.has("sampler"):
            raise ConfigError("model", "sampler_ess needs a model (the target) and a sampler")
        self.model = ctx.build("model").to(ctx.device)
        if any(p.requires_grad for p in self.model.parameters()):
            raise ConfigError(
                "model",
                "sampler_ess needs a fixed target (ising_lattice, ising_ba, lattice_gaussian, "
                "blr, quartic_mixture, ...), not a learnable model",
            )
        kind = getattr(self.model, "state_kind", "binary")
        if kind not in ("binary", "ordinal"):
            raise ConfigError("model", f"sampler_ess needs a binary or ordinal model (got {kind})")
        extra = {}
        if self.sync_burn_in:
            keys = set(ctx.cfg.sampler.keys())
            if "burn_in" in keys:
                extra["burn_in"] = self.burn_in
            if "adapt_steps" in keys:
                extra["adapt_steps"] = self.burn_in
        self.sampler = ctx.build("sampler", **extra)
        if self.tune_accept > 0:
            v = getattr(self.sampler, self.tune_attr, None)
            if not isinstance(v, (int, float)) or isinstance(v, bool) or v <= 0:
                raise ConfigError(
                    "task.tune_attr",
                    f"the sampler ({type(self.sampler).__name__}) has no positive numeric "
                    f"attribute {self.tune_attr!r} to tune (e.g. step_size for dmala)",
                )

    # -------------------------------------------------------------------------------- run
    def _params(self) -> dict:
        out = {}
        for k in _TUNED_ATTRS:
            v = getattr(self.sampler, k, None)
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                out[k] = float(v)
        return out

    def run(self, ctx) -> dict:
        model, sampler, g, dev = self.model, self.sampler, ctx.generator, ctx.device
        n, T, B = self.n_chains, self.n_steps, self.burn_in
        x0 = random_states(model, n, g, dev)
        ref = random_states(model, 1, torch.Generator().manual_seed(self.ref_seed), "cpu")[0]
        ref = ref.to(dev)
        tuner = (
            AcceptanceTuner(sampler, self.tune_attr, self.tune_accept, self.tune_rate)
            if self.tune_accept > 0
            else None
        )
        summary = torch.zeros(T - B, n, dtype=torch.float32, device=dev)
        tot = {
            k: 0.0
            for k in (
                "accept",
                "jump",
                "burn_accept",
                "queries",
                "n_log_prob",
                "n_grad",
                "sample_s",
            )
        }
        init_lp, init_grad = sampler.init_cost() if hasattr(sampler, "init_cost") else (1, 1)
        start = 0
        ctx.start_clock()
        state = sampler.init(model, x0)
        ck = ctx.load_checkpoint()
        if ck is not None:
            state = ChainState(x=ck["x"], log_prob=ck["log_prob"], grad=ck["grad"])
            sampler.load_state_dict(ck["sampler"])
            if tuner is not None:
                tuner.load_state_dict(ck["tuner"])
            start, summary, tot = ck["_run"]["step"], ck["summary"], ck["totals"]
        sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
        bar = ctx.progress(T, initial=start, desc=f"ESS {ctx.choices.get('sampler', '')}")
        blk = {"accept": 0.0, "jump": 0.0, "n": 0}
        for t in range(start, T):
            sync()
            t0 = time.perf_counter()
            state, info = sampler.step(model, state, g)
            if t >= B:
                summary[t - B] = hamming_to_reference(state.x.reshape(n, -1)[None], ref)[0]
                sync()
                tot["sample_s"] += time.perf_counter() - t0
            acc = float(info.accept_prob.float().mean())
            jump = float(info.jump.float().mean())
            if t < B:
                tot["burn_accept"] += acc
                if tuner is not None:
                    tuner.update(acc)
            else:
                tot["accept"] += acc
                tot["jump"] += jump
                tot["n_log_prob"] += info.n_log_prob
                tot["n_grad"] += info.n_grad
                tot["queries"] += info.n_log_prob + self.grad_query_cost * info.n_grad
            blk["accept"] += acc
            blk["jump"] += jump
            blk["n"] += 1
            step = t + 1
            if step % self.log_every == 0 or step == T:
                ctx.log(
                    {
                        "accept_rate": blk["accept"] / blk["n"],
                        "jump": blk["jump"] / blk["n"],
                        "burn_in": float(step <= B),
                        "seconds": ctx.elapsed(),
                        **self._params(),
                    },
                    step=step,
                )
                blk = {"accept": 0.0, "jump": 0.0, "n": 0}
            if step % self.checkpoint_every == 0 and step < T:
                ctx.save_checkpoint(
                    {
                        "x": state.x,
                        "log_prob": state.log_prob,
                        "grad": state.grad,
                        "sampler": sampler.state_dict(),
                        "tuner": tuner.state_dict() if tuner is not None else None,
                        "summary": summary,
                        "totals": tot,
                    },
                    step=step,
                )
            bar.update(1)
            ctx.maybe_fault(step)
        bar.close()
        m = T - B
        ess = ess_1d(summary.cpu())  # [chains]
        ess_mean = float(ess.mean())
        out = {
            "ess": ess_mean,
            "ess_std": float(ess.std()) if n > 1 else 0.0,
            "ess_n": ess_per_queries(ess_mean, tot["queries"]),
            "ess_t": ess_mean / max(tot["sample_s"], 1e-12),
            "ess_per_step": ess_mean / m,
            "accept_rate": tot["accept"] / m,
            "jump": tot["jump"] / m,
            "burn_in_accept_rate": tot["burn_accept"] / B if B > 0 else float("nan"),
            "queries_per_step": tot["queries"] / m,
            "log_prob_evals_per_step": tot["n_log_prob"] / m,
            "grad_evals_per_step": tot["n_grad"] / m,
            "init_log_prob_evals": float(init_lp),
            "init_grad_evals": float(init_grad),
            "sample_seconds": tot["sample_s"],
            "seconds": ctx.elapsed(),
            "hamming_mean": float(summary.mean()),
            **self._params(),
        }
        for k, v in (getattr(sampler, "setup_stats", None) or {}).items():
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                out[f"setup_{k}"] = float(v)
        return out


# ------------------------------------------------------------------------- (sigma, alpha) grid


def grid_figure(runs: list[dict], metric: str = "ess_n", title: str = ""):
    """ESS over a (sigma, alpha) sweep: one line per sigma, ``metric`` against alpha (AB Fig. 1-3).

    ``runs`` come from :func:`ebmlab.report.collect`; sigma and alpha are read from the runs'
    ``sampler.sigma`` / ``sampler.alpha`` overrides, averaged over seeds.
    """
    import numpy as np

    from ebmlab.utils.plotting import curves

    cells: dict = {}
    for r in runs:
        ov = r["overrides"]
        if "sampler.sigma" not in ov or "sampler.alpha" not in ov or metric not in r["metrics"]:
            continue
        key = (float(ov["sampler.sigma"]), float(ov["sampler.alpha"]))
        cells.setdefault(key, []).append(float(r["metrics"][metric]))
    if not cells:
        raise SystemExit(f"no runs with sampler.sigma / sampler.alpha overrides and {metric!r}")
    series = {}
    for s in sorted({k[0] for k in cells}):
        alphas = sorted(a for (sg, a) in cells if sg == s)
        series[f"sigma={s:g}"] = (alphas, [float(np.mean(cells[(s, a)])) for a in alphas])
    return curves(series, "alpha", metric, title=title)


def main(argv=None) -> None:
    import argparse
    from pathlib import Path

    import matplotlib.pyplot as plt

    from ebmlab.report import collect

    ap = argparse.ArgumentParser(description="sampler_ess figures")
    sub = ap.add_subparsers(dest="cmd", required=True)
    gp = sub.add_parser("grid", help="ESS over a (sigma, alpha) sweep (AB Fig. 1-3)")
    gp.add_argument("sweep_dir", type=Path, nargs="+")
    gp.add_argument("--metric", default="ess_n")
    gp.add_argument("--title", default="")
    gp.add_argument("--out", type=Path, required=True)
    a = ap.parse_args(argv)
    runs = [r for d in a.sweep_dir for r in collect(d)]
    fig = grid_figure(runs, a.metric, a.title)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(a.out, dpi=120, bbox_inches="tight")
    plt.close(fig)
    print(f"written: {a.out}")


if __name__ == "__main__":
    main()
