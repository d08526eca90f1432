"""One graph-generation run's outputs (RMwGGIS Table 2): drawings of training vs generated
Ego-small graphs, the MMD curve over training, and the generated graphs as a text file."""

from __future__ import annotations

from pathlib import Path

import networkx as nx

from ebmlab.utils.workspace import atomic_write_text

MMD_KEYS = ("degree", "clustering", "orbit", "avg")


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


def write_graphs(path: Path, graphs: list[nx.Graph]) -> None:
    """Plain-text graph list: 'graph <nodes> <edges>' then one 'u v' line per edge."""
    lines = [f"# {len(graphs)} generated graphs: 'graph <nodes> <edges>' then 'u v' per edge"]
    for g in graphs:
        lines.append(f"graph {g.number_of_nodes()} {g.number_of_edges()}")
        lines.extend(f"{u} {v}" for u, v in g.edges())
    atomic_write_text(path, "\n".join(lines) + "\n")


def run_figures(
    train: list[nx.Graph], generated: list[nx.Graph], evals: list[dict], n_show: int, note: str
) -> dict:
    """One run's figures by name: ``graphs`` (``n_show`` training vs generated graphs) and,
    when ``evals`` (history rows with the MMDs) has several rows, ``mmd`` against iterations."""
    from ebmlab.utils.plotting import side_by_side

    k, avg = n_show, evals[-1]["avg"]
    rows = [("training", train[:k]), ("generated", generated[:k])]
    title = f"Ego-small: training vs generated, {note} scale (avg MMD {avg:.4f})"
    figs = {"graphs": graph_grid(rows, n_cols=k, title=title)}
    if len(evals) > 1:
        steps = [r["step"] for r in evals]
        curves = {key: (steps, [r[key] for r in evals]) for key in MMD_KEYS}
        panel = ("MMD vs iterations", curves, "iteration", "MMD^2")
        figs["mmd"] = side_by_side([panel], f"Ego-small MMD ({note})")
    return figs
