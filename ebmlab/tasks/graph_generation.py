"""Graph generation on Ego-small (RMwGGIS Sec. 5.2, Table 2, App. H).

An energy over the upper-triangle bits of padded adjacencies (model=rgcn) is trained either by
ratio matching (learner=rmwggis: RMwGGIS advanced, s = 50) or by PCD with a sampler
(learner=pcd, sampler=gwg: the EBM(GWG) baseline, buffer 200, Adam 1e-4, batch 200, with a
buffer re-initialisation rate handled here). New graphs come from Gibbs sampling on the
learned energy; padding/isolated nodes are dropped; the result is compared with the test
graphs by the degree / clustering / orbit MMD^2 of :mod:`ebmlab.metrics.graph_stats`, and
their average ``avg`` (the table's "Avg.").
"""

from __future__ import annotations

from typing import Literal

import networkx as nx
import torch
from torch import Tensor

from ebmlab.data.ego_small import adjacency_to_graphs, triu_to_adj
from ebmlab.errors import ConfigError, check
from ebmlab.metrics.graph_stats import graph_mmd
from ebmlab.samplers.gibbs import RandomScanGibbs, SweepGibbs
from ebmlab.utils.plotting import side_by_side
from ebmlab.utils.workspace import atomic_write_text

MMD_KEYS = ("degree", "clustering", "orbit", "avg")


def bits_to_graphs(x: Tensor, max_nodes: int) -> list[nx.Graph]:
    """Upper-triangle bits [n, N(N-1)/2] -> graphs without isolated (padding) nodes."""
    return adjacency_to_graphs(triu_to_adj(x.detach().float().cpu(), max_nodes))


