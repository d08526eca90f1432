"""The ACS 2-D multimodal toy (Pynadath et al., ICML 2024, Sec. 4.1, Fig. 1, App. D.1).

One run = one sampler on :class:`ebmlab.models.multimodal_grid.MultimodalGrid` (25 modes on
an ordinal grid). All ``n_chains`` chains start from one shared uniformly random grid point
(as the reference code does; ``init=random`` gives each chain its own) and every visited
state after ``burn_in`` is counted in a 2-D histogram. Reported:

* ``modes_visited``: modes with at least one sample within ``mode_radius`` of their centre;
* ``mode_tv``: total variation between the samples' and the target's mass per mode cell
  (each grid point belongs to its nearest mode), 0 = every mode weighted right, close to 1
  = stuck in one mode;
* ``tv``: total variation between the visit histogram and the exact grid distribution;
* acceptance rate and mean L1 jump.

Each run saves ``visits.pt`` (histogram) and ``ground_truth.pt`` (exact probabilities) and a
heat map; ``python -m ebmlab.tasks.multimodal_2d figure SWEEP_DIR... --out FIG.png`` puts the
ground truth and every sampler side by side (ACS Fig. 1). A sampler with an enabled ``tune``
(ACS with tune: true) is tuned first; the paper's toy uses fixed schedules (tune: false).
"""

from __future__ import annotations

import torch

from ebmlab.errors import ConfigError, check
from ebmlab.samplers.base import ChainState

INITS = ("shared_random", "random")
SAMPLER_ORDER = ("rwm", "gibbs", "dmala", "ab_1st", "acs")


def mode_masses(model, prob: torch.Tensor) -> torch.Tensor:
    """Mass of each mode's cell (grid points nearest to it) under ``prob`` [S, S] -> [L]."""
    S = prob.shape[0]
    v = torch.arange(S, dtype=model.modes.dtype, device=model.modes.device)
    idx, _ = model.nearest_mode(torch.cartesian_prod(v, v))
    flat = prob.reshape(-1).to(torch.float64)
    return torch.zeros(model.n_modes, dtype=torch.float64, device=flat.device).index_add_(
        0, idx.to(flat.device), flat
    )


def heatmap(prob, title: str = "", ax=None):
    """Heat map of a 2-D distribution (rows x[0], columns x[1]), like ACS Fig. 1."""
    import matplotlib.pyplot as plt

    fig = None
    if ax is None:
        fig, ax = plt.subplots(figsize=(3.2, 3.2))
    ax.imshow(prob.cpu().numpy(), cmap="Blues", origin="lower", interpolation="nearest")
    ax.set_xticks([])
    ax.set_yticks([])
    if title:
        ax.set_title(title, fontsize=9)
    return fig


