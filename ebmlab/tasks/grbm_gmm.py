"""GRBM density modelling of the 2-D Gaussian-mixture toy (Liao et al. 2022, Sec. 4.1, App. B.1,
Fig. 1).

A GRBM (``model=grbm``, 256 hidden units) is trained by modified CD on 1,000 points of the
isotropic (``dataset=gmm_iso``) or anisotropic (``dataset=gmm_aniso``) 3-component mixture,
batch 100, for ``n_epochs`` epochs (paper: 50,000), with one of the five sampler settings of
Fig. 1 (Gibbs; Langevin / Gibbs-Langevin with and without the Metropolis adjustment; adjust at
every step when on). Then ``n_samples`` chains run ``sample_steps`` (100) steps from N(0, I).

Measured (the paper's Fig. 1 is qualitative; these quantify it):

- ``kl``: KL(p_true || p_model) on a grid over [-plot_range, plot_range]^2, with the model's
  log Z by quadrature on a grid twice as wide (main metric);
- ``test_nll``: mean -log p_model of 1,000 fresh points of the true mixture;
- samples (:func:`mode_stats`): ``sample_in_mode`` (fraction within 3 standard deviations of
  a component mean), ``sample_modes_covered`` (components holding >= 5% of the samples),
  ``sample_mode_tv`` (total variation between the in-mode samples' component frequencies and
  the true weights; collapse onto one mode gives about 0.66), ``sample_true_ll`` (mean true log
  density of the samples).

Figure ``figures/gmm.png``: true density, model negative energy -F(v), true points, samples.
``python -m ebmlab.tasks.grbm_gmm figure SWEEP_DIR ... --out PNG`` assembles Fig. 1 (rows:
iso density, iso samples, aniso density, aniso samples; columns: ground truth and the five
settings) from the runs' ``gmm_arrays.pt``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch
from torch import Tensor

from ebmlab.data.gmm_toy import KINDS, GMMToyDataset, gmm_params
from ebmlab.errors import ConfigError, check
from ebmlab.learning.grbm_cd import sample_from_noise

# Fig. 1 column order; a run's label picks its column (labels set by mk/grbm.mk).
SETTINGS = (
    ("gibbs", "Gibbs"),
    ("langevin_wo_adjust", "Langevin wo. adjust"),
    ("langevin_w_adjust", "Langevin w. adjust"),
    ("gibbs_langevin_wo_adjust", "Gibbs-Langevin wo. adjust"),
    ("gibbs_langevin_w_adjust", "Gibbs-Langevin w. adjust"),
)


def mode_stats(samples: Tensor, kind: str, radius: float = 3.0) -> dict[str, float]:
    """Mode coverage of 2-D samples. A sample is "in" component k when k has the nearest mean and
    the sample lies within ``radius`` standard deviations of it (per-axis Mahalanobis).
    Returns in_mode (fraction of samples in some component), modes_covered (components holding
    >= 5% of all samples) and mode_tv (total variation between the in-mode samples' component
    frequencies and the true weights; 1 when no sample is in a mode)."""
    w, m, sd = gmm_params(kind)
    s = samples.detach().cpu().float()
    k = torch.cdist(s, m).argmin(1)
    inside = (((s - m[k]) / sd[k]) ** 2).sum(1) <= radius**2
    counts = torch.bincount(k[inside], minlength=m.shape[0]).float()
    n_in = float(counts.sum())
    tv = 0.5 * float((counts / n_in - w).abs().sum()) if n_in > 0 else 1.0
    return {
        "in_mode": n_in / max(s.shape[0], 1),
        "modes_covered": int((counts / max(s.shape[0], 1) >= 0.05).sum()),
        "mode_tv": tv,
    }


class GRBMGmm:
    """Config schema of ``task=grbm_gmm``.

    Args:
        n_epochs: passes over the points (paper 50,000).
        batch_size: mini-batch (100; the last partial batch is dropped).
        sample_steps: sampler steps for the displayed samples (null = the learner's cd_steps).
        n_samples: number of sampling chains / displayed samples.
        eval_every: epochs between evaluations (KL, NLL, mean variance).
        checkpoint_every: epochs between checkpoints.
        plot_range, grid_points: the density grid [-r, r]^2 with grid_points^2 points.
        label: row / column label (gibbs, langevin_wo_adjust, ...; see SETTINGS).
    """

    main_metric = "kl"

    def __init__(
        self,
        n_epochs: int = 50000,
        batch_size: int = 100,
        sample_steps: int | None = None,
        n_samples: int = 1000,
        eval_every: int = 1000,
        checkpoint_every: int = 1000,
        plot_range: float = 10.0,
        grid_points: int = 201,
        label: str = "",
    ):
        for k, v in (
            ("n_epochs", n_epochs),
            ("batch_size", batch_size),
            ("eval_every", eval_every),
            ("checkpoint_every", checkpoint_every),
        ):
            check(isinstance(v, int) and v >= 1, k, f"an integer >= 1 (got {v!r})")
        check(
            sample_steps is None or (isinstance(sample_steps, int) and sample_steps >= 1),
            "sample_steps",
            f"null or an integer >= 1 (got {sample_steps!r})",
        )
        check(isinstance(n_samples, int) and n_samples >= 2, "n_samples", f">= 2 (got {n_samples})")
        check(plot_range > 0, "plot_range", f"> 0 (got {plot_range})")
        check(grid_points >= 11, "grid_points", f">= 11 (got {grid_points})")
        self.n_epochs, self.batch_size = n_epochs, batch_size
        self.sample_steps, self.n_samples = sample_steps, n_samples
        self.eval_every, self.checkpoint_every = eval_every, checkpoint_every
        self.plot_range, self.grid_points = float(plot_range), grid_points
        self.label = label

    def setup(self, ctx) -> None:
        for group in ("model", "dataset", "sampler", "learner"):
            if not ctx.has(group):
                raise ConfigError(group, f"task grbm_gmm needs a {group}")
        self.data = ctx.build("dataset")
        if not isinstance(self.data, GMMToyDataset):
            raise ConfigError("dataset", "grbm_gmm needs dataset=gmm_iso or dataset=gmm_aniso")
        self.model = ctx.build("model")
        if not hasattr(self.model, "mean_v_given_h") or self.model.n_visible != 2:
            raise ConfigError(
                "model", "grbm_gmm needs model=grbm with n_visible 2 (${dataset.dim})"
            )
        self.sampler = ctx.build("sampler")
        self.learner = ctx.build("learner")
        if not hasattr(self.learner, "negative_samples"):
            raise ConfigError("learner", "grbm_gmm needs learner=grbm_cd")
        check(
            self.batch_size <= self.data.n_points,
            "task.batch_size",
            f"{self.batch_size} exceeds dataset.n_points={self.data.n_points}",
        )

    # ------------------------------------------------------------------ metrics
    def _grid(self, device) -> tuple[Tensor, float]:
        r, n = self.plot_range, self.grid_points
        x = torch.linspace(-r, r, n, device=device)
        gx, gy = torch.meshgrid(x, x, indexing="xy")
        return torch.stack([gx.reshape(-1), gy.reshape(-1)], 1), (2 * r / (n - 1)) ** 2

    @torch.no_grad()
    def evaluate(self, device) -> dict[str, float]:
        model = self.model
        r = self.plot_range
        log_z = float(model.log_partition_grid(-2 * r, 2 * r, 2 * self.grid_points - 1))
        pts, area = self._grid(device)
        lp_true = self.data.log_prob(pts.double().cpu())
        lp_model = model.log_prob(pts).double().cpu() - log_z
        p = lp_true.exp()
        kl = float((p * (lp_true - lp_model)).sum() * area)
        test = self.data.fresh(1000, self.data.seed + 1).to(device)
        nll = float(-(model.log_prob(test).double() - log_z).mean())
        return {"kl": kl, "test_nll": nll, "log_z": log_z, "mean_var": float(model.var.mean())}

    # ---------------------------------------------------------------------- run
    def run(self, ctx) -> dict:
        model, sampler, learner = self.model, self.sampler, self.learner
        x = self.data.points().to(ctx.device)
        model.reset_parameters(torch.Generator().manual_seed(int(ctx.cfg.seed)))
        model.to(ctx.device)
        ctx.start_clock()
        start, history = 0, []
        state = ctx.resume(model=model, learner=learner)
        if state is not None:
            start = int(state["_run"]["step"])
            history = list(state.get("history", []))
        bar = ctx.progress(self.n_epochs, initial=start, desc=f"GRBM GMM {self.data.kind}")
        stats: dict[str, float] = {}
        for epoch in range(start, self.n_epochs):
            progress = epoch / self.n_epochs
            stats = learner.train_epoch(model, x, self.batch_size, sampler, ctx.generator, progress)
            step = epoch + 1
            if step % self.eval_every == 0 or step == self.n_epochs:
                ev = self.evaluate(ctx.device)
                stats.update(ev, seconds=ctx.elapsed())
                ctx.log(stats, step=step)
                history.append({"epoch": step, "kl": ev["kl"], "test_nll": ev["test_nll"]})
                bar.set_postfix(kl=f"{ev['kl']:.3f}")
            if step % self.checkpoint_every == 0 or step == self.n_epochs:
                ctx.save_checkpoint(
                    {
                        "model": model.state_dict(),
                        "learner": learner.state_dict(),
                        "history": history,
                    },
                    step=step,
                )
            bar.update(1)
            ctx.maybe_fault(step)
        bar.close()
        seconds = ctx.elapsed()
        steps = self.sample_steps or learner.cd_steps
        v, _ = sample_from_noise(model, sampler, self.n_samples, steps, ctx.generator)
        v = v.detach()
        finite = torch.isfinite(v).all(1)
        ms = mode_stats(v[finite], self.data.kind)
        ev = self.evaluate(ctx.device)
        results = {
            **ev,
            "sample_in_mode": ms["in_mode"] * float(finite.float().mean()),
            "sample_modes_covered": ms["modes_covered"],
            "sample_mode_tv": ms["mode_tv"],
            "sample_true_ll": float(self.data.log_prob(v[finite].double().cpu()).mean()),
            "sample_finite_fraction": float(finite.float().mean()),
            "accept_rate": stats.get("accept_rate", float("nan")),
            "seconds": seconds,
            "n_epochs": self.n_epochs,
            "sample_steps": steps,
        }
        self._save_arrays(ctx, x, v)
        self._figure(ctx, x, v, history)
        return results

    # ------------------------------------------------------------------ figures
    @torch.no_grad()
    def _save_arrays(self, ctx, x: Tensor, v: Tensor) -> None:
        from ebmlab.utils.workspace import atomic_torch_save

        pts, _ = self._grid(ctx.device)
        n = self.grid_points
        arrays = {
            "kind": self.data.kind,
            "label": self.label or str(ctx.choices.get("sampler", "")),
            "plot_range": self.plot_range,
            "true_density": self.data.log_prob(pts.double().cpu()).exp().reshape(n, n).float(),
            "neg_energy": self.model.log_prob(pts).cpu().reshape(n, n).float(),
            "data": x.cpu().float(),
            "samples": v.cpu().float(),
        }
        atomic_torch_save(arrays, ctx.run_dir / "gmm_arrays.pt")

    def _figure(self, ctx, x: Tensor, v: Tensor, history: list[dict]) -> None:
        import matplotlib.pyplot as plt

        arrays = torch.load(ctx.run_dir / "gmm_arrays.pt", weights_only=True)
        fig, axes = plt.subplots(1, 5, figsize=(17, 3.6))
        _panel_density(axes[0], arrays["true_density"], arrays["plot_range"], "true density")
        _panel_density(axes[1], arrays["neg_energy"], arrays["plot_range"], "GRBM -F(v)")
        _panel_samples(axes[2], arrays["data"], arrays["plot_range"], "data")
        _panel_samples(axes[3], arrays["samples"], arrays["plot_range"], "GRBM samples")
        if history:
            axes[4].plot([r["epoch"] for r in history], [r["kl"] for r in history])
            axes[4].set_xlabel("epoch")
            axes[4].set_ylabel("KL(true || model)")
            axes[4].grid(alpha=0.3)
        fig.suptitle(f"GRBM on the {self.data.kind} GMM ({arrays['label']}, {ctx.scale} scale)")
        fig.tight_layout()
        ctx.save_figure(fig, "gmm", step=self.n_epochs)


def _panel_density(ax, z: Tensor, r: float, title: str) -> None:
    ax.imshow(z.numpy(), origin="lower", extent=(-r, r, -r, r), cmap="viridis")
    ax.set_title(title, fontsize=9)
    ax.set_xticks([])
    ax.set_yticks([])


def _panel_samples(ax, s: Tensor, r: float, title: str) -> None:
    s = s[torch.isfinite(s).all(1)].numpy()
    ax.scatter(s[:, 0], s[:, 1], s=2, alpha=0.5)
    ax.set_xlim(-r, r)
    ax.set_ylim(-r, r)
    ax.set_aspect("equal")
    ax.set_title(title, fontsize=9)
    ax.set_xticks([])
    ax.set_yticks([])


def figure(run_dirs: list[Path], out: Path) -> Path:
    """Fig. 1 from finished runs: rows iso density / samples / aniso density / samples, columns
    ground truth + the five settings (by label; missing runs leave a blank panel)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = {}
    for d in run_dirs:
        for f in sorted(Path(d).rglob("gmm_arrays.pt")):
            a = torch.load(f, weights_only=True)
            runs[(a["kind"], a["label"])] = a
    if not runs:
        raise SystemExit(f"no gmm_arrays.pt under {', '.join(map(str, run_dirs))}")
    cols = [("truth", "(a) ground truth")] + [
        (k, f"({chr(98 + i)}) {t}") for i, (k, t) in enumerate(SETTINGS)
    ]
    fig, axes = plt.subplots(4, len(cols), figsize=(2.3 * len(cols), 9.4), squeeze=False)
    for ax in axes.flat:
        ax.axis("off")
    for row, kind in enumerate(KINDS):
        any_run = next((a for (k, _), a in runs.items() if k == kind), None)
        for c, (key, title) in enumerate(cols):
            a = any_run if key == "truth" else runs.get((kind, key))
            if a is None:
                continue
            top, bottom = axes[2 * row, c], axes[2 * row + 1, c]
            top.axis("on")
            bottom.axis("on")
            r = a["plot_range"]
            if key == "truth":
                _panel_density(top, a["true_density"], r, f"{kind}: density")
                _panel_samples(bottom, a["data"], r, "data")
            else:
                _panel_density(top, a["neg_energy"], r, f"{kind}: -F(v)")
                _panel_samples(bottom, a["samples"], r, "samples")
            if row == 0:
                top.set_title(title, fontsize=9)
    fig.tight_layout()
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120, bbox_inches="tight")
    plt.close(fig)
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description="GRBM GMM figure (paper Fig. 1) from run dirs")
    sub = ap.add_subparsers(dest="cmd", required=True)
    f = sub.add_parser("figure")
    f.add_argument("run_dirs", type=Path, nargs="+")
    f.add_argument("--out", type=Path, required=True)
    a = ap.parse_args(argv)
    print(f"written: {figure(a.run_dirs, a.out)}")


if __name__ == "__main__":
    main()