def graph_grid(rows: list[tuple[str, list[nx.Graph]]], n_cols: int, title: str = ""):
    """One row of networkx drawings per (label, graphs) pair."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(
        len(rows), n_cols, figsize=(1.6 * n_cols, 1.7 * len(rows)), squeeze=False
    )
    for r, (label, graphs) in enumerate(rows):
        for c in range(n_cols):
            ax = axes[r, c]
            ax.set_xticks([])
            ax.set_yticks([])
            for s in ax.spines.values():
                s.set_visible(False)
            if c == 0:
                ax.set_ylabel(label, fontsize=9)
            if c < len(graphs):
                g = graphs[c]
                pos = nx.spring_layout(g, seed=0)
                nx.draw_networkx(
                    g,
                    pos=pos,
                    ax=ax,
                    node_size=18,
                    width=0.7,
                    with_labels=False,
                    node_color="tab:blue",
                    edge_color="0.3",
                )
                ax.set_title(f"{g.number_of_nodes()}n {g.number_of_edges()}e", fontsize=7)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig


def _write_graphs(path, graphs: list[nx.Graph]) -> None:
    lines = [f"# {len(graphs)} generated graphs: 'graph <nodes> <edges>' then 'u v' per edge"]
    for g in graphs:
        lines.append(f"graph {g.number_of_nodes()} {g.number_of_edges()}")
        lines.extend(f"{u} {v}" for u, v in g.edges())
    atomic_write_text(path, "\n".join(lines) + "\n")


class GraphGeneration:
    """Train an energy on Ego-small, generate graphs by Gibbs sampling, report graph MMDs."""

    main_metric = "avg"

    def __init__(
        self,
        n_iters: int = 20000,
        batch_size: int = 128,
        log_every: int = 50,
        eval_every: int = 0,
        checkpoint_every: int = 1000,
        n_samples: int = 1024,
        gen_sampler: Literal["sweep", "random_scan"] = "sweep",
        gen_sweeps: int = 20,
        gen_init: Literal["data_mean", "uniform", "zeros"] = "data_mean",
        buffer_reinit: float = 0.0,
        n_show: int = 8,
    ):
        for key, v in (
            ("n_iters", n_iters),
            ("batch_size", batch_size),
            ("log_every", log_every),
            ("checkpoint_every", checkpoint_every),
            ("n_samples", n_samples),
            ("gen_sweeps", gen_sweeps),
        ):
            check(v >= 1, key, f"must be an integer >= 1 (got {v})")
        check(
            eval_every >= 0, "eval_every", f"must be >= 0; 0 = only at the end (got {eval_every})"
        )
        check(
            gen_sampler in ("sweep", "random_scan"),
            "gen_sampler",
            f"must be sweep or random_scan (got {gen_sampler!r})",
        )
        check(
            gen_init in ("data_mean", "uniform", "zeros"),
            "gen_init",
            f"must be data_mean, uniform or zeros (got {gen_init!r})",
        )
        check(
            0.0 <= buffer_reinit <= 1.0,
            "buffer_reinit",
            f"must be a fraction in [0, 1] (got {buffer_reinit})",
        )
        check(n_show >= 1, "n_show", f"must be an integer >= 1 (got {n_show})")
        self.n_iters, self.batch_size, self.log_every = n_iters, batch_size, log_every
        self.eval_every, self.checkpoint_every = eval_every, checkpoint_every
        self.n_samples, self.gen_sampler, self.gen_sweeps = n_samples, gen_sampler, gen_sweeps
        self.gen_init, self.buffer_reinit, self.n_show = gen_init, buffer_reinit, n_show

    # ---- setup ----------------------------------------------------------------------------
    def setup(self, ctx) -> None:
        for group in ("model", "dataset", "learner"):
            if not ctx.has(group):
                raise ConfigError(group, f"task graph_generation needs a {group}")
        self.data = ctx.build("dataset")
        if not hasattr(self.data, "test_graphs"):
            raise ConfigError("dataset", "graph_generation needs a graph dataset (ego_small)")
        self.data.load()
        self.model = ctx.build("model").to(ctx.device)
        if getattr(self.model, "max_nodes", None) != self.data.max_nodes:
            raise ConfigError(
                "model.max_nodes",
                f"must equal dataset.max_nodes={self.data.max_nodes} "
                f"(got {getattr(self.model, 'max_nodes', None)}); a graph model "
                "(model=rgcn) reads it from the dataset by default",
            )
        self.learner = ctx.build("learner")
        self.ratio_matching = hasattr(self.learner, "make_optimizer")
        self.sampler = None
        if self.ratio_matching:
            s, repl = getattr(self.learner, "s", 1), getattr(self.learner, "replacement", True)
            if self.learner.objective != "rm" and not repl and s > self.data.dim:
                raise ConfigError(
                    "learner.s",
                    f"must be <= the data dimension {self.data.dim} "
                    f"when drawing without replacement (got {s})",
                )
        else:
            if not ctx.has("sampler"):
                raise ConfigError("sampler", "a PCD learner needs a sampler (e.g. sampler=gwg)")
            self.sampler = ctx.build("sampler")
        if self.buffer_reinit > 0 and self.ratio_matching:
            raise ConfigError(
                "task.buffer_reinit",
                "only applies to a PCD learner (got "
                f"{self.buffer_reinit} with a ratio matching learner)",
            )

    # ---- helpers --------------------------------------------------------------------------
    def _init_bits(self, n: int, mode: str, x: Tensor, g: torch.Generator) -> Tensor:
        d = x.shape[1]
        if mode == "zeros":
            return torch.zeros(n, d, device=x.device)
        if mode == "uniform":
            p = torch.full((n, d), 0.5, device=x.device)
        else:
            p = x.float().mean(0).clamp(0.01, 0.99).expand(n, d)
        return (torch.rand(p.shape, generator=g, device=x.device) < p).float()

    def generate(self, ctx, x: Tensor) -> Tensor:
        """``n_samples`` graphs by Gibbs sampling on the current energy (no parameter grads)."""
        g = ctx.generator
        self.model.eval()
        sampler = SweepGibbs() if self.gen_sampler == "sweep" else RandomScanGibbs()
        steps = self.gen_sweeps if self.gen_sampler == "sweep" else self.gen_sweeps * x.shape[1]
        state = sampler.init(self.model, self._init_bits(self.n_samples, self.gen_init, x, g))
        bar = ctx.progress(steps, desc="Gibbs generation")
        for _ in range(steps):
            state, _ = sampler.step(self.model, state, g)
            bar.update(1)
        bar.close()
        self.model.train()
        return state.x

    def evaluate(self, ctx, x: Tensor) -> tuple[dict, list[nx.Graph]]:
        graphs = bits_to_graphs(self.generate(ctx, x), self.data.max_nodes)
        out = graph_mmd(graphs, self.data.test_graphs)
        out["gen_nodes"] = sum(h.number_of_nodes() for h in graphs) / len(graphs)
        out["gen_edges"] = sum(h.number_of_edges() for h in graphs) / len(graphs)
        out["gen_connected"] = sum(nx.is_connected(h) for h in graphs) / len(graphs)
        return out, graphs

    def _reinit_buffer(self, x: Tensor, g: torch.Generator) -> None:
        buf = self.learner.buffer
        mask = torch.rand(buf.shape[0], generator=g, device=buf.device) < self.buffer_reinit
        fresh = self._init_bits(buf.shape[0], self.learner.buffer_init, x, g)
        self.learner.buffer = torch.where(mask[:, None], fresh, buf)

    # ---- run ------------------------------------------------------------------------------
    def run(self, ctx) -> dict:
        g, model, learner = ctx.generator, self.model, self.learner
        x = self.data.train_x.to(ctx.device)
        ref = graph_mmd(self.data.train_graphs, self.data.test_graphs)
        if hasattr(model, "init_from_data"):
            model.init_from_data(x)
        optimizer = None
        if self.ratio_matching:
            optimizer = learner.make_optimizer(model.parameters())
        else:
            learner.setup(model, self.sampler, x, g)
        ctx.start_clock()
        start, hist = 0, []
        ck = ctx.resume(model=model, learner=learner, optimizer=optimizer)
        if ck is not None:
            start, hist = ck["_run"]["step"], ck["history"]
        bar = ctx.progress(self.n_iters, initial=start, desc="graph EBM training")
        info: dict = {}
        for it in range(start, self.n_iters):
            if self.ratio_matching:
                idx = torch.randint(0, x.shape[0], (self.batch_size,), generator=g, device=x.device)
                info = learner.step(model, optimizer, x[idx], g)
            else:
                if self.buffer_reinit > 0:
                    self._reinit_buffer(x, g)
                info = learner.step(model, learner.sample_batch(x, g), g)
            step = it + 1
            if step % self.log_every == 0 or step == self.n_iters:
                ctx.log({**info, "seconds": ctx.elapsed()}, step=step)
                bar.set_postfix(loss=f"{info['loss']:.4g}")
            if self.eval_every and step % self.eval_every == 0 and step < self.n_iters:
                res, _ = self.evaluate(ctx, x)
                hist.append(
                    {"step": step, "seconds": ctx.elapsed(), **{k: res[k] for k in MMD_KEYS}}
                )
                ctx.log({f"mmd_{k}": res[k] for k in MMD_KEYS}, step=step)
            if step % self.checkpoint_every == 0 and step < self.n_iters:
                state = {
                    "model": model.state_dict(),
                    "learner": learner.state_dict(),
                    "history": hist,
                }
                if optimizer is not None:
                    state["optimizer"] = optimizer.state_dict()
                ctx.save_checkpoint(state, step=step)
            bar.update(1)
            ctx.maybe_fault(step)
        bar.close()
        train_seconds = ctx.elapsed()
        res, graphs = self.evaluate(ctx, x)
        seconds = ctx.elapsed()
        hist.append({"step": self.n_iters, "seconds": seconds, **{k: res[k] for k in MMD_KEYS}})
        ctx.log({f"mmd_{k}": res[k] for k in MMD_KEYS}, step=self.n_iters)
        _write_graphs(ctx.run_dir / "generated_graphs.txt", graphs)
        method = f"{ctx.choices.get('learner', '')}"
        if not self.ratio_matching:
            method += f" ({ctx.choices.get('sampler', '')})"
        k = self.n_show
        fig = graph_grid(
            [("training", self.data.train_graphs[:k]), ("generated", graphs[:k])],
            n_cols=k,
            title=f"Ego-small: training vs generated, {method}, {ctx.scale} scale "
            f"(avg MMD {res['avg']:.4f})",
        )
        ctx.save_figure(fig, "graphs", step=self.n_iters)
        if len(hist) > 1:
            fig = side_by_side(
                [
                    (
                        "MMD vs iterations",
                        {k2: ([h["step"] for h in hist], [h[k2] for h in hist]) for k2 in MMD_KEYS},
                        "iteration",
                        "MMD^2",
                    )
                ],
                title=f"Ego-small MMD ({method}, {ctx.scale})",
            )
            ctx.save_figure(fig, "mmd", step=self.n_iters)
        return {
            **{k2: float(res[k2]) for k2 in MMD_KEYS},
            **{f"ref_{k2}": float(ref[k2]) for k2 in MMD_KEYS},
            "gen_nodes": float(res["gen_nodes"]),
            "gen_edges": float(res["gen_edges"]),
            "gen_connected": float(res["gen_connected"]),
            "final_loss": float(info.get("loss", float("nan"))),
            "accept_rate": float(info.get("accept_rate", float("nan"))),
            "train_seconds": train_seconds,
            "time_per_iter": train_seconds / self.n_iters,  # incl. any intermediate evals
            "seconds": seconds,
            "n_iters": self.n_iters,
            "n_samples": self.n_samples,
        }
