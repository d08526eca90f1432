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
from ebmlab.errors import check, check_at_least
from ebmlab.learning.epochs import run_epoch
from ebmlab.learning.grbm_cd import GRBMModifiedCD, sample_from_noise
from ebmlab.metrics.density_2d import grid_metrics, sample_mode_metrics
from ebmlab.models.grbm import GRBM
from ebmlab.plotting.grbm_gmm import run_arrays, run_figure
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
    """``task=grbm_gmm`` (conf/task/grbm_gmm.yaml documents every key); a loop step is an epoch."""

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
        bounds = (("sample_steps n_test_points", 1), ("n_samples", 2), ("grid_points", 11))
        check_at_least(vars(self), bounds)
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
        seconds, n, mixture = ctx.elapsed(), p.learner.n_epochs, gmm_params(p.data.kind)
        args = (self.n_samples, self.sample_steps, ctx.generator)
        v, shown = (t.detach() for t in sample_from_noise(p.model, p.sampler, *args))
        results = {
            **self._grid_metrics(p),
            **sample_mode_metrics(v, shown, mixture, self.mode_radius, p.data.log_prob),
            "accept_rate": float(p.last["accept_rate"]),
            "seconds": seconds,
            "n_epochs": n,
            "sample_steps": self.sample_steps,
        }
        label = self.label or str(ctx.choices.get("sampler", ""))
        arrays = run_arrays(p.data, p.model, p.x, v, self.plot_range, self.grid_points, label)
        atomic_torch_save(arrays, ctx.run_dir / "gmm_arrays.pt")
        fig = run_figure(arrays, history.column("step"), history.column("kl"), ctx.scale)
        ctx.save_figure(fig, "gmm", step=n)
        return results