class Multimodal2D:
    """Task ``multimodal_2d``: visit histogram of one sampler on the ACS toy (ACS Fig. 1).

    n_chains / n_steps: the reference code's 128 chains, 10,000 steps (1,000 for RW and AB).
    burn_in: initial steps not counted. mode_radius: distance from a mode's centre within
    which a sample counts as visiting it.
    """

    main_metric = "mode_tv"

    def __init__(
        self,
        n_chains: int = 128,
        n_steps: int = 10000,
        burn_in: int = 0,
        init: str = "shared_random",
        mode_radius: float = 10.0,
        log_every: int = 100,
        checkpoint_every: int = 2000,
    ):
        check(n_chains >= 1, "n_chains", f"must be >= 1 (got {n_chains})")
        check(n_steps >= 1, "n_steps", f"must be >= 1 (got {n_steps})")
        check(0 <= burn_in < n_steps, "burn_in", f"must be in [0, n_steps) (got {burn_in})")
        check(init in INITS, "init", f"must be one of {list(INITS)} (got {init!r})")
        check(mode_radius > 0, "mode_radius", f"must be > 0 (got {mode_radius})")
        check(log_every >= 1, "log_every", f"must be >= 1 (got {log_every})")
        check(checkpoint_every >= 1, "checkpoint_every", f"must be >= 1 (got {checkpoint_every})")
        self.n_chains, self.n_steps, self.burn_in = n_chains, n_steps, burn_in
        self.init, self.mode_radius = init, float(mode_radius)
        self.log_every, self.checkpoint_every = log_every, checkpoint_every

    def setup(self, ctx) -> None:
        if not ctx.has("model") or not ctx.has("sampler"):
            raise ConfigError("model", "multimodal_2d needs a model and a sampler")
        self.model = ctx.build("model").to(ctx.device)
        if not hasattr(self.model, "modes") or getattr(self.model, "dim", None) != 2:
            raise ConfigError(
                "model", "multimodal_2d needs the 2-D toy target (model=multimodal_2d)"
            )
        self.sampler = ctx.build("sampler")
        if getattr(self.sampler, "tune_enabled", False) and hasattr(
            self.sampler, "resolve_tune_budget"
        ):
            self.sampler.resolve_tune_budget(self.n_steps)

    def run(self, ctx) -> dict:
        model, sampler, g, dev = self.model, self.sampler, ctx.generator, ctx.device
        n, T, S = self.n_chains, self.n_steps, model.n_states
        if self.init == "shared_random":
            x0 = torch.randint(0, S, (1, 2), generator=g, device=dev).float().repeat(n, 1)
        else:
            x0 = torch.randint(0, S, (n, 2), generator=g, device=dev).float()
        visits = torch.zeros(S * S, dtype=torch.float64, device=dev)
        ones = torch.ones(n, dtype=torch.float64, device=dev)
        tot = {"accept": 0.0, "jump": 0.0, "tune_steps": 0}
        start = 0
        ctx.start_clock()
        ck = ctx.load_checkpoint()
        if ck is not None:
            state = ChainState(x=ck["x"], log_prob=ck["log_prob"], grad=ck["grad"])
            sampler.load_state_dict(ck["sampler"])
            start, visits, tot = ck["_run"]["step"], ck["visits"], ck["totals"]
        else:
            state = sampler.init(model, x0)
            if getattr(sampler, "tune_enabled", False) and hasattr(sampler, "tune"):
                state, res = sampler.tune(model, state, g, T)
                tot["tune_steps"] = int(res.n_steps)
        bar = ctx.progress(T, initial=start, desc=f"2-D toy {ctx.choices.get('sampler', '')}")
        for t in range(start, T):
            state, info = sampler.step(model, state, g)
            acc = float(info.accept_prob.float().mean())
            jump = float(info.jump.float().mean())
            tot["accept"] += acc
            tot["jump"] += jump
            if t >= self.burn_in:
                xi = state.x.long()
                visits.index_add_(0, xi[:, 0] * S + xi[:, 1], ones)
            step = t + 1
            if step % self.log_every == 0 or step == T:
                ctx.log({"accept_rate": acc, "jump": jump, "seconds": ctx.elapsed()}, step=step)
            if step % self.checkpoint_every == 0 and step < T:
                ctx.save_checkpoint(
                    {
                        "x": state.x,
                        "log_prob": state.log_prob,
                        "grad": state.grad,
                        "sampler": sampler.state_dict(),
                        "visits": visits,
                        "totals": tot,
                    },
                    step=step,
                )
            bar.update(1)
            ctx.maybe_fault(step)
        bar.close()
        exact = model.grid_log_probs().exp().to(dev)  # [S, S]
        emp = (visits / visits.sum()).reshape(S, S)
        v = torch.arange(S, dtype=model.modes.dtype, device=dev)
        pts = torch.cartesian_prod(v, v)
        idx, dist = model.nearest_mode(pts)
        hit = (visits > 0) & (dist.to(dev) <= self.mode_radius)
        visited = torch.zeros(model.n_modes, dtype=torch.bool, device=dev)
        visited[idx[hit]] = True
        tv_modes = 0.5 * float((mode_masses(model, emp) - mode_masses(model, exact)).abs().sum())
        torch.save(emp.float().cpu(), ctx.run_dir / "visits.pt")
        torch.save(exact.float().cpu(), ctx.run_dir / "ground_truth.pt")
        name = ctx.choices.get("sampler", "sampler")
        ctx.save_figure(heatmap(emp, f"{name} ({ctx.scale})"), "visits", step=T)
        ctx.save_figure(heatmap(exact, "ground truth"), "ground_truth", step=T)
        return {
            "mode_tv": tv_modes,
            "modes_visited": float(visited.sum()),
            "n_modes": float(model.n_modes),
            "tv": 0.5 * float((emp - exact).abs().sum()),
            "accept_rate": tot["accept"] / T,
            "jump": tot["jump"] / T,
            "tune_steps": float(tot["tune_steps"]),
            "seconds": ctx.elapsed(),
        }


def _label(run: dict) -> str:
    return str(run["choices"].get("sampler", run["overrides"].get("sampler", "?")))


def figure(run_dirs: list, title: str = ""):
    """Ground truth + one heat map per run (ACS Fig. 1), samplers in the paper's order."""
    import matplotlib.pyplot as plt

    def order(r):
        lab = _label(r)
        return (SAMPLER_ORDER.index(lab) if lab in SAMPLER_ORDER else len(SAMPLER_ORDER), lab)

    runs = sorted(run_dirs, key=order)
    if not runs:
        raise SystemExit("no multimodal_2d runs (visits.pt) found")
    gt = torch.load(runs[0]["run_dir"] / "ground_truth.pt", weights_only=True)
    k = len(runs) + 1
    fig, axes = plt.subplots(1, k, figsize=(2.6 * k, 2.9), squeeze=False)
    heatmap(gt, "ground truth", axes[0, 0])
    for ax, r in zip(axes[0, 1:], runs):
        emp = torch.load(r["run_dir"] / "visits.pt", weights_only=True)
        m = r["metrics"]
        sub = (
            f"{_label(r)}\nmodes {m['modes_visited']:.0f}/{m['n_modes']:.0f}, TV {m['mode_tv']:.2f}"
        )
        heatmap(emp, sub, ax)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig


def main(argv=None) -> None:
    import argparse
    from pathlib import Path

    import matplotlib.pyplot as plt

    from ebmlab.report import collect

    ap = argparse.ArgumentParser(description="multimodal_2d figures")
    sub = ap.add_subparsers(dest="cmd", required=True)
    fp = sub.add_parser("figure", help="ground truth + every sampler's visits (ACS Fig. 1)")
    fp.add_argument("sweep_dir", type=Path, nargs="+")
    fp.add_argument("--title", default="")
    fp.add_argument("--out", type=Path, required=True)
    a = ap.parse_args(argv)
    runs = [r for d in a.sweep_dir for r in collect(d) if (r["run_dir"] / "visits.pt").is_file()]
    fig = figure(runs, a.title)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(a.out, dpi=120, bbox_inches="tight")
    plt.close(fig)
    print(f"written: {a.out}")


if __name__ == "__main__":
    main()
