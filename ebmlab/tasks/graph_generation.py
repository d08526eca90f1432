"""Graph generation on Ego-small (RMwGGIS Sec. 5.2, Table 2, App. H).

An energy over the upper-triangle bits of padded adjacencies (model=rgcn) is trained by ratio
matching (learner=rmwggis: RMwGGIS advanced, s = 50) or by PCD with a sampler (learner=pcd,
sampler=gwg: the EBM(GWG) baseline, with a buffer re-initialisation rate ``buffer_reinit``
handled here). One loop step is one learner step (a mini-batch of ``learner.batch_size``
training graphs). Every ``generate_every`` steps and at the end, ``n_samples`` graphs are generated
by Gibbs sampling on the learned energy (padding / isolated nodes dropped) and compared with
the test graphs by the degree / clustering / orbit MMD^2 of :mod:`ebmlab.metrics.graph_stats`
and their average ``avg`` (the table's "Avg."); ``ref_*`` are the same MMDs of the training
graphs. ``accept_rate`` (the last iteration's) is reported only for a learner with a sampler.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import networkx as nx
import torch
from hydra.utils import get_object
from omegaconf import OmegaConf
from torch import Tensor

from ebmlab.core.chain import ChainRunner
from ebmlab.core.loop import LoopTask, Requirement
from ebmlab.data.ego_small import GEN_INITS, bits_to_graphs, init_bits
from ebmlab.data.ego_small_dataset import EgoSmall
from ebmlab.errors import check, check_at_least
from ebmlab.learning.pcd import PCD
from ebmlab.learning.ratio_matching_learner import RatioMatchingLearner
from ebmlab.metrics.graph_stats import graph_mmd
from ebmlab.models.rgcn_energy import RGCNEnergy
from ebmlab.plotting import graph_generation as figures
from ebmlab.plotting.graph_generation import MMD_KEYS
from ebmlab.samplers.gibbs import RandomScanGibbs, SweepGibbs
from ebmlab.utils.memory import learner_batch_bytes

GEN_SAMPLERS = ("sweep", "random_scan")
LEARNERS = (RatioMatchingLearner, PCD)
MAX_NODES = {"max_nodes": "dataset.max_nodes"}


@dataclass
class Parts:
    model: RGCNEnergy
    data: EgoSmall
    learner: RatioMatchingLearner | PCD
    x: Tensor  # training bits [n, D] on the device
    ref: dict  # MMDs of the training graphs vs the test graphs
    last: dict = field(default_factory=dict)  # the last step's scalars
    bits: Tensor | None = None  # the graphs generated at the last evaluation


@dataclass
class GraphGeneration(LoopTask):
    """``task=graph_generation`` (conf/task/graph_generation.yaml documents every key)."""

    main_metric = "avg"
    progress_desc = "graph EBM training"
    requires = {
        "dataset": Requirement(EgoSmall, "a graph dataset (dataset=ego_small)"),
        "model": Requirement(RGCNEnergy, "a graph energy (model=rgcn)", MAX_NODES),
        "learner": Requirement(LEARNERS, "a ratio matching learner (rm, rmwggis, rmwrand) or pcd"),
    }
    checkpoint_keys = ("model", "learner", "last", "bits")
    periods = ("generate_every",)
    generate_every: int
    n_samples: int
    gen_sampler: Literal["sweep", "random_scan"]
    gen_sweeps: int
    gen_init: Literal["data_mean", "uniform", "zeros"]
    buffer_reinit: float
    n_show: int

    def __post_init__(self):
        check_at_least(vars(self), (("n_samples gen_sweeps n_show", 1),))
        msg = f"must be one of {GEN_SAMPLERS} (got {self.gen_sampler!r})"
        check(self.gen_sampler in GEN_SAMPLERS, "gen_sampler", msg)
        msg = f"must be one of {GEN_INITS} (got {self.gen_init!r})"
        check(self.gen_init in GEN_INITS, "gen_init", msg)
        msg = f"must be a fraction in [0, 1] (got {self.buffer_reinit})"
        check(0.0 <= self.buffer_reinit <= 1.0, "buffer_reinit", msg)

    def check_config(self, cfg) -> None:
        needs_sampler = get_object(cfg.learner._target_).needs_sampler
        msg = "a PCD learner needs a sampler (e.g. sampler=gwg)"
        check(not needs_sampler or OmegaConf.select(cfg, "sampler._target_"), "sampler", msg)
        msg = f"only applies to a PCD learner (got {self.buffer_reinit} with ratio matching)"
        check(self.buffer_reinit == 0 or needs_sampler, "task.buffer_reinit", msg)

    def memory_estimate(self, cfg) -> dict[str, int]:
        n = int(cfg.dataset.max_nodes)
        d = n * (n - 1) // 2  # one bit per node pair
        hidden = int(cfg.model.get("hidden_dim", 1) or 1) if cfg.get("model") else 1
        # the R-GCN works on dense n x n adjacencies with ``hidden`` features per node
        per_entry = 4 + (2 * n * hidden) // max(d, 1)
        return {
            "generated": self.n_samples * d * 4,
            **learner_batch_bytes(cfg.get("learner"), d, per_entry),
        }

    def build(self, ctx) -> Parts:
        data = ctx.build("dataset")
        data.load()
        model, learner = ctx.build("model").to(ctx.device), ctx.build("learner")
        sampler = ctx.build("sampler") if learner.needs_sampler else None
        x = data.train_x.to(ctx.device)
        ref = graph_mmd(data.train_graphs, data.test_graphs)
        model.init_from_data(x)
        learner.setup(model, x, ctx.generator, sampler)
        return Parts(model, data, learner, x, ref)

    def step(self, p: Parts, step: int, ctx) -> dict:
        if self.buffer_reinit > 0:  # App. H: re-initialise a fraction of the PCD buffer
            buf, g = p.learner.buffer, ctx.generator
            mask = torch.rand(buf.shape[0], generator=g, device=buf.device) < self.buffer_reinit
            fresh = init_bits(buf.shape[0], p.learner.buffer_init, p.x, g)
            p.learner.buffer = torch.where(mask[:, None], fresh, buf)
        p.last = p.learner.step(p.model, ctx.generator)
        return p.last

    def generate(self, p: Parts, ctx) -> Tensor:
        """``n_samples`` graphs by Gibbs sampling on the current energy (no parameter grads)."""
        g, sweep = ctx.generator, self.gen_sampler == "sweep"
        sampler = SweepGibbs() if sweep else RandomScanGibbs()
        steps = self.gen_sweeps if sweep else self.gen_sweeps * p.x.shape[1]
        block = 1 if sweep else p.x.shape[1]  # one sweep per block
        p.model.eval()
        x0 = init_bits(self.n_samples, self.gen_init, p.x, g)
        runner = ChainRunner(p.model, sampler, sampler.init(p.model, x0), g)
        bar = ctx.progress(steps, desc="Gibbs generation")
        while runner.steps < steps:
            bar.update(runner.run(min(block, steps - runner.steps))["steps"])
        bar.close()
        p.model.train()
        return runner.state.x

    def evaluate(self, p: Parts, step: int, ctx) -> dict:
        if step != self.cadence.n_steps and not (
            self.generate_every and step % self.generate_every == 0
        ):
            return {}
        p.bits = self.generate(p, ctx)
        graphs = bits_to_graphs(p.bits, p.data.max_nodes)
        out = {k: float(v) for k, v in graph_mmd(graphs, p.data.test_graphs).items()}
        n = len(graphs)
        out["gen_nodes"] = sum(h.number_of_nodes() for h in graphs) / n
        out["gen_edges"] = sum(h.number_of_edges() for h in graphs) / n
        out["gen_connected"] = sum(nx.is_connected(h) for h in graphs) / n
        return out

    def finish(self, p: Parts, history, ctx) -> dict:
        n, seconds, res = self.cadence.n_steps, ctx.elapsed(), history.rows[-1]
        graphs = bits_to_graphs(p.bits, p.data.max_nodes)
        figures.write_graphs(ctx.run_dir / "generated_graphs.txt", graphs)
        method = ctx.choices.get("learner", "")
        objective = ctx.cfg.learner.get("objective")
        if objective:
            method += f" ({objective} objective)"
        if p.learner.needs_sampler:
            method += f" ({ctx.choices.get('sampler', '')})"
        evals = [r for r in history.rows if "avg" in r]
        note = f"{method}, {ctx.scale}"
        figs = figures.run_figures(p.data.train_graphs, graphs, evals, self.n_show, note)
        for name, fig in figs.items():
            ctx.save_figure(fig, name, step=n)
        results = {key: res[key] for key in MMD_KEYS}
        results.update({f"ref_{key}": float(p.ref[key]) for key in MMD_KEYS})
        results.update({key: res[key] for key in ("gen_nodes", "gen_edges", "gen_connected")})
        results["final_loss"] = float(p.last["loss"])
        if p.learner.needs_sampler:
            results["accept_rate"] = float(p.last["accept_rate"])
        results.update(time_per_iter=seconds / n, seconds=seconds, n_iters=n)
        return {**results, "n_samples": self.n_samples}
