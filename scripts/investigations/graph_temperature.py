"""RMwGGIS Table 2 finding: are Eq. (3)'s dense graphs the data at temperature 4?

Eq. (3)'s minimiser is p_data^(1/4) (docs/ratio_matching.md). If that is why the paper's
RMwGGIS generates graphs with about 80-97 edges (the training graphs have 8.5), then

- cooling an Eq. (3) model by the predicted factor, sampling p_theta^4, gives graphs like
  the data (and heating it further makes them denser still), and
- heating a model trained consistently (the Hyvarinen objective, or EBM(GWG)) to
  temperature 4, sampling p_theta^(1/4), gives graphs as dense as Eq. (3)'s.

Heating any model towards temperature infinity gives independent fair bits: 76.5 of the 153
possible edges on 18 nodes.

For each run directory given (``graph_generation`` task; its latest checkpoint, or the
``--checkpoints`` files of one run, finished or still running), this draws ``--samples``
graphs of p_theta^beta for each ``--betas`` value exactly as the task generates them
(``task.gen_sweeps`` systematic Gibbs sweeps from the task's ``gen_init``), and reports edges,
nodes and the degree / clustering / orbit MMDs against the test graphs.

    python scripts/investigations/graph_temperature.py RUN_DIR [RUN_DIR ...] [--betas 0.25 1 4]

Writes outputs/investigations/graph_temperature/ results.json, table.md, temperature.png and
(with --checkpoints) checkpoints.png; (run, beta, samples, seed) rows already there are kept
(delete results.json to redo them).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch
from hydra.utils import instantiate

from ebmlab.metrics.graph_stats import graph_mmd
from ebmlab.models.tempered import Tempered
from ebmlab.runs.rundirs import collect, collect_unfinished
from ebmlab.tasks.density_modeling import gibbs_samples
from ebmlab.tasks.graph_generation import bits_to_graphs, init_bits
from ebmlab.utils.config import compose_job
from ebmlab.utils.trained_weights import load_trained_weights, resolve_checkpoint

REPO = Path(__file__).resolve().parents[2]
OUT = REPO / "outputs" / "investigations" / "graph_temperature"


def label(run: dict, step: int) -> str:
    cfg, choices = run["config"], run["choices"]
    if choices.get("sampler"):
        reinit = float(cfg["task"].get("buffer_reinit") or 0)
        name = f"EBM({choices['sampler'].upper()}" + (f", re-init {reinit:g})" if reinit else ")")
    else:
        lr = cfg["learner"]
        # the variant is a setting of the sampled estimators only; full RM is exact
        variant = lr.get("variant", "") if lr.get("estimator") != "full" else "(exact)"
        name = f"{choices.get('learner', '?')} {lr.get('objective', 'eq3')} {variant}"
    n = int(cfg["run"]["n_steps"])
    at = f"{n:,} iterations" if step == n else f"iteration {step:,} of {n:,}"
    return f"{name.strip()}, seed {run['seed']}, {at}"


def load_run(run_dir: Path):
    """(run record, loaded dataset) of a graph-generation run, finished or not."""
    found = [r for r in collect(run_dir) + collect_unfinished(run_dir) if r["run_dir"] == run_dir]
    target = found[0]["config"].get("task", {}).get("_target_", "") if found else ""
    if not target.endswith(".GraphGeneration"):
        raise SystemExit(f"{run_dir}: not a graph_generation run directory (no run_config.json)")
    run = found[0]
    choices, cfg = compose_job([f"{k}={v}" for k, v in run["overrides"].items()])  # as the run was
    run["choices"] = run["choices"] or choices
    run["seed"] = run.get("seed", cfg.seed)
    return run, instantiate(cfg.dataset).load()


def load_model(run: dict, path: Path):
    """(trained model, the iteration its checkpoint was written at)."""
    model = instantiate(run["config"]["model"])
    load_trained_weights(model, path, use_ema=False)
    model.eval()
    ck = torch.load(path, map_location="cpu", weights_only=True)
    step = ck.get("_run", {}).get("step", run["config"]["run"]["n_steps"])
    return model, int(step)


def draw(run: dict, model, data, beta: float, n: int, seed: int) -> dict:
    task = run["config"]["task"]
    g = torch.Generator().manual_seed(seed)
    x0 = init_bits(n, task["gen_init"], data.train_x, g)
    with torch.no_grad():
        bits = gibbs_samples(Tempered(model, beta), x0, int(task["gen_sweeps"]), g)
    graphs = bits_to_graphs(bits, data.max_nodes)
    out = {k: float(v) for k, v in graph_mmd(graphs, data.test_graphs).items()}
    out["edges"] = sum(h.number_of_edges() for h in graphs) / n
    out["nodes"] = sum(h.number_of_nodes() for h in graphs) / n
    out["bit_density"] = float(bits.mean())
    return out


def table(done: dict) -> str:
    rows = [
        "| run | beta (temperature) | samples, seed | edges | nodes | edge bits on | degree "
        "| clustering | orbit | avg |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for key, r in done.items():
        run, beta, drawn = key.split(" | ")
        b = float(beta.split()[1])
        rows.append(
            f"| {run} | {b:g} ({1 / b:g}) | {drawn} | {r['edges']:.1f} | {r['nodes']:.1f} "
            f"| {r['bit_density']:.3f} | {r['degree']:.4f} | {r['clustering']:.4f} "
            f"| {r['orbit']:.4f} | {r['avg']:.4f} |"
        )
    return "\n".join(rows) + "\n"


def _panels(series: dict, train_edges: float, xlabel: str, title: str, path: Path, log_x: bool):
    """Mean edges (beside the training graphs') and average MMD against x, a line per series
    (name -> [(x, result row)])."""
    from ebmlab.utils.plotting import plt, save

    fig, (ax_e, ax_m) = plt.subplots(1, 2, figsize=(10.0, 3.8))
    for name, pts in sorted(series.items()):
        pts.sort(key=lambda p: p[0])
        xs = [x for x, _ in pts]
        ax_e.plot(xs, [r["edges"] for _, r in pts], marker="o", label=name)
        ax_m.plot(xs, [r["avg"] for _, r in pts], marker="o", label=name)
    ax_e.axhline(train_edges, color="grey", ls="--", lw=0.8, label="training graphs")
    for ax, ylabel in (
        (ax_e, "mean edges per graph"),
        (ax_m, "average MMD (degree, clustering, orbit)"),
    ):
        ax.set(xlabel=xlabel, ylabel=ylabel)
        ax.grid(alpha=0.3)
        if log_x:
            ax.set_xscale("log", base=2)
    ax_m.set_yscale("log")
    handles, labels = ax_e.get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=2, fontsize=8)
    fig.suptitle(title)
    save(fig, path)


def figures(done: dict, train_edges: float, out: Path) -> None:
    """temperature.png: each run's last checkpoint against the sampling temperature 1/beta;
    checkpoints.png (when --checkpoints rows exist): each run against the iteration its
    checkpoints were written at, one line per beta."""
    final, along = {}, {}
    for key, r in done.items():
        run, beta, drawn = key.split(" | ")
        b = float(beta.split()[1])
        if r.get("step", 0) < r.get("n_iters", 0):
            along.setdefault(f"{r['run']}, beta {b:g} ({drawn})", []).append((r["step"], r))
        else:
            final.setdefault(f"{run} ({drawn})", []).append((1 / b, r))
    if final:
        title = "Ego-small: trained graph energies sampled at other temperatures"
        xlabel = "sampling temperature 1/beta (the run's model at 1)"
        _panels(final, train_edges, xlabel, title, out / "temperature.png", log_x=True)
    if along:
        title = "Ego-small: checkpoints of training runs, sampled as the task generates graphs"
        xlabel = "iteration of the checkpoint"
        _panels(along, train_edges, xlabel, title, out / "checkpoints.png", log_x=False)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("runs", type=Path, nargs="+", help="graph_generation run directories")
    ap.add_argument(
        "--checkpoints",
        type=Path,
        nargs="*",
        default=[],
        help="checkpoint files of the one run given, in place of its latest (e.g. copies of a "
        "running run's last.pt taken along the way)",
    )
    ap.add_argument("--betas", type=float, nargs="+", default=[0.25, 1.0, 4.0])
    ap.add_argument("--samples", type=int, default=256)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    if any(b <= 0 for b in a.betas):
        raise SystemExit(f"--betas must be positive (got {a.betas})")
    OUT.mkdir(parents=True, exist_ok=True)
    path_json = OUT / "results.json"
    done = json.loads(path_json.read_text()) if path_json.exists() else {}
    if a.checkpoints and len(a.runs) != 1:
        raise SystemExit("--checkpoints needs exactly one run directory (the run they belong to)")
    for run_dir in a.runs:
        run, data = load_run(run_dir.resolve())
        for path in a.checkpoints or [resolve_checkpoint(str(run_dir))]:
            model, step = load_model(run, Path(path))
            for beta in a.betas:
                key = f"{label(run, step)} | beta {beta:g} | {a.samples}, seed {a.seed}"
                if key in done:
                    continue
                t0 = time.perf_counter()
                r = draw(run, model, data, beta, a.samples, a.seed)
                n_iters = int(run["config"]["run"]["n_steps"])
                done[key] = {**r, "run": label(run, n_iters), "step": step, "n_iters": n_iters}
                print(
                    f"{key}: {r['edges']:.1f} edges, avg MMD {r['avg']:.4f} "
                    f"({time.perf_counter() - t0:.0f} s)",
                    flush=True,
                )
                path_json.write_text(json.dumps(done, indent=2))
    (OUT / "table.md").write_text(table(done))
    train = data.train_graphs
    figures(done, sum(h.number_of_edges() for h in train) / len(train), OUT)
    print(table(done))


if __name__ == "__main__":
    main()
