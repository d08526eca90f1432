"""RMwGGIS Table 1 finding: do the ratio-matching models learn the data at a temperature?

docs/ratio_matching.md shows that Eq. (3)'s minimiser is q ∝ p_data^(1/4) on enumerable
models, and that RMwGGIS advanced shrinks the model further. If that holds for the MLP
energies of Table 1, a trained model's samples are too diffuse, and sharpening it, sampling
p_theta^beta for beta > 1, lowers the MMD, with the best beta near 4 for Eq. (3) and above it
for advanced. On moons advanced ended with the WORST MMD (the paper has it best); a larger
best beta, and an MMD at the best beta no worse than the others', would say that advanced
lost on temperature, not on shape.

For every finished ``rmwggis/table1_synthetic`` run (paper scale) on the chosen datasets this
draws ``--samples`` model samples of p_theta^beta (``--sweeps`` systematic Gibbs sweeps from
uniform bits, as the task does) for each beta, and the unbiased linear-kernel MMD^2 (with
its standard error) against fresh true samples.

    python scripts/investigations/rmwggis_temperature.py [--datasets moons 2spirals]

Writes outputs/investigations/rmwggis_temperature/{results.json,table.md,<dataset>.png}; runs
already evaluated there are kept (delete results.json to redo them).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch
from hydra.utils import instantiate

from ebmlab.metrics.mmd import mmd2_linear_hamming_unbiased, mmd2_linear_hamming_unbiased_se
from ebmlab.models.tempered import Tempered
from ebmlab.runs.rundirs import collect
from ebmlab.tasks.density_modeling import gibbs_samples
from ebmlab.utils.trained_weights import load_trained_weights, resolve_checkpoint

REPO = Path(__file__).resolve().parents[2]
EXPERIMENT = "rmwggis/table1_synthetic"
BETAS = (1.0, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0)


def label(run: dict) -> str:
    lr = run["config"]["learner"]
    name = run["choices"]["learner"]
    objective = lr.get("objective", "eq3")
    return name if objective == "eq3" else f"{name} ({objective})"


def evaluate(run: dict, betas, n: int, sweeps: int, seed: int) -> dict:
    cfg = run["config"]
    model = instantiate(cfg["model"])
    load_trained_weights(model, resolve_checkpoint(str(run["run_dir"])), use_ema=False)
    model.eval()
    data = instantiate(cfg["dataset"])
    out = {}
    for beta in betas:
        g = torch.Generator().manual_seed(seed)
        x0 = (torch.rand(n, data.dim, generator=g) < 0.5).float()
        with torch.no_grad():
            samples = gibbs_samples(Tempered(model, beta), x0, sweeps, g)
        truth = data.sample(n, torch.Generator().manual_seed(seed + 1))
        out[str(beta)] = {
            "mmd": float(mmd2_linear_hamming_unbiased(samples, truth)),
            "mmd_se": mmd2_linear_hamming_unbiased_se(samples, truth),
        }
    return {
        "mmd_by_beta": out,
        "run_mmd": run["metrics"].get("mmd"),
        "samples": n,
        "sweeps": sweeps,
    }


def figure(done: dict, dataset: str, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.0, 4.0))
    keys = sorted(k for k in done if k.split(" | ")[0] == dataset)
    learners = sorted({k.split(" | ")[1] for k in keys})
    draws = sorted({(k.split(" | ")[2], k.split(" | ")[4]) for k in keys})
    for key in keys:
        _, name, seed, _, drawn = key.split(" | ")
        r = done[key]
        bs = sorted(r["mmd_by_beta"], key=float)
        ys = [r["mmd_by_beta"][b]["mmd"] for b in bs]
        es = [r["mmd_by_beta"][b]["mmd_se"] for b in bs]
        ax.errorbar(
            [float(b) for b in bs],
            ys,
            yerr=es,
            marker="o",
            capsize=2,
            color=f"C{learners.index(name)}",
            ls=("-", "--", ":", "-.")[draws.index((seed, drawn)) % 4],
            label=f"{name}, {seed} ({drawn})",
        )
    ticks = sorted({float(b) for k in keys for b in done[k]["mmd_by_beta"]})
    ax.set_xscale("log")
    ax.set_xticks(ticks, [f"{b:g}" for b in ticks])
    ax.minorticks_off()
    ax.axvline(4.0, color="grey", lw=0.8, ls=":")
    ax.set(xlabel="beta (samples of p_theta^beta; dotted: 4)", ylabel="MMD^2 vs data")
    ax.set_title(f"{dataset}: MMD of the sharpened trained models")
    ax.legend(fontsize=8)
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", type=Path, default=REPO / "outputs")
    ap.add_argument("--datasets", nargs="*", default=["moons", "2spirals"])
    ap.add_argument("--betas", type=float, nargs="*", default=list(BETAS))
    ap.add_argument("--samples", type=int, default=4000)
    ap.add_argument("--sweeps", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    out = a.root / "investigations" / "rmwggis_temperature"
    out.mkdir(parents=True, exist_ok=True)
    path = out / "results.json"
    done = json.loads(path.read_text()) if path.exists() else {}
    for run in collect(a.root / "multirun" / EXPERIMENT / "paper"):
        ds = run["config"]["dataset"]["name"]
        key = (
            f"{ds} | {label(run)} | seed {run['seed']} | {run['metrics']['n_iters']} iters"
            f" | {a.samples} samples, sampling seed {a.seed}"
        )
        if key in done or ds not in a.datasets:
            continue
        t0 = time.perf_counter()
        done[key] = evaluate(run, a.betas, a.samples, a.sweeps, a.seed)
        print(f"{key}: {time.perf_counter() - t0:.0f} s", flush=True)
        path.write_text(json.dumps(done, indent=2))
    betas = sorted({b for r in done.values() for b in r["mmd_by_beta"]}, key=float)
    rows = [
        "| dataset | learner | run | iterations | samples, sampling seed | MMD in the run | "
        + " | ".join(f"beta {float(b):g}" for b in betas)
        + " | best beta |",
        "|---|---|---|---|---|---|" + "---|" * (len(betas) + 1),
    ]
    for key, r in sorted(done.items()):
        ds, name, seed, iters, drawn = key.split(" | ")
        m = r["mmd_by_beta"]
        best = min(m, key=lambda b: m[b]["mmd"])
        cells = [f"{m[b]['mmd']:.4f} ± {m[b]['mmd_se']:.4f}" if b in m else "" for b in betas]
        rows.append(
            f"| {ds} | {name} | {seed} | {iters.split()[0]} | {drawn} "
            f"| {r['run_mmd']:.4f} | " + " | ".join(cells) + f" | {float(best):g} |"
        )
    (out / "table.md").write_text("\n".join(rows) + "\n")
    print("\n".join(rows))
    for ds in sorted({k.split(" | ")[0] for k in done}):
        figure(done, ds, out / f"{ds}.png")


if __name__ == "__main__":
    main()
