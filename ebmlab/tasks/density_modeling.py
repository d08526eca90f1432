"""Synthetic density modelling on Gray-coded 2-D toy data (RMwGGIS Sec. 5.1; Table 1, 4;
Fig. 1, 2, 4).

An energy (model=mlp_energy) learns a toy density encoded as d bits (dataset=synthetic_2d)
by ratio matching (learner=rm | rmwggis | rmwrand) or by PCD with a sampler (learner=pcd).
One loop step is one learner ``update`` on ``learner.batch_size`` FRESH data points (the
data are a stream). Training scalars are logged every ``run.eval_every`` steps; every
``mmd_every`` steps and at the end: ``mmd`` (Table 1), the unbiased MMD^2 (linear kernel
d - Hamming) between ``mmd_samples`` model samples (``gibbs_sweeps`` Gibbs sweeps from
uniform bits) and as many fresh true samples; ``rm_objective`` (Table 4), the full Eq. (3)
on ``rm_samples`` fresh points. Either is left out of the results when its size is 0 (the
final ``mmd`` comes with ``mmd_se``, its standard error over the two sample sets), and
``accept_rate`` (the last iteration's) unless the learner has a sampler. Heat maps of
exp(-E) over [-b, b]^2 (Fig. 1; every ``heatmap_every`` steps for Fig. 4) go to figures
and ``heatmap.npz`` (for the cross-run grids of ``python -m ebmlab.report``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from hydra.utils import get_object
from omegaconf import OmegaConf
from torch import Tensor

from ebmlab.core.chain import ChainRunner
from ebmlab.core.loop import LoopTask, Requirement
from ebmlab.data.synthetic_2d import Synthetic2D
from ebmlab.errors import check, check_at_least
from ebmlab.learning.pcd import PCD
from ebmlab.learning.ratio_matching import ratio_matching_loss
from ebmlab.learning.ratio_matching_learner import RatioMatchingLearner
from ebmlab.metrics.density_2d import log_density_grid
from ebmlab.metrics.mmd import mmd2_linear_hamming_unbiased, mmd2_linear_hamming_unbiased_se
from ebmlab.models.base import EnergyModel
from ebmlab.plotting import density_modeling as figures
from ebmlab.samplers.gibbs import SweepGibbs
from ebmlab.utils.memory import learner_batch_bytes

_EVAL_CHUNK = 16384  # rows per forward over all n*d neighbours / the grid (memory only)
SCORES = {"mmd", "rm_objective"}
LEARNERS = (RatioMatchingLearner, PCD)


def gibbs_samples(model, x0: Tensor, sweeps: int, generator: torch.Generator) -> Tensor:
    """``sweeps`` systematic Gibbs sweeps from ``x0`` (the model in eval mode meanwhile)."""
    sampler, was_training = SweepGibbs(), model.training
    model.eval()
    runner = ChainRunner(model, sampler, sampler.init(model, x0), generator)
    runner.run(sweeps)
    model.train(was_training)
    return runner.state.x


@dataclass
class Parts:
    model: EnergyModel
    data: Synthetic2D
    learner: RatioMatchingLearner | PCD
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
        "learner": Requirement(LEARNERS, "a ratio matching learner (rm, rmwggis, rmwrand) or pcd"),
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
        needs_sampler = get_object(cfg.learner._target_).needs_sampler
        msg = "a PCD learner needs a sampler (e.g. sampler=gwg)"
        check(not needs_sampler or OmegaConf.select(cfg, "sampler._target_"), "sampler", msg)

    def memory_estimate(self, cfg) -> dict[str, int]:
        d, r, n = int(cfg.dataset.dim), self.heatmap_resolution, self.mmd_samples
        rm_rows = min(self.rm_samples * d, _EVAL_CHUNK)
        width = int(cfg.model.get("hidden_dim", 1) or 1)  # activations per input row
        return {
            "grid": r * r * d * 4,
            "mmd_sets": 2 * n * d * 4,
            "rm_rows": rm_rows * d * 4,
            **learner_batch_bytes(cfg.get("learner"), d, 4 + width // d),
        }

    def build(self, ctx) -> Parts:
        data, model = ctx.build("dataset"), ctx.build("model").to(ctx.device)
        learner = ctx.build("learner")
        sampler = ctx.build("sampler") if learner.needs_sampler else None
        g, dev = ctx.generator, ctx.device
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
        if self.heatmap_every and step % self.heatmap_every == 0 and step < self.cadence.n_steps:
            with ctx.clock_paused():  # a Fig. 4 snapshot (the last one comes with evaluate)
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
        if last:
            p.snaps.append((step, log_density_grid(p.model, p.grid)))
        return out

    def load_state_dict(self, p: Parts, d: dict) -> None:
        super().load_state_dict(p, d)
        p.snaps = [(int(s), t.cpu()) for s, t in p.snaps]  # as log_density_grid gives them

    def _method(self, p: Parts, ctx) -> str:
        name, lr = ctx.choices.get("learner", ""), p.learner
        if lr.needs_sampler:  # PCD: named by its sampler
            return f"{name} ({ctx.choices.get('sampler', '')})"
        if lr.objective != "eq3":
            name = f"{name} ({lr.objective})"
        return name if lr.estimator == "full" else f"{name} {lr.variant}, s={lr.s}"

    def finish(self, p: Parts, history, ctx) -> dict:
        n, seconds = self.cadence.n_steps, ctx.elapsed()
        figures.write_heatmaps(ctx.run_dir / "heatmap.npz", p.snaps, self.heatmap_bound)
        evals = [r for r in history.rows if SCORES & r.keys()]
        title = f"{p.data.name}, d={p.data.dim}, {self._method(p, ctx)}"
        pairs = {k: p.data.decode(t.cpu()).numpy() for k, t in p.final.items()}
        figs = figures.run_figures(
            p.snaps, self.heatmap_bound, pairs, evals, title, ctx.scale, self.gibbs_sweeps
        )
        for name, fig in figs.items():
            ctx.save_figure(fig, name, step=n)
        results = {k: v for k, v in evals[-1].items() if k in SCORES} if evals else {}
        if "mmd" in results and p.final:  # the final MMD's own sets, kept in the checkpoint
            samples, truth = p.final["samples"], p.final["truth"]
            results["mmd_se"] = mmd2_linear_hamming_unbiased_se(samples, truth)
        results["final_loss"] = float(p.last["loss"])
        if p.learner.needs_sampler:
            results["accept_rate"] = float(p.last["accept_rate"])
        results.update(time_per_iter=seconds / n, seconds=seconds, n_iters=n, dim=p.data.dim)
        return {**results, "mmd_samples": self.mmd_samples}
