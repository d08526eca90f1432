"""RBM sampling figure of one run (DLP Fig. 4; ACS Fig. 4, 6, 9): log-MMD against steps and
seconds; the cross-run figure is ebmlab/report/figures/rbm_sampling.py."""

from __future__ import annotations

import numpy as np

from ebmlab.plotting.sampling_runs import chain_images


def comparison_figure(series: dict, log_floor: float | None, title: str = "", axes=None):
    """log-MMD against steps and seconds; series[label] = (steps, seconds, log_mmd)."""
    import matplotlib.pyplot as plt

    fig = None
    if axes is None:
        fig, axes = plt.subplots(1, 2, figsize=(10.4, 3.8))
    for label, (steps, secs, lm) in series.items():
        axes[0].plot(np.asarray(steps), np.asarray(lm), label=label)
        axes[1].plot(np.asarray(secs), np.asarray(lm), label=label)
    for ax, xl in zip(axes, ("step", "seconds")):
        if log_floor is not None:
            ax.axhline(log_floor, color="k", ls="--", lw=1, label="ground truth floor")
        ax.set_xlabel(xl)
        ax.set_ylabel("log MMD$^2$")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    axes[0].set_title(f"{title}: vs steps" if title else "vs steps", fontsize=9)
    axes[1].set_title("vs wall-clock seconds", fontsize=9)
    if fig is not None:
        fig.tight_layout()
    return fig


def run_figures(name: str, curve, log_floor: float, title: str, states: dict, init: str, show):
    """(name, figure) of one run of sampler ``name``: ``log_mmd`` (:func:`comparison_figure`
    of ``curve`` = (steps, seconds, log MMD)) and, with ``show`` = (n_show, image shape) and
    n_show > 0, image grids of the first n_show rows of ``states`` (``samples``,
    ``ground_truth``, ``init``: the initial states, drawn as ``init`` says)."""
    yield "log_mmd", comparison_figure({name: curve}, log_floor, title)
    n_show, shape = show
    titles = {
        "samples": f"{name}: final chains",
        "ground_truth": "block Gibbs ground truth",
        "init": f"initial states ({init})",
    }
    for key, x in states.items() if n_show else ():
        yield key, chain_images(x, n_show, shape, titles[key])
