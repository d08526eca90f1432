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

import torch
from torch import Tensor

from ebmlab.core.loop import LoopTask, Requirement
from ebmlab.data.ego_small import GEN_INITS, bits_to_graphs, init_bits
from ebmlab.data.ego_small_dataset import EgoSmall
from ebmlab.errors import check, check_at_least
from ebmlab.learning.gibbs_generation import gibbs_samples
from ebmlab.metrics.graph_stats import generated_graph_stats, graph_mmd
from ebmlab.models.rgcn_energy import RGCNEnergy
from ebmlab.plotting import graph_generation as figures
from ebmlab.plotting.graph_generation import MMD_KEYS
from ebmlab.tasks import ratio_matching_or_pcd as rm_or_pcd
from ebmlab.utils.memory import learner_batch_bytes

GEN_SAMPLERS = ("sweep", "random_scan")
GEN_STATS = ("gen_nodes", "gen_edges", "gen_connected")


@dataclass
class Parts:
    model: RGCNEnergy
    data: EgoSmall
    learner: object  # RatioMatchingLearner | PCD
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
        "model": Requirement(
            RGCNEnergy, "a graph energy (model=rgcn)", {"max_nodes": "dataset.max_nodes"}
        ),
        "learner": rm_or_pcd.LEARNER,
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
        needs_sampler = rm_or_pcd.check_learner_sampler(cfg)
        msg = f"only applies to a PCD learner (got {self.buffer_reinit} with ratio matching)"
        check(self.buffer_reinit == 0 or needs_sampler, "task.buffer_reinit", msg)

    def memory_estimate(self, cfg) -> dict[str, int]:
        n = int(cfg.dataset.max_nodes)
        d = n * (n - 1) // 2  # one bit per node pair
        hidden = int(cfg.model.get("hidden_dim", 1) or 1) if cfg.get("model") else 1
        per_entry = 4 + (2 * n * hidden) // max(d, 1)  # dense n x n adjacencies, hidden / node
        return {
            "generated": self.n_samples * d * 4,
            **learner_batch_bytes(cfg.get("learner"), d, per_entry),
        }

    def build(self, ctx) -> Parts:
        data = ctx.build("dataset")
        data.load()
        model = ctx.build("model").to(ctx.device)
        learner, sampler = rm_or_pcd.build_learner(ctx)
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

    def evaluate(self, p: Parts, step: int, ctx) -> dict:
        if step != self.cadence.n_steps and not (
            self.generate_every and step % self.generate_every == 0
        ):
            return {}
        x0 = init_bits(self.n_samples, self.gen_init, p.x, ctx.generator)
        random_scan = self.gen_sampler == "random_scan"
        bar = ctx.progress(self.gen_sweeps, desc="Gibbs generation (sweeps)")
        p.bits = gibbs_samples(p.model, x0, self.gen_sweeps, ctx.generator, random_scan, bar.update)
        bar.close()
        graphs = bits_to_graphs(p.bits, p.data.max_nodes)
        mmd = {k: float(v) for k, v in graph_mmd(graphs, p.data.test_graphs).items()}
        return {**mmd, **generated_graph_stats(graphs)}

    def finish(self, p: Parts, history, ctx) -> dict:
        n, seconds, res = self.cadence.n_steps, ctx.elapsed(), history.rows[-1]
        graphs = bits_to_graphs(p.bits, p.data.max_nodes)
        figures.write_graphs(ctx.run_dir / "generated_graphs.txt", graphs)
        objective, sampler = ctx.cfg.learner.get("objective"), ctx.choices.get("sampler", "")
        method = ctx.choices.get("learner", "") + (f" ({objective} objective)" if objective else "")
        method += f" ({sampler})" if p.learner.needs_sampler else ""
        evals = [r for r in history.rows if "avg" in r]
        note = f"{method}, {ctx.scale}"
        ctx.save_figures(
            figures.run_figures(p.data.train_graphs, graphs, evals, self.n_show, note), n
        )
        results = {key: res[key] for key in MMD_KEYS}
        results.update({f"ref_{key}": float(p.ref[key]) for key in MMD_KEYS})
        results.update({key: res[key] for key in GEN_STATS})
        results.update(rm_or_pcd.learner_results(p.learner, p.last, seconds, n))
        return {**results, "n_samples": self.n_samples}
