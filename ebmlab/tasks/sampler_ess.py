"""Sampler efficiency by effective sample size (AB; Sun et al., ICLR 2023, Sec. 5.1-5.3,
Tables 1-5, Fig. 1-3).

One run = one sampler on one fixed target: ``n_chains`` chains for ``run.n_steps`` steps (one
loop step each), the first ``burn_in`` of them burn-in (paper: 100 chains, 100,000 steps,
20,000 burn-in). After burn-in each state is summarised by its Hamming distance to a fixed
random reference state (DISCS convention; drawn from ``ref_seed``, shared by every sampler
and seed); the ESS of that series is computed per chain and averaged over chains. Reported:
``ess_n``, the ESS per 10,000 log-likelihood queries after burn-in (a query is one batched
evaluation of f; a gradient costs ``grad_query_cost`` more), ``ess_t``, the ESS per second of
post-burn-in sampling, ``ess_se`` / ``ess_n_se`` the standard error of the mean over chains
(std / sqrt(chains); none for ``ess_t``, whose error is mostly wall-time noise), the spread
of the per-chain ESS (``ess_cv``) and the fraction of chains that never moved the statistic
(``constant_chains``; see :func:`per_chain_ess`), acceptance and mean jump after burn-in,
``burn_in_accept_rate`` (left out when ``burn_in`` is 0), the sampler's parameters (tuned
ones at their final value) and the setup statistics of the quadratic AB samplers
(``setup_*``).

Burn-in is where samplers adapt: the chains advance through
:class:`~ebmlab.core.chain.ChainRunner`, which steps an adaptation (AB's burn-in, RWM's radius,
acceptance tuning) until it is done and its frozen kernel from then on, so the measured chain
is a fixed, exact kernel (the AB Alg. 1 variants adapt throughout). With ``sync_burn_in`` the
task declares its burn-in as the adaptation's warm-up (:class:`DeclaredWarmup`, e.g. AB's
``burn_in``, RWM's ``adapt_steps``). ``tune_accept`` > 0 tunes the step size towards that
acceptance during burn-in (:mod:`ebmlab.samplers.acceptance_tuning`; the paper's LB baseline:
DLP tuned to 0.574). Warm-up steps are loop steps: a run resumed mid-burn-in continues the
adaptation from its checkpoint and re-runs none of it.

Chains start from independent uniform states (``init: uniform``, the paper's protocol) or,
with ``init: run:<dir>`` (``<dir>`` a finished or interrupted sampler_ess run directory on the
same target), from that run's last chain states, e.g. to ask whether a sampler that cannot
leave uniform starts mixes once it starts where another sampler has burnt in.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

import torch
from torch import Tensor

from ebmlab.core.chain import ChainRunner
from ebmlab.core.loop import LoopTask
from ebmlab.core.protocols import BINARY, ORDINAL, Adaptation, Kernel
from ebmlab.errors import ConfigError, check
from ebmlab.metrics.ess import ess_1d, ess_per_queries, hamming_to_reference
from ebmlab.samplers.acceptance_tuning import AcceptanceTuning, step_size_range
from ebmlab.utils.workspace import Workspace

PARAMS = ("sigma", "alpha", "step_size", "radius")  # reported sampler parameters
INITS, SPACES = ("uniform", "run:<run directory>"), (BINARY, ORDINAL)


def per_chain_ess(summary: Tensor) -> dict:
    """Mean and spread over chains of the per-chain ESS of ``summary`` [steps, chains]:
    ``ess``, ``ess_std``, ``ess_cv`` (std / mean), and ``constant_chains``, the fraction of
    chains whose statistic never changed (each counted as ESS 1, the reference convention).
    A large ``ess_cv`` or any constant chains say the mean is not a mixing rate: e.g. a
    target with nearly all its mass on one state, where a chain that stays scores 1 and one
    with a few isolated excursions scores near the run length."""
    ess = ess_1d(summary)
    mean = float(ess.mean())
    std = float(ess.std()) if ess.numel() > 1 else 0.0
    constant = (summary.amax(0) == summary.amin(0)).float().mean()
    return {
        "ess": mean,
        "ess_std": std,
        "ess_cv": std / max(mean, 1e-12),
        "constant_chains": float(constant),
    }


def random_states(model, n: int, generator: torch.Generator, device) -> Tensor:
    """n uniformly random states [n, dim] of a binary or ordinal model."""
    shape = (n, int(model.dim))
    if model.state_kind == ORDINAL:
        x = torch.randint(0, int(model.n_states), shape, generator=generator, device=device)
        return x.float()
    return (torch.rand(shape, generator=generator, device=device) < 0.5).float()


@runtime_checkable
class DeclaredWarmup(Adaptation, Protocol):
    """An adaptation whose warm-up length the task sets before the first step (AB's
    ``burn_in``, RWM's ``adapt_steps``, acceptance tuning's steps)."""

    def set_warmup(self, n_steps: int) -> None: ...


@dataclass
class Parts:
    model: torch.nn.Module
    sampler: Kernel | Adaptation  # as configured
    tuner: AcceptanceTuning | None  # tune_accept > 0: the warm-up of ``sampler``
    runner: ChainRunner  # advances the chains: the adaptation, then its frozen kernel
    ref: Tensor  # the Hamming reference state [d]
    summary: Tensor  # Hamming distances after burn-in [n_steps - burn_in, chains]
    config_params: dict  # the sampler's parameters as configured
    burn_seconds: float | None = None  # the compute clock when burn-in ended
    summary_row: Callable | None = None  # chain state -> its summary row [chains] (Hamming)


class SamplerESS(LoopTask):
    """ESS_n / ESS_t of one sampler on one target (AB Tables 1-5). ``target`` labels the
    target in tables (e.g. "grid_J0.4407"); ``init`` "uniform": independent uniform states."""

    main_metric = "ess_n"
    reports_sampler_cost = True  # accept_rate, log_prob_ / grad_evals_per_step after burn-in
    progress_desc = "ESS"

    def __init__(
        self,
        n_chains: int,
        burn_in: int,
        target: str,
        init: str,
        ref_seed: int,
        sync_burn_in: bool,
        tune_accept: float,
        tune_rate: float,
        grad_query_cost: float,
    ):
        check(n_chains >= 1, "n_chains", f"must be >= 1 (got {n_chains})")
        check(burn_in >= 0, "burn_in", f"must be >= 0 (got {burn_in})")
        init = str(init)
        init_run = init[len("run:") :] if init.startswith("run:") else None
        check(init == "uniform" or init_run, "init", f"must be one of {list(INITS)} (got {init!r})")
        if init_run is not None:
            found = Workspace(Path(init_run)).last.exists()
            msg = (
                f"run:<dir> must name a sampler_ess run directory with a checkpoint (got {init!r})"
            )
            check(found, "init", msg)
        check(ref_seed >= 0, "ref_seed", f"must be >= 0 (got {ref_seed})")
        msg = f"must be 0 (off) or a rate in (0, 1) (got {tune_accept})"
        check(tune_accept == 0 or 0 < tune_accept < 1, "tune_accept", msg)
        msg = f"acceptance tuning runs during burn-in, which is 0 steps (got {tune_accept})"
        check(tune_accept == 0 or burn_in > 0, "tune_accept", msg)
        check(tune_rate > 0, "tune_rate", f"must be > 0 (got {tune_rate})")
        check(grad_query_cost >= 0, "grad_query_cost", f"must be >= 0 (got {grad_query_cost})")
        self.n_chains, self.burn_in, self.ref_seed = n_chains, burn_in, ref_seed
        self.init_run = init_run
        self.sync_burn_in, self.tune_accept, self.tune_rate = sync_burn_in, tune_accept, tune_rate
        self.grad_query_cost, self.target = grad_query_cost, target

    def check_config(self, cfg) -> None:
        n_steps = cfg.run.n_steps
        check(n_steps >= 5, "run.n_steps", f"must be >= 5 for an ESS (got {n_steps})")
        msg = f"must be in [0, run.n_steps - 4] so the ESS has >= 4 steps (got {self.burn_in})"
        check(self.burn_in <= n_steps - 4, "task.burn_in", msg)

    def memory_estimate(self, cfg) -> dict[str, int]:
        m = cfg.get("model") or {}
        d = int(m.get("dim") or m.get("n_nodes") or int(m.get("n_side") or 0) ** 2 or 1)
        return {
            "summary": (int(cfg.run.n_steps) - self.burn_in) * self.n_chains * 4,
            "chains": 4 * self.n_chains * d * 4,  # states, gradients, proposals, flip probabilities
        }

    def build(self, ctx) -> Parts:
        model = ctx.build("model").to(ctx.device)
        if any(p.requires_grad for p in model.parameters()) or model.state_kind not in SPACES:
            raise ConfigError(
                "model",
                "sampler_ess needs a fixed target on a binary or ordinal space (ising_lattice, "
                "ising_ba, lattice_gaussian, blr, quartic_mixture, ...), not a learnable model",
            )
        sampler_cfg = ctx.cfg.sampler
        sampler = ctx.build("sampler")
        if self.sync_burn_in and isinstance(sampler, DeclaredWarmup):
            sampler.set_warmup(self.burn_in)
        tuner = None
        if self.tune_accept > 0:
            args = (self.tune_accept, self.tune_rate, self.burn_in, "step_size", step_size_range)
            tuner = AcceptanceTuning(sampler, *args)
        configured = {k: float(sampler_cfg[k]) for k in PARAMS if _is_number(sampler_cfg.get(k))}
        g, dev, n = ctx.generator, ctx.device, self.n_chains
        x0 = (
            random_states(model, n, g, dev)
            if self.init_run is None
            else self._run_states(model, dev)
        )
        ref = random_states(model, 1, torch.Generator().manual_seed(self.ref_seed), "cpu")[0]
        m = self.cadence.n_steps - self.burn_in
        summary = torch.zeros(m, n, dtype=torch.float32, device=dev)
        state = sampler.init(model, x0)
        runner = ChainRunner(model, tuner or sampler, state, g, run_steps=self.cadence.n_steps)
        parts = Parts(model, sampler, tuner, runner, ref.to(dev), summary, configured)
        parts.summary_row = functools.partial(summary_row, ref=parts.ref, n_chains=n)
        return parts

    def _run_states(self, model, device) -> Tensor:
        """The chain states of the ``run:<dir>`` run's last checkpoint, checked against this
        target, on ``device`` (the other run may have run on another device)."""
        ck = Workspace(Path(self.init_run)).load("last", device)
        x = (ck or {}).get("task", {}).get("x") if isinstance(ck, dict) else None
        want = (self.n_chains, int(model.dim))
        if not isinstance(x, Tensor) or tuple(x.shape) != want:
            got = "no chain states" if not isinstance(x, Tensor) else f"states {tuple(x.shape)}"
            raise ConfigError(
                "init", f"{self.init_run} holds {got}; this run needs {want} (n_chains, model dim)"
            )
        if model.state_kind == ORDINAL:
            ok = bool(((x >= 0) & (x < int(model.n_states)) & (x == x.round())).all())
        else:
            ok = bool(((x == 0) | (x == 1)).all())
        if not ok:
            raise ConfigError("init", f"{self.init_run}'s states are not states of this target")
        return x.float().clone()  # on the device: loaded there

    def step(self, p: Parts, step: int, ctx) -> dict:
        B = self.burn_in
        if step == B + 1:
            p.burn_seconds = ctx.elapsed()
        info = p.runner.step()
        if step <= B:
            return {"burn_in_accept_rate": info.accept_prob.float().mean()}
        p.summary[step - B - 1] = p.summary_row(p.runner.state)
        queries = info.n_log_prob + self.grad_query_cost * info.n_grad
        return {**info.totals(), "queries": queries}

    def block_ends(self) -> tuple[int, ...]:
        """Blocks of steps (CUDA) end at the end of burn-in, whose steps report other scalars."""
        return (self.burn_in,) if self.burn_in > 0 else ()

    def steps(self, p: Parts, first: int, n: int, ctx) -> dict:
        """Loop steps ``first`` .. ``first + n - 1`` as one block (on CUDA; captured as a graph
        once the adaptation is frozen), all within burn-in or all after it (:meth:`block_ends`):
        the same sums as :meth:`step`'s, and after burn-in the block's summary rows, stacked by
        the chain runner, written into the summary once, on the device."""
        B = self.burn_in
        if first == B + 1:
            p.burn_seconds = ctx.elapsed()
        if first <= B < first + n - 1:
            raise RuntimeError(f"steps {first}..{first + n - 1} straddle the end of burn-in ({B})")
        if first <= B:
            return {"burn_in_accept_rate": p.runner.run(n)["accept_rate"]}
        sums = p.runner.run(n, p.summary_row)
        p.summary[first - B - 1 : first - B - 1 + n] = sums.pop("record")
        sums.pop("steps")
        sums["queries"] = sums["n_log_prob"] + self.grad_query_cost * sums["n_grad"]
        return sums

    def _params(self, p: Parts) -> dict:
        """Configured parameters, with the tuned values where the sampler tunes them."""
        state = p.sampler.state_dict() | (p.tuner.state_dict() if p.tuner else {})
        tuned = {k: float(state[k]) for k in PARAMS if _is_number(state.get(k))}
        return p.config_params | tuned

    def evaluate(self, p: Parts, step: int, ctx) -> dict:
        return {"burn_in": float(step <= self.burn_in), **self._params(p)}

    def state_dict(self, p: Parts) -> dict:
        """The chains' state at the top level (``init: run:<dir>`` reads ``x``), the
        sampler's state (the adaptation's, mid-warm-up or done), the tuner's and the runner's
        step count (absent from checkpoints before issue 44: 0)."""
        tuner = p.tuner.state_dict() if p.tuner else None
        chains = {**p.runner.state.state_dict(), "summary": p.summary}
        sampler = {"sampler": p.sampler.state_dict(), "tuner": tuner}
        return {**chains, **sampler, "burn_seconds": p.burn_seconds, "steps": p.runner.steps}

    def load_state_dict(self, p: Parts, d: dict) -> None:
        p.sampler.load_state_dict(d["sampler"])
        if p.tuner:
            p.tuner.load_state_dict(d["tuner"])
        a = p.runner.adaptation  # the runner freezes an adaptation that is done, unstepped
        runner = {"chain": d, "adaptation": None if a is None else a.state_dict()}
        runner |= {"steps": d.get("steps", 0), "frozen": a is None or a.done, "kernel": None}
        p.runner.load_state_dict(runner)
        p.summary, p.burn_seconds = d["summary"].to(p.summary.device), d["burn_seconds"]

    def finish(self, p: Parts, history, ctx) -> dict:
        seconds, totals, m = ctx.elapsed(), ctx.totals, self.cadence.n_steps - self.burn_in
        sample_seconds = seconds - p.burn_seconds
        chains = per_chain_ess(p.summary.cpu())
        ess_mean, ess_std = chains["ess"], chains["ess_std"]
        init_lp, init_grad = p.sampler.init_cost()
        rel_se = ess_std / math.sqrt(self.n_chains) / max(ess_mean, 1e-12)  # of the chain mean
        ess_n = ess_per_queries(ess_mean, totals.total("queries"))
        ess_t = ess_mean / max(sample_seconds, 1e-12)
        out = {
            **chains,  # ess, ess_std, ess_cv, constant_chains
            "ess_se": ess_mean * rel_se,
            "ess_n": ess_n,
            "ess_n_se": ess_n * rel_se,
            "ess_t": ess_t,  # no _se: wall-time noise, not the chains, dominates its error
            "ess_per_step": ess_mean / m,
            "jump": totals.mean("jump"),
            "queries_per_step": totals.mean("queries"),
            "init_log_prob_evals": float(init_lp),
            "init_grad_evals": float(init_grad),
            "sample_seconds": sample_seconds,
            "seconds": seconds,
            "hamming_mean": float(p.summary.mean()),
            **self._params(p),
        }
        if self.burn_in > 0:
            out["burn_in_accept_rate"] = totals.mean("burn_in_accept_rate")
        setup = p.sampler.state_dict().get("setup_stats", {})  # quadratic AB: W, D, factor
        out |= {f"setup_{k}": float(v) for k, v in setup.items() if _is_number(v)}
        return out


def summary_row(state, ref: Tensor, n_chains: int) -> Tensor:
    """The Hamming distance of each chain of ``state`` to ``ref`` (float [chains])."""
    return hamming_to_reference(state.x.reshape(n_chains, -1)[None], ref)[0]


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)
