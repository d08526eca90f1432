"""Sampler efficiency by effective sample size (AB; Sun et al., ICLR 2023, Sec. 5.1-5.3,
Tables 1-5, Fig. 1-3).

One run = one sampler on one fixed target: ``n_chains`` chains for ``run.n_steps`` steps, the
first ``burn_in`` of them burn-in (paper: 100 chains, 100,000 steps, 20,000 burn-in). After
burn-in each state is summarised by its Hamming distance to a fixed random reference state
(DISCS convention; drawn from ``ref_seed``, shared by every sampler and seed), and the ESS of
that series per chain gives :func:`~ebmlab.metrics.ess.ess_rates` (``ess_n`` per 10,000
log-likelihood queries, a gradient costing ``grad_query_cost`` more; ``ess_t`` per second of
sampling after burn-in). Also reported: acceptance and mean jump after burn-in,
``burn_in_accept_rate``, the sampler's parameters (tuned ones at their final value) and the
setup statistics of the quadratic AB samplers (``setup_*``).

Burn-in is where samplers adapt: the :class:`~ebmlab.core.chain.ChainRunner` steps the
adaptation until it is done and its frozen kernel from then on (the AB Alg. 1 variants adapt
throughout). ``sync_burn_in`` makes the burn-in the adaptation's warm-up (AB's ``burn_in``,
RWM's ``adapt_steps``); ``tune_accept`` > 0 tunes the step size towards that acceptance during
burn-in (the paper's LB baseline: DLP tuned to 0.574). Chains start from uniform states (the
paper) or, with ``init: run:<dir>``, from another sampler_ess run's last states.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch
from torch import Tensor

from ebmlab.core.chain import ChainRunner
from ebmlab.core.loop import LoopTask, Requirement
from ebmlab.core.protocols import Adaptation, DeclaredWarmup, Kernel
from ebmlab.errors import check
from ebmlab.metrics.ess import ess_rates, hamming_to_reference
from ebmlab.models.ab_targets import BayesianLogisticRegression, LatticeGaussian, QuarticMixture
from ebmlab.models.ising import BAIsing, LatticeIsing
from ebmlab.models.multimodal_grid import MultimodalGrid
from ebmlab.samplers.acceptance_tuning import AcceptanceTuning, step_size_range
from ebmlab.tasks.start_states import init_run, start_states, uniform_states

PARAMS = ("sigma", "alpha", "step_size", "radius")  # reported sampler parameters
FIXED_TARGETS = (LatticeIsing, BAIsing, LatticeGaussian, BayesianLogisticRegression)
FIXED_TARGETS += (QuarticMixture, MultimodalGrid)


@dataclass
class Parts:
    model: torch.nn.Module
    sampler: Kernel | Adaptation  # as configured
    tuner: AcceptanceTuning | None  # tune_accept > 0: the warm-up of ``sampler``
    runner: ChainRunner  # advances the chains: the adaptation, then its frozen kernel
    ref: Tensor  # the Hamming reference state [d]
    summary: Tensor  # Hamming distances after burn-in [n_steps - burn_in, chains]
    summary_row: functools.partial  # chain state -> its summary row [chains]
    burn_seconds: float | None = None  # the compute clock when burn-in ended


@dataclass(eq=False)
class SamplerESS(LoopTask):
    """ESS_n / ESS_t of one sampler on one target (AB Tables 1-5); ``target`` labels it."""

    n_chains: int
    burn_in: int
    target: str
    init: str  # uniform | run:<dir>
    ref_seed: int
    sync_burn_in: bool
    tune_accept: float
    tune_rate: float
    grad_query_cost: float
    main_metric = "ess_n"
    progress_desc = "ESS"
    requires = {
        "model": Requirement(
            FIXED_TARGETS,
            "a fixed target on a binary or ordinal space: ising_lattice, ising_ba, "
            "lattice_gaussian, blr, quartic_mixture, multimodal_2d; not a learnable model",
        ),
        "sampler": Requirement(),
    }
    checkpoint_keys = ("summary", "sampler", "tuner", "burn_seconds")  # and the chains
    reports_sampler_cost = True  # accept_rate, log_prob_ / grad_evals_per_step after burn-in

    def __post_init__(self):
        check(self.n_chains >= 1, "n_chains", f"must be >= 1 (got {self.n_chains})")
        check(self.burn_in >= 0, "burn_in", f"must be >= 0 (got {self.burn_in})")
        check(self.ref_seed >= 0, "ref_seed", f"must be >= 0 (got {self.ref_seed})")
        rate = self.tune_accept
        msg = f"must be 0 (off) or a rate in (0, 1) (got {rate})"
        check(rate == 0 or 0 < rate < 1, "tune_accept", msg)
        msg = f"acceptance tuning runs during burn-in, which is 0 steps (got {rate})"
        check(rate == 0 or self.burn_in > 0, "tune_accept", msg)
        check(self.tune_rate > 0, "tune_rate", f"must be > 0 (got {self.tune_rate})")
        cost = self.grad_query_cost
        check(cost >= 0, "grad_query_cost", f"must be >= 0 (got {cost})")
        self.init_run = init_run(self.init, "sampler_ess")

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
        model, sampler = ctx.build("model").to(ctx.device), ctx.build("sampler")
        if self.sync_burn_in and isinstance(sampler, DeclaredWarmup):
            sampler.set_warmup(self.burn_in)
        tune = (self.tune_accept, self.tune_rate, self.burn_in, "step_size", step_size_range)
        tuner = AcceptanceTuning(sampler, *tune) if self.tune_accept > 0 else None
        g, dev, n, n_steps = ctx.generator, ctx.device, self.n_chains, self.cadence.n_steps
        x0 = start_states(self.init_run, model, n, g, dev)
        ref = uniform_states(model, 1, torch.Generator().manual_seed(self.ref_seed), "cpu")[0]
        ref = ref.to(dev)
        summary = torch.zeros(n_steps - self.burn_in, n, dtype=torch.float32, device=dev)
        runner = ChainRunner(model, tuner or sampler, sampler.init(model, x0), g, n_steps)
        row = functools.partial(summary_row, ref=ref, n_chains=n)
        return Parts(model, sampler, tuner, runner, ref, summary, row)

    def step(self, p: Parts, step: int, ctx) -> dict:
        """One loop step: :meth:`steps` of one step, without the block's stacking (CPU)."""
        B = self.burn_in
        if step == B + 1:
            p.burn_seconds = ctx.elapsed()
        info = p.runner.step()
        if step <= B:
            return {"burn_in_accept_rate": info.accept_prob.float().mean()}
        p.summary[step - B - 1] = p.summary_row(p.runner.state)
        return self._with_queries(info.totals())

    def block_ends(self) -> tuple[int, ...]:
        """Blocks of steps (CUDA) end at the end of burn-in, whose steps report other scalars."""
        return (self.burn_in,) if self.burn_in > 0 else ()

    def steps(self, p: Parts, first: int, n: int, ctx) -> dict:
        """Loop steps ``first`` .. ``first + n - 1``, all within burn-in or all after it
        (:meth:`block_ends`; on CUDA one block, captured as a graph once the adaptation is
        frozen): their summed scalars, after burn-in their summary rows written at once."""
        B = self.burn_in
        if first == B + 1:
            p.burn_seconds = ctx.elapsed()
        if first <= B:
            return {"burn_in_accept_rate": p.runner.run(n)["accept_rate"]}
        sums = p.runner.run(n, p.summary_row)
        p.summary[first - B - 1 : first - B - 1 + n] = sums.pop("record")
        sums.pop("steps")
        return self._with_queries(sums)

    def _with_queries(self, sums: dict) -> dict:
        """``sums`` and the log-likelihood queries they cost (a gradient: ``grad_query_cost``)."""
        return {**sums, "queries": sums["n_log_prob"] + self.grad_query_cost * sums["n_grad"]}

    def evaluate(self, p: Parts, step: int, ctx) -> dict:
        return {"burn_in": float(step <= self.burn_in), **self._params(p, ctx)}

    def _params(self, p: Parts, ctx) -> dict:
        """Configured parameters, with the tuned values where the sampler tunes them."""
        tuned = p.sampler.state_dict() | (p.tuner.state_dict() if p.tuner else {})
        return params(ctx.cfg.sampler) | params(tuned)

    def state_dict(self, p: Parts) -> dict:
        """The chains at the top level (``init: run:<dir>`` reads ``x``), the declared keys and
        the runner's step count (absent from checkpoints before issue 44: 0)."""
        return p.runner.state.state_dict() | super().state_dict(p) | {"steps": p.runner.steps}

    def load_state_dict(self, p: Parts, d: dict) -> None:
        super().load_state_dict(p, d)
        a = p.runner.adaptation  # loaded with the sampler: the runner freezes it if done
        adaptation = None if a is None else a.state_dict()
        steps, frozen = d.get("steps", 0), a is None or a.done
        runner = {"chain": d, "adaptation": adaptation, "steps": steps, "frozen": frozen}
        p.runner.load_state_dict(runner | {"kernel": None})

    def finish(self, p: Parts, history, ctx) -> dict:
        seconds, totals = ctx.elapsed(), ctx.totals
        init_lp, init_grad = p.sampler.init_cost()
        setup = p.sampler.state_dict().get("setup_stats", {})  # quadratic AB: W, D, factor
        burn_in = {"burn_in_accept_rate": totals.mean("burn_in_accept_rate")}
        return {
            **ess_rates(p.summary.cpu(), totals.total("queries"), seconds - p.burn_seconds),
            "jump": totals.mean("jump"),
            "queries_per_step": totals.mean("queries"),
            "init_log_prob_evals": float(init_lp),
            "init_grad_evals": float(init_grad),
            "sample_seconds": seconds - p.burn_seconds,
            "seconds": seconds,
            "hamming_mean": float(p.summary.mean()),
            **self._params(p, ctx),
            **(burn_in if self.burn_in > 0 else {}),
            **{f"setup_{k}": float(v) for k, v in setup.items() if _is_number(v)},
        }


def summary_row(state, ref: Tensor, n_chains: int) -> Tensor:
    """The Hamming distance of each chain of ``state`` to ``ref`` (float [chains])."""
    return hamming_to_reference(state.x.reshape(n_chains, -1)[None], ref)[0]


def params(values) -> dict:
    """The :data:`PARAMS` among ``values`` (a sampler's config or state) that are numbers."""
    return {k: float(values[k]) for k in PARAMS if _is_number(values.get(k))}


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)
