"""GRBM density modelling of the 2-D Gaussian-mixture toy (Liao et al. 2022, Sec. 4.1, App. B.1,
Fig. 1).

A GRBM (``model=grbm``, 256 hidden units) learns 1,000 points of the isotropic
(``dataset=gmm_iso``) or anisotropic (``dataset=gmm_aniso``) 3-component mixture by modified
CD (``learner=grbm_cd``: batch 100, 50,000 epochs in the paper) with one of the five sampler
settings of Fig. 1 (conf/grbm_gmm_setting/). One loop step is one epoch. Then ``n_samples``
chains run ``sample_steps`` steps from N(0, I).

Measured (the paper's Fig. 1 is qualitative; these quantify it):

- ``kl``: KL(p_true || p_model) on a grid over [-plot_range, plot_range]^2, with the model's
  log Z by quadrature on a grid twice as wide (main metric);
- ``test_nll``: mean -log p_model of ``n_test_points`` fresh points of the true mixture;
- samples (:func:`~ebmlab.metrics.density_2d.mode_stats`, ``mode_radius`` standard
  deviations): ``sample_in_mode``, ``sample_modes_covered``, ``sample_mode_tv``,
  ``sample_true_ll`` (mean true log density of the samples);
- ``shown_in_mode``, ``shown_modes_covered``: the same for what the paper's Fig. 1 plots, the
  conditional means W h + mu at the samples' last states;
- ``accept_rate``: the sampler's mean acceptance over the last epoch's negative chains.

Figure ``figures/gmm.png``: true density, model negative energy -F(v), data, samples, KL
curve. ``python -m ebmlab.report table grbm/fig1_gmm`` assembles Fig. 1 from the runs'
``gmm_arrays.pt``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor

from ebmlab.core.loop import LoopTask, Requirement
from ebmlab.core.protocols import Kernel
from ebmlab.data.gmm_toy import GMMToyDataset, gmm_params
from ebmlab.errors import check
from ebmlab.learning.epochs import run_epoch
from ebmlab.learning.grbm_cd import GRBMModifiedCD, sample_from_noise
from ebmlab.metrics.density_2d import grid_metrics, mode_stats, plot_grid
from ebmlab.models.grbm import GRBM
from ebmlab.plotting.grbm_gmm import run_figure
from ebmlab.utils.workspace import atomic_torch_save


@dataclass
class Parts:
    data: GMMToyDataset
    model: GRBM
    sampler: Kernel
    learner: GRBMModifiedCD
    x: Tensor  # the training points
    last: dict = field(default_factory=dict)  # the last epoch's averaged update scalars


@dataclass
class GRBMGmm(LoopTask):
    """``task=grbm_gmm``: one loop step is one epoch (run.n_steps, which the learner's
    n_epochs follows; run.eval_every / checkpoint_every in epochs);
    sample_steps, n_samples: the final sampling chains; the density grid is [-plot_range,
    plot_range]^2 with grid_points^2 points; n_test_points, mode_radius: see the module
    docstring; label: the run's Fig. 1 column."""

    main_metric = "kl"
    progress_desc = "GRBM GMM"
    requires = {
        "dataset": Requirement(GMMToyDataset, "dataset=gmm_iso or dataset=gmm_aniso"),
        "model": Requirement(GRBM, "model=grbm with n_visible 2", {"n_visible": 2}),
        "sampler": Requirement(),
        "learner": Requirement(GRBMModifiedCD, "learner=grbm_cd", {"n_epochs": "run.n_steps"}),
    }
    checkpoint_keys = ("model", "learner", "last")
    sample_steps: int
    n_samples: int
    plot_range: float
    grid_points: int
    n_test_points: int
    mode_radius: float
    label: str

    def __post_init__(self):
        bounds = {"sample_steps": 1, "n_samples": 2}
        bounds.update(grid_points=11, n_test_points=1)
        for k, lo in bounds.items():
            check(vars(self)[k] >= lo, k, f"an integer >= {lo} (got {vars(self)[k]})")
        check(self.plot_range > 0, "plot_range", f"> 0 (got {self.plot_range})")
        check(self.mode_radius > 0, "mode_radius", f"> 0 (got {self.mode_radius})")
        self.plot_range, self.mode_radius = float(self.plot_range), float(self.mode_radius)

    def memory_estimate(self, cfg) -> dict[str, int]:
        lc, h = cfg.learner, int(cfg.model.n_hidden)
        return {
            "negatives": int(lc.cd_steps) * int(lc.batch_size) * (2 + h) * 4,
            "log_z_grid": (2 * self.grid_points - 1) ** 2 * 3 * 8,  # points and log-densities
        }

    def build(self, ctx) -> Parts:
        data, model = ctx.build("dataset"), ctx.build("model")
        sampler, learner = ctx.build("sampler"), ctx.build("learner")
        x = data.points().to(ctx.device)
        model.reset_parameters(torch.Generator().manual_seed(int(ctx.cfg.seed)))
        model.to(ctx.device)
        learner.setup(model, x, ctx.generator, sampler)
        return Parts(data, model, sampler, learner, x)

    def step(self, p: Parts, step: int, ctx) -> dict:
        p.last = run_epoch(p.learner, p.model, ctx.generator)
        return p.last

    def evaluate(self, p: Parts, step: int, ctx) -> dict:
        return self._grid_metrics(p)

    def _grid_metrics(self, p: Parts) -> dict:
        test = p.data.fresh(self.n_test_points, p.data.seed + 1)
        return grid_metrics(p.model, p.data.log_prob, test, self.plot_range, self.grid_points)

    def finish(self, p: Parts, history, ctx) -> dict:
        seconds = ctx.elapsed()
        v, shown = sample_from_noise(
            p.model, p.sampler, self.n_samples, self.sample_steps, ctx.generator
        )
        v, shown = v.detach(), shown.detach()
        finite, finite_shown = torch.isfinite(v).all(1), torch.isfinite(shown).all(1)
        ms = mode_stats(v[finite], *gmm_params(p.data.kind), self.mode_radius)
        ms_shown = mode_stats(shown[finite_shown], *gmm_params(p.data.kind), self.mode_radius)
        results = {
            **self._grid_metrics(p),
            "sample_in_mode": ms["in_mode"] * float(finite.float().mean()),
            "sample_modes_covered": ms["modes_covered"],
            "sample_mode_tv": ms["mode_tv"],
            # what the paper's Fig. 1 plots: the conditional means W h + mu of the last states
            "shown_in_mode": ms_shown["in_mode"] * float(finite_shown.float().mean()),
            "shown_modes_covered": ms_shown["modes_covered"],
            "sample_true_ll": float(p.data.log_prob(v[finite].double().cpu()).mean()),
            "sample_finite_fraction": float(finite.float().mean()),
            "accept_rate": float(p.last["accept_rate"]),
            "seconds": seconds,
            "n_epochs": p.learner.n_epochs,
            "sample_steps": self.sample_steps,
        }
        arrays = self._arrays(p, v, ctx)
        atomic_torch_save(arrays, ctx.run_dir / "gmm_arrays.pt")
        fig = run_figure(arrays, history.column("step"), history.column("kl"), ctx.scale)
        ctx.save_figure(fig, "gmm", step=p.learner.n_epochs)
        return results

    @torch.no_grad()
    def _arrays(self, p: Parts, v: Tensor, ctx) -> dict:
        """What the Fig. 1 assembly (ebmlab/plotting/grbm_gmm.py, ``figure``) reads from a run."""
        n = self.grid_points
        pts = plot_grid(self.plot_range, n, ctx.device)
        return {
            "kind": p.data.kind,
            "label": self.label or str(ctx.choices.get("sampler", "")),
            "plot_range": self.plot_range,
            "true_density": p.data.log_prob(pts.double().cpu()).exp().reshape(n, n).float(),
            "neg_energy": p.model.log_prob(pts).cpu().reshape(n, n).float(),
            "data": p.x.cpu().float(),
            "samples": v.cpu().float(),
        }
