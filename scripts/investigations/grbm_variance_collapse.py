"""GRBM Fig. 1 finding: why Gibbs-Langevin with the adjustment stops training on the GMM.

The 5,000-epoch runs of ``grbm/fig1_gmm`` with ``grbm_gmm_setting=gibbs_langevin_w_adjust``
ended with "training diverged" (the acceptance rate was NaN) at epoch 200 (isotropic) and
100 (anisotropic). The suspect: the Langevin step is alpha_0 times the MEAN visible variance
(Alg. 3 line 7), while the K inner steps on coordinate d contract by c_d = 1 - alpha / (T var_d)
(T = 1, or the number of chains under ``energy_scale=batch``). Once one coordinate's variance
falls below alpha_0 x mean / 2, |c_d| > 1: the explicit steps blow up, every proposal is
rejected, the negative chains stay at their N(0, I) start, and learning shrinks that variance
further.

This trains the experiment's GRBM with ebmlab's own learner and sampler, exactly as the run
does (same config, seed 1234), and every ``--every`` epochs prints the per-coordinate variances,
c_d at the first inner step, the mean acceptance over the epoch's chains, and how many of the
epoch's updates had acceptance 0; at the end, how far training and fresh points lie from their
conditional means W h + mu (a model that memorised the training points would put them at 0).

    python scripts/investigations/grbm_variance_collapse.py [--dataset gmm_iso] [--epochs 150]
        [--convention none|batch] [--setting gibbs_langevin_w_adjust|langevin_w_adjust]
        [--step mean|per_coordinate]

``--step per_coordinate`` tests whether the collapse is the sampler's doing: it gives every
coordinate its own stable step (an investigation variant, not the paper's method).
``--figure`` only redraws ``variance_collapse.png`` from the records already there.
``--convention batch`` uses the authors' code's convention (energies divided by the number of
chains, alpha_0 = 10 instead of 10 / 100). Writes
outputs/investigations/grbm_variance_collapse/[<setting>_][per_coordinate_step_]<dataset>_<convention>.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import torch
from hydra.utils import instantiate

from ebmlab.errors import DivergenceError
from ebmlab.utils.config import compose_job

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "outputs" / "investigations" / "grbm_variance_collapse"


def use_per_coordinate_step() -> None:
    """Investigation variant, not the paper's method: the Gibbs-Langevin step of coordinate d
    is alpha_0 var_d instead of alpha_0 x mean variance, so every inner step contracts by the
    same c = 1 - alpha_0 (stable for alpha_0 < 2, whatever the variances). Patched into
    ebmlab.samplers.grbm for this process only (its Eq. 11 coefficients take per-coordinate
    steps as they are)."""
    from ebmlab.samplers import grbm

    def alpha0(self, model):
        return self.step_size * model.var.detach()

    def inner_alphas(self, model):
        a0, k = self._alpha0(model), self.n_inner
        return [a0 * (1.0 + math.cos(math.pi * i / k)) / 2.0 for i in range(k)]

    grbm._GRBMSampler._alpha0 = alpha0
    grbm.GRBMGibbsLangevin.inner_alphas = inner_alphas


def figure(out: Path | None = None) -> Path:
    """One panel per quantity (the y variance, the acceptance) over epochs, one line per JSON
    record in ``out``: a curve shows the collapse at a glance."""
    import matplotlib

    out = OUT if out is None else out
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_v, ax_a) = plt.subplots(1, 2, figsize=(13, 3.6))
    for f in sorted(out.glob("*.json")):
        rows = json.loads(f.read_text())["rows"]
        ep = [r["epoch"] for r in rows]
        ax_v.semilogy(ep, [max(r["var"][1], 1e-9) for r in rows], marker=".", label=f.stem)
        ax_a.plot(ep, [r["accept"] for r in rows], marker=".", label=f.stem)
    ax_v.set(xlabel="epoch", ylabel="visible variance, y (floored at 1e-9)")
    ax_a.set(xlabel="epoch", ylabel="mean acceptance")
    handles, labels = ax_a.get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=7, loc="center right")
    for ax in (ax_v, ax_a):
        ax.grid(alpha=0.3)
    fig.suptitle("GRBM on the GMM (seed 1234): the visible variance in y and the acceptance")
    fig.tight_layout(rect=(0, 0, 0.74, 1))
    path = out / "variance_collapse.png"
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dataset", default="gmm_iso", choices=["gmm_iso", "gmm_aniso"])
    ap.add_argument("--epochs", type=int, default=150)
    ap.add_argument("--every", type=int, default=10)
    ap.add_argument("--convention", default="none", choices=["none", "batch"])
    ap.add_argument(
        "--setting",
        default="gibbs_langevin_w_adjust",
        choices=[
            "gibbs_langevin_w_adjust",
            "langevin_w_adjust",
            "gibbs_langevin_wo_adjust",
            "langevin_wo_adjust",
        ],
        help="conf/grbm_gmm_setting/ option (Langevin: one step per outer step, same c; "
        "without the adjustment every proposal is taken: acceptance 1)",
    )
    ap.add_argument(
        "--step",
        default="mean",
        choices=["mean", "per_coordinate"],
        help="alpha_0 x mean variance (Alg. 3) or alpha_0 x var_d (investigation variant)",
    )
    ap.add_argument("--figure", action="store_true", help="only draw the records in the folder")
    ap.add_argument(
        "overrides",
        nargs="*",
        help="extra config overrides, e.g. learner.burn_in=90 (named in the record's file name)",
    )
    args = ap.parse_args(argv)
    if args.figure:
        print(f"written: {figure()}")
        return
    torch.set_num_threads(1)
    if args.step == "per_coordinate":
        if args.setting != "gibbs_langevin_w_adjust":
            ap.error("--step per_coordinate is implemented for gibbs_langevin_w_adjust only")
        use_per_coordinate_step()
    overrides = [
        "experiment=grbm/fig1_gmm",
        "scale=paper",
        f"grbm_gmm_setting={args.setting}",
        f"dataset={args.dataset}",
        "run.n_steps=5000",  # the learning-rate schedule of the 5,000-epoch runs
    ]
    if args.convention == "batch":  # the authors' eta0 = 10 on energies / batch
        overrides += ["sampler.energy_scale=batch", "sampler.step_size=10"]
    overrides += list(args.overrides)
    _, cfg = compose_job(overrides)
    model, sampler = instantiate(cfg.model), instantiate(cfg.sampler)
    learner, data = instantiate(cfg.learner), instantiate(cfg.dataset)
    model.reset_parameters(torch.Generator().manual_seed(int(cfg.seed)))
    gen = torch.Generator().manual_seed(int(cfg.seed))
    learner.setup(model, data.points(), gen, sampler)
    per_epoch = data.points().shape[0] // int(cfg.learner.batch_size)
    temp = float(cfg.learner.batch_size) if args.convention == "batch" else 1.0
    rows, t0, diverged = [], time.time(), ""
    for epoch in range(1, args.epochs + 1):
        try:
            accs = [float(learner.step(model, gen)["accept_rate"]) for _ in range(per_epoch)]
        except DivergenceError as err:  # as the run stops: the update is not applied
            diverged = f"diverged in epoch {epoch}: {err}"
            print(json.dumps({"epoch": epoch, "diverged": diverged}), flush=True)
            break
        if epoch % args.every and epoch != 1:
            continue
        var = model.var.detach()
        alpha0 = sampler.step_size * float(var.mean())
        if args.step == "per_coordinate":
            alpha0 = sampler.step_size * var
        c = (1.0 - alpha0 / (temp * var)).tolist()
        row = {
            "epoch": epoch,
            "var": [float(f"{float(v):.4g}") for v in var],
            "c_first_step": [round(x, 3) for x in c],
            "accept": sum(accs) / len(accs),
            "updates_with_accept_0": sum(a == 0 for a in accs),
            "seconds": round(time.time() - t0, 1),
        }
        rows.append(row)
        print(json.dumps(row), flush=True)
    # memorisation check: how far the training points and fresh ones lie from their conditional
    # means W h + mu (h ~ p(h|v)); a model that learned spikes on the training points would put
    # the first near 0
    resid = {}
    with torch.no_grad():
        g = torch.Generator().manual_seed(0)
        for name, pts in (("train", data.points()), ("fresh", data.fresh(1000, data.seed + 1))):
            r = (pts - model.mean_v_given_h(model.sample_h_given_v(pts, g))).abs()
            resid[name] = [round(float(q), 4) for q in r.median(0).values]
    print(json.dumps({"median_residual_per_axis": resid}))
    OUT.mkdir(parents=True, exist_ok=True)
    tag = "" if args.setting == "gibbs_langevin_w_adjust" else f"{args.setting}_"
    tag += "" if args.step == "mean" else "per_coordinate_step_"
    tag += "".join(f"{o.replace('=', '').replace('.', '-')}_" for o in args.overrides)
    stem = OUT / f"{tag}{args.dataset}_{args.convention}"
    record = {"args": vars(args), "rows": rows, "median_residual_per_axis": resid}
    if diverged:
        record["diverged"] = diverged
    Path(f"{stem}.json").write_text(json.dumps(record, indent=1))
    lines = [
        f"# GRBM {args.setting} on {args.dataset}, convention {args.convention}",
        "",
        "| epoch | var (x, y) | c at the first inner step (x, y) | mean acceptance "
        "| updates with acceptance 0 |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        var = ", ".join(f"{v:.4g}" for v in r["var"])
        c = ", ".join(f"{x:.3g}" if math.isfinite(x) else str(x) for x in r["c_first_step"])
        lines.append(
            f"| {r['epoch']} | {var} | {c} | {r['accept']:.3f} | "
            f"{r['updates_with_accept_0']} of {per_epoch} |"
        )
    lines += [
        "",
        f"Median |v - (W h + mu)| per axis (x, y) at the end, h ~ p(h|v): training points "
        f"{resid['train']}, fresh points {resid['fresh']}.",
    ]
    if diverged:
        lines += ["", f"Training {diverged}."]
    Path(f"{stem}.md").write_text("\n".join(lines) + "\n")
    print(f"written: {stem}.md, {stem}.json, {figure()}")


if __name__ == "__main__":
    main()
