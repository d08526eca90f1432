"""Synthetic density modelling on Gray-coded 2-D toy data (RMwGGIS Sec. 5.1; Table 1, 4;
Fig. 1, 2, 4).

An energy (model=mlp_energy) learns a toy density encoded as d bits (dataset=synthetic_2d)
by ratio matching (learner=rm | rmwggis | rmwrand) or by PCD with a sampler (learner=pcd).
One loop step is one learner ``update`` on ``learner.batch_size`` FRESH data points (the
data are a stream). Every ``mmd_every`` steps and at the end: ``mmd`` (Table 1), the unbiased
MMD^2 (linear kernel d - Hamming) between ``mmd_samples`` model samples (``gibbs_sweeps``
Gibbs sweeps from uniform bits) and as many fresh true samples (the final one with
``mmd_se``); ``rm_objective`` (Table 4), the full Eq. (3) on ``rm_samples`` fresh points;
either left out when its size is 0. Heat maps of exp(-E) over [-b, b]^2 (Fig. 1; every
``heatmap_every`` steps for Fig. 4) go to figures and ``heatmap.npz``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from hydra.utils import get_object
from torch import Tensor

from ebmlab.core.loop import LoopTask, Requirement
from ebmlab.data.synthetic_2d import Synthetic2D
from ebmlab.errors import check, check_at_least
from ebmlab.learning.gibbs_generation import gibbs_samples
from ebmlab.learning.ratio_matching import ratio_matching_loss
from ebmlab.metrics.density_2d import log_density_grid
from ebmlab.metrics.mmd import mmd2_linear_hamming_unbiased, mmd2_linear_hamming_unbiased_se
from ebmlab.models.base import EnergyModel
from ebmlab.plotting import density_modeling as figures
from ebmlab.tasks import ratio_matching_or_pcd as rm_or_pcd
from ebmlab.utils.memory import learner_batch_bytes

_EVAL_CHUNK = 16384  # rows per forward over all n*d neighbours / the grid (memory only)
SCORES = {"mmd", "rm_objective"}


@dataclass
class Parts:
    model: EnergyModel
    data: Synthetic2D
    learner: object  # RatioMatchingLearner | PCD
    data_gen: torch.Generator  # draws the data stream (on the CPU)
    grid: Tensor  # grid bits [r * r, d]
    snaps: list = field(default_factory=list)  # (step, log density over the grid)
    last: dict = field(default_factory=dict)  # the last update's scalars
    final: dict = field(default_factory=dict)  # model / true samples of the last MMD


@dataclass
class DensityModeling(LoopTask):
    """``task=density_modeling`` (conf/task/density_modeling.yaml documents every key)."""

    main_metric = "mmd"
    progress_desc = "density modelling"
    requires = {
        "dataset": Requirement(Synthetic2D, "a Gray-coded 2-D dataset (dataset=synthetic_2d)"),
        "model": Requirement(EnergyModel, "a binary energy (model=mlp_energy or rbm)"),
        "learner": rm_or_pcd.LEARNER,
    }
    checkpoint_keys = ("model", "learner", "snaps", "data_gen", "last", "final")
    periods = ("mmd_every",)
    mmd_every: int
    heatmap_every: int
    mmd_samples: int
    gibbs_sweeps: int
    rm_samples: int
    heatmap_resolution: int
    heatmap_bound: float

    def __post_init__(self):
        bounds = (("heatmap_every rm_samples", 0), ("gibbs_sweeps", 1), ("heatmap_resolution", 2))
        check_at_least(vars(self), bounds)
        msg = f"must be 0 (skip the MMD) or >= 2 (got {self.mmd_samples})"
        check(self.mmd_samples == 0 or self.mmd_samples >= 2, "mmd_samples", msg)
        check(self.heatmap_bound > 0, "heatmap_bound", f"must be > 0 (got {self.heatmap_bound})")

    def check_config(self, cfg) -> None:
        binary = get_object(cfg.model._target_).state_kind == "binary"
        check(binary, "model", "needs a binary energy model (e.g. mlp_energy)")
        key = next((k for k in ("dim", "n_visible") if k in cfg.model), None)  # the model's d
        if key is not None:
            got, want = cfg.model[key], cfg.dataset.dim
            check(got == want, f"model.{key}", f"must be {want} (dataset.dim) (got {got})")
        rm_or_pcd.check_learner_sampler(cfg)

    def memory_estimate(self, cfg) -> dict[str, int]:
        d, r, n = int(cfg.dataset.dim), self.heatmap_resolution, self.mmd_samples
        width = int(cfg.model.get("hidden_dim", 1) or 1)  # activations per input row
        sizes = {"grid": r * r * d * 4, "mmd_sets": 2 * n * d * 4}
        sizes["rm_rows"] = min(self.rm_samples * d, _EVAL_CHUNK) * d * 4
        return {**sizes, **learner_batch_bytes(cfg.get("learner"), d, 4 + width // d)}

    def build(self, ctx) -> Parts:
        data, model = ctx.build("dataset"), ctx.build("model").to(ctx.device)
        (learner, sampler), g, dev = rm_or_pcd.build_learner(ctx), ctx.generator, ctx.device
        # the data stream is drawn on the CPU: the run generator if it is a CPU one
        data_gen = g if g.device.type == "cpu" else torch.Generator().manual_seed(ctx.cfg.seed + 1)
        grid = data.grid_bits(self.heatmap_resolution, self.heatmap_bound)[0].to(dev)
        if learner.needs_sampler:  # PCD: its buffer may start from the data mean
            learner.setup(model, data.sample(1000, data_gen).to(dev), g, sampler)
        else:  # ratio matching draws nothing at setup (fresh batches every step)
            learner.setup(model, torch.zeros(0, data.dim, device=dev), g)
        p = Parts(model, data, learner, data_gen, grid)
        if self.heatmap_every:
            p.snaps.append((0, log_density_grid(model, grid)))
        return p

    def step(self, p: Parts, step: int, ctx) -> dict:
        batch = p.data.sample(p.learner.batch_size, p.data_gen).to(ctx.device)
        p.last = p.learner.update(p.model, batch, ctx.generator)
        last = step == self.cadence.n_steps  # the final heat map; every heatmap_every: Fig. 4
        if last or (self.heatmap_every and step % self.heatmap_every == 0):
            with ctx.clock_paused():
                p.snaps.append((step, log_density_grid(p.model, p.grid)))
        return p.last

    def evaluate(self, p: Parts, step: int, ctx) -> dict:
        out, g, dev, last = {}, ctx.generator, ctx.device, step == self.cadence.n_steps
        due = last or (self.mmd_every > 0 and step % self.mmd_every == 0)
        if due and self.mmd_samples:
            x0 = (torch.rand(self.mmd_samples, p.data.dim, generator=g, device=dev) < 0.5).float()
            samples = gibbs_samples(p.model, x0, self.gibbs_sweeps, g)
            truth = p.data.sample(self.mmd_samples, p.data_gen).to(dev)
            out["mmd"] = float(mmd2_linear_hamming_unbiased(samples, truth))
            p.final = {"samples": samples, "truth": truth}
        if due and self.rm_samples:
            x = p.data.sample(self.rm_samples, p.data_gen).to(dev)
            with torch.no_grad():
                out["rm_objective"] = float(ratio_matching_loss(p.model, x, chunk_size=_EVAL_CHUNK))
        return out

    def load_state_dict(self, p: Parts, d: dict) -> None:
        super().load_state_dict(p, d)
        p.snaps = [(int(s), t.cpu()) for s, t in p.snaps]  # as log_density_grid gives them

    def finish(self, p: Parts, history, ctx) -> dict:
        n, seconds, c, f = self.cadence.n_steps, ctx.elapsed(), ctx.choices, p.final
        figures.write_heatmaps(ctx.run_dir / "heatmap.npz", p.snaps, self.heatmap_bound)
        evals = [r for r in history.rows if SCORES & r.keys()]
        method = figures.method_label(c.get("learner", ""), c.get("sampler", ""), p.learner)
        title = f"{p.data.name}, d={p.data.dim}, {method}"
        pairs = {k: p.data.decode(t.cpu()).numpy() for k, t in f.items()}
        args = (self.heatmap_bound, pairs, evals, title, ctx.scale, self.gibbs_sweeps)
        ctx.save_figures(figures.run_figures(p.snaps, *args), n)
        results = {k: v for k, v in evals[-1].items() if k in SCORES} if evals else {}
        if "mmd" in results and f:  # the final MMD's own sets, kept in the checkpoint
            results["mmd_se"] = mmd2_linear_hamming_unbiased_se(f["samples"], f["truth"])
        results.update(rm_or_pcd.learner_results(p.learner, p.last, seconds, n))
        return {**results, "dim": p.data.dim, "mmd_samples": self.mmd_samples}
