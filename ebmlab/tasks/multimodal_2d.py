"""The ACS 2-D multimodal toy (Pynadath et al., ICML 2024, Sec. 4.1, Fig. 1, App. D.1).

One run = one sampler on :class:`ebmlab.models.multimodal_grid.MultimodalGrid` (25 modes on
an ordinal grid). All ``n_chains`` chains start from one shared uniformly random grid point
(as the reference code does; ``init=random`` gives each chain its own); one loop step is one
sampler step, and every state visited after ``burn_in`` steps is counted in a 2-D histogram.
Reported (and logged every ``run.eval_every`` steps): ``modes_visited``, ``mode_tv`` and
``tv`` (:func:`ebmlab.metrics.mode_coverage.mode_scores`), acceptance rate and mean L1 jump.

Each run saves ``visits.pt`` (histogram) and ``ground_truth.pt`` (exact probabilities) and a
heat map; ``python -m ebmlab.report table acs/fig1_toy`` puts the ground truth and every
sampler side by side (ACS Fig. 1). A warm-up planned for the run (ACS with ``tune: true``,
Alg. 2) runs before sampling, its time counted in ``seconds`` (:mod:`ebmlab.tasks.chains`);
the paper's toy uses fixed schedules (tune: false).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from ebmlab.core.loop import Requirement
from ebmlab.errors import check
from ebmlab.metrics.mode_coverage import grid_cells, mode_scores
from ebmlab.models.multimodal_grid import MultimodalGrid
from ebmlab.plotting.multimodal_2d import heatmap
from ebmlab.tasks.chains import Chains, ChainTask

INITS = ("shared_random", "random")


@dataclass
class Parts:
    model: MultimodalGrid
    chains: Chains
    visits: Tensor  # float64 [S * S], row-major
    exact: Tensor  # exact probabilities [S, S]
    cells: Tensor  # nearest mode of each grid point [S * S]
    near: Tensor  # grid points within mode_radius of their mode [S * S]


@dataclass(eq=False)
class Multimodal2D(ChainTask):
    """Visit histogram of one sampler on the ACS toy (ACS Fig. 1). The reference code runs
    128 chains for 10,000 steps (1,000 for RW and AB)."""

    n_chains: int
    burn_in: int
    init: str
    mode_radius: float

    main_metric = "mode_tv"
    progress_desc = "2-D toy"
    requires = {
        "model": Requirement(MultimodalGrid, "model=multimodal_2d"),
        "sampler": Requirement(),
    }
    checkpoint_keys = ("chains", "visits")

    def __post_init__(self):
        n, b, init, r = self.n_chains, self.burn_in, self.init, self.mode_radius
        check(n >= 1, "n_chains", f"must be >= 1 (got {n})")
        check(b >= 0, "burn_in", f"must be >= 0 (got {b})")
        check(init in INITS, "init", f"must be one of {list(INITS)} (got {init!r})")
        check(r > 0, "mode_radius", f"must be > 0 (got {r})")
        self.mode_radius = float(r)

    def check_config(self, cfg) -> None:
        n = cfg.run.n_steps
        check(self.burn_in < n, "task.burn_in", f"must be < run.n_steps={n} (got {self.burn_in})")

    def memory_estimate(self, cfg) -> dict[str, int]:
        m = cfg.model
        s = (int(m.n_side) + 1) * int(m.spacing) + 1  # grid values per axis
        return {
            "grid_distances": s * s * int(m.n_side) ** 2 * 2 * 4,
            "histograms": 4 * s * s * 8,
            # per chain and coordinate: the proposal's log-probabilities over the s values
            # (forward and reverse) beside the state and its gradient
            "chains": self.n_chains * 2 * (2 * s + 4) * 4,
        }

    def build(self, ctx) -> Parts:
        model, sampler = ctx.build("model").to(ctx.device), self.build_sampler(ctx)
        g, dev, S = ctx.generator, ctx.device, model.n_states
        shared = self.init == "shared_random"  # one grid point for every chain
        x0 = torch.randint(0, S, (1 if shared else self.n_chains, 2), generator=g, device=dev)
        x0 = x0.float().repeat(self.n_chains if shared else 1, 1)
        chains = self.start_chains(ctx, model, sampler, x0)
        cells, dist = grid_cells(model)
        near = dist.to(dev) <= self.mode_radius
        exact = model.grid_log_probs().exp().to(dev)
        visits = torch.zeros(S * S, dtype=torch.float64, device=dev)
        return Parts(model, chains, visits, exact, cells, near)

    def record(self, state) -> Tensor:
        """The chains as integer grid points [n_chains, 2]."""
        return state.x.long()

    def keep(self, p: Parts, first: int, rows: Tensor) -> None:
        """The states after burn-in into the visit histogram (integer counts in float64: the
        same histogram in any block size)."""
        xi = rows[max(0, self.burn_in - first + 1) :].reshape(-1, 2)
        ones = torch.ones(xi.shape[0], dtype=torch.float64, device=xi.device)
        p.visits.index_add_(0, xi[:, 0] * p.model.n_states + xi[:, 1], ones)

    def scores(self, p: Parts) -> dict:
        return mode_scores(p.visits, p.exact, p.cells, p.near, p.model.n_modes)

    def evaluate(self, p: Parts, step: int, ctx) -> dict:
        return self.scores(p) if step > self.burn_in else {}  # no histogram before burn-in

    def finish(self, p: Parts, history, ctx) -> dict:
        n, name = self.cadence.n_steps, ctx.choices.get("sampler", "sampler")
        emp = (p.visits / p.visits.sum()).reshape(p.exact.shape)
        torch.save(emp.float().cpu(), ctx.run_dir / "visits.pt")
        torch.save(p.exact.float().cpu(), ctx.run_dir / "ground_truth.pt")
        ctx.save_figure(heatmap(emp, f"{name} ({ctx.scale})"), "visits", step=n)
        ctx.save_figure(heatmap(p.exact, "ground truth"), "ground_truth", step=n)
        return {
            **self.scores(p),
            "n_modes": float(p.model.n_modes),
            **self.chain_results(p, ctx),  # jump; seconds (tuning included)
            "tune_steps": float(p.chains.tune_steps),
        }
