"""The ACS 2-D multimodal toy (Pynadath et al., ICML 2024, Sec. 4.1, Fig. 1, App. D.1).

One run = one sampler on :class:`ebmlab.models.multimodal_grid.MultimodalGrid` (25 modes on
an ordinal grid). All ``n_chains`` chains start from one shared uniformly random grid point
(as the reference code does; ``init=random`` gives each chain its own); one loop step is one
sampler step, and every state visited after ``burn_in`` steps is counted in a 2-D histogram.
Reported (and logged every ``run.eval_every`` steps):

* ``modes_visited``: modes with at least one sample within ``mode_radius`` of their centre;
* ``mode_tv``: total variation between the samples' and the target's mass per mode cell
  (each grid point belongs to its nearest mode), 0 = every mode weighted right, close to 1
  = stuck in one mode;
* ``tv``: total variation between the visit histogram and the exact grid distribution;
* acceptance rate and mean L1 jump.

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
from ebmlab.models.multimodal_grid import MultimodalGrid
from ebmlab.plotting.multimodal_2d import heatmap
from ebmlab.tasks.chains import Chains, ChainTask

INITS = ("shared_random", "random")


def grid_cells(model: MultimodalGrid) -> tuple[Tensor, Tensor]:
    """(nearest mode, distance to it) of every grid point, row-major over [S, S]."""
    v = torch.arange(model.n_states, dtype=model.modes.dtype, device=model.modes.device)
    return model.nearest_mode(torch.cartesian_prod(v, v))


def mode_masses(cells: Tensor, n_modes: int, prob: Tensor) -> Tensor:
    """Mass of each mode's cell under ``prob`` [S, S] -> [n_modes] (``cells``: grid_cells)."""
    flat = prob.reshape(-1).to(torch.float64)
    out = torch.zeros(n_modes, dtype=torch.float64, device=flat.device)
    return out.index_add_(0, cells.to(flat.device), flat)


def grid_points(state) -> Tensor:
    """The chains of ``state`` as integer grid points [n_chains, 2] (a block's record)."""
    return state.x.long()


@dataclass
class Parts:
    model: MultimodalGrid
    chains: Chains
    visits: Tensor  # float64 [S * S], row-major
    exact: Tensor  # exact probabilities [S, S]
    cells: Tensor  # nearest mode of each grid point [S * S]
    near: Tensor  # grid points within mode_radius of their mode [S * S]


def count_visits(p: Parts, xi: Tensor) -> None:
    """Add the grid points ``xi`` [k, 2] to the visit histogram."""
    ones = torch.ones(xi.shape[0], dtype=torch.float64, device=xi.device)
    p.visits.index_add_(0, xi[:, 0] * p.model.n_states + xi[:, 1], ones)


class Multimodal2D(ChainTask):
    """Visit histogram of one sampler on the ACS toy (ACS Fig. 1). The reference code runs
    128 chains for 10,000 steps (1,000 for RW and AB)."""

    main_metric = "mode_tv"
    progress_desc = "2-D toy"
    requires = {
        "model": Requirement(MultimodalGrid, "model=multimodal_2d"),
        "sampler": Requirement(),
    }
    checkpoint_keys = ("chains", "visits")

    def __init__(
        self,
        n_chains: int,
        burn_in: int,
        init: str,
        mode_radius: float,
    ):
        check(n_chains >= 1, "n_chains", f"must be >= 1 (got {n_chains})")
        check(burn_in >= 0, "burn_in", f"must be >= 0 (got {burn_in})")
        check(init in INITS, "init", f"must be one of {list(INITS)} (got {init!r})")
        check(mode_radius > 0, "mode_radius", f"must be > 0 (got {mode_radius})")
        self.n_chains, self.burn_in, self.init = n_chains, burn_in, init
        self.mode_radius = float(mode_radius)

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
        if self.init == "shared_random":
            x0 = torch.randint(0, S, (1, 2), generator=g, device=dev).float()
            x0 = x0.repeat(self.n_chains, 1)
        else:
            x0 = torch.randint(0, S, (self.n_chains, 2), generator=g, device=dev).float()
        chains = self.start_chains(ctx, model, sampler, x0)
        cells, dist = grid_cells(model)
        near = dist.to(dev) <= self.mode_radius
        exact = model.grid_log_probs().exp().to(dev)
        visits = torch.zeros(S * S, dtype=torch.float64, device=dev)
        return Parts(model, chains, visits, exact, cells, near)

    def legacy(self, p: Parts, d: dict) -> dict:
        tune = (d["tune"]["tune_steps"], d["tune"]["tune_seconds"])
        return {"chains": p.chains.legacy_state(d["chain"], d["sampler"], tune), **d}

    def step(self, p: Parts, step: int, ctx) -> dict:
        info = self.advance(p, step, ctx)
        if step > self.burn_in:
            count_visits(p, p.chains.x.long())
        return info.totals()

    def steps(self, p: Parts, first: int, n: int, ctx) -> dict:
        """Loop steps ``first`` .. ``first + n - 1`` as one block (on CUDA, captured as a
        graph): the states after each step come back stacked, and those after burn-in are
        counted once per block (integer counts in float64: the same histogram as per step)."""
        in_burn_in = max(0, self.burn_in - first + 1)  # the block's first steps, not counted
        record = grid_points if in_burn_in < n else None
        sums = self.advance_block(p, first, n, ctx, record=record)
        if record is not None:
            count_visits(p, sums.pop("record")[in_burn_in:].reshape(-1, 2))
        return sums

    def scores(self, p: Parts) -> dict:
        emp = (p.visits / p.visits.sum()).reshape(p.exact.shape)
        hit = p.cells[(p.visits > 0) & p.near]
        n_modes = p.model.n_modes
        masses = mode_masses(p.cells, n_modes, emp) - mode_masses(p.cells, n_modes, p.exact)
        return {
            "mode_tv": 0.5 * float(masses.abs().sum()),
            "modes_visited": float(hit.unique().numel()),
            "tv": 0.5 * float((emp - p.exact).abs().sum()),
        }

    def evaluate(self, p: Parts, step: int, ctx) -> dict:
        return self.scores(p) if step > self.burn_in else {}  # no histogram before burn-in

    def finish(self, p: Parts, history, ctx) -> dict:
        n = self.cadence.n_steps
        emp = (p.visits / p.visits.sum()).reshape(p.exact.shape)
        torch.save(emp.float().cpu(), ctx.run_dir / "visits.pt")
        torch.save(p.exact.float().cpu(), ctx.run_dir / "ground_truth.pt")
        name = ctx.choices.get("sampler", "sampler")
        ctx.save_figure(heatmap(emp, f"{name} ({ctx.scale})"), "visits", step=n)
        ctx.save_figure(heatmap(p.exact, "ground truth"), "ground_truth", step=n)
        return {
            **self.scores(p),
            "n_modes": float(p.model.n_modes),
            "jump": ctx.totals.mean("jump"),  # the sampler-cost block has the rest
            "tune_steps": float(p.chains.tune_steps),
            "seconds": ctx.elapsed() + p.chains.tune_seconds,
        }
