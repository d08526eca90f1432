"""RMwGGIS Table 2 finding: why does a graph energy's test MMD rise late in training?

The Hyvarinen-objective run's average MMD against the test graphs fell from 0.091 (5,000
iterations) to 0.063 (10,000), then rose to 0.153 (15,000) while its training loss kept falling.
Four explanations predict different things, and this script measures each, per checkpoint:

- **evaluation noise**: the task scores one draw of ``n_samples`` graphs. Drawing again with
  other seeds (``--seeds``) gives the spread of that number for a fixed model.
- **overfitting ~160 training graphs**: the exact objective (the run's ``learner.objective``,
  summed over all D neighbours) on the training graphs keeps falling while on the 40 test
  graphs it rises; the energy gap mean E(test) - mean E(train) grows; and generated graphs
  move towards the training graphs (their MMD vs the training graphs falls) and away from the
  test graphs, or, if the model rates graphs far from the data that it never sees (ratio
  matching looks only at the data and their one-flip neighbours) as well as the test graphs,
  to those (the generated graphs' mean energy E(generated) beside E(train) and E(test)).
- **a sampler that no longer mixes**: generated graphs depend on how many Gibbs sweeps the task
  runs (``--sweeps``: e.g. the task's 20 against 4x that).
- **an estimator that stops seeing the objective** (RMwGGIS runs): the gradient-guided proposal
  ranks a graph's neighbours by first-order flip estimates; when those go wrong, the terms that
  carry the objective are almost never drawn, the learner's estimate (unbiased, but
  heavy-tailed) typically sits far below the exact objective, and training stops lowering the
  exact objective even on the training graphs (:func:`proposal_coverage`).

For each checkpoint of the one run given (``--checkpoints``: e.g. copies of a running run's
``last.pt`` taken along the way; default its latest) it writes a row per (sweeps, seed) to
outputs/investigations/graph_generalisation/ results.json, table.md and generalisation.png; rows
already there are kept, their checkpoint-level columns (objective, energies, proposal) recomputed.

    python scripts/investigations/graph_generalisation.py RUN_DIR --checkpoints A.pt B.pt \
        --seeds 0 1 2 --sweeps 20 80
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from ebmlab.learning.ratio_matching import (
    first_order_deltas,
    flip_deltas,
    full_loss,
    gradient_proposal,
    sampled_loss,
)
from ebmlab.learning.ratio_matching_objectives import term
from ebmlab.metrics.graph_stats import graph_mmd
from ebmlab.tasks.density_modeling import gibbs_samples
from ebmlab.tasks.graph_generation import bits_to_graphs, init_bits
from ebmlab.utils.trained_weights import resolve_checkpoint

try:  # run as a script: its sibling is importable
    from graph_temperature import label, load_model, load_run
except ImportError:  # loaded by path (the tests)
    import importlib.util

    _spec = importlib.util.spec_from_file_location(
        "graph_temperature", Path(__file__).with_name("graph_temperature.py")
    )
    _gt = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(_gt)
    label, load_model, load_run = _gt.label, _gt.load_model, _gt.load_run

REPO = Path(__file__).resolve().parents[2]
OUT = REPO / "outputs" / "investigations" / "graph_generalisation"


def objective_split(run: dict, model, data) -> dict:
    """The run's objective, exact (all D neighbours), and the mean energy, on train and test."""
    lr = run["config"].get("learner", {})
    objective = lr.get("objective", "hyvarinen")
    out = {"objective": objective}
    dtype = next(t for t in model.state_dict().values() if t.is_floating_point()).dtype
    with torch.no_grad():
        for split, x in (("train", data.train_x), ("test", data.test_x)):
            x = x.to(dtype)
            out[f"loss_{split}"] = float(full_loss(model, x, objective, "mean", 4096))
            out[f"energy_{split}"] = float(-model.log_prob(x).mean())
    out["energy_gap"] = out["energy_test"] - out["energy_train"]
    if lr.get("estimator") == "ggis":
        out.update(proposal_coverage(lr, model, data.train_x.to(dtype)))
    return out


def proposal_coverage(lr: dict, model, x, draws: int = 20, rare: float = 1e-4) -> dict:
    """How well the gradient-guided proposal (Eq. 10, first-order deltas) covers the objective
    on ``x``, with the learner's own settings ``lr``:

    - ``estimate``: the mean of ``draws`` estimates of the objective on all of ``x``, the
      learner's estimator (unbiased for the basic variant, but heavy-tailed when the proposal
      misses large terms: its typical value is then well below ``loss_train``);
    - ``missed_share``: the share of the exact objective carried by neighbours that s draws
      include with probability below ``rare`` per step (1 - (1 - q_i)^s), i.e. that training
      almost never looks at;
    - ``delta_corr``: the correlation of the first-order deltas with the true ones."""
    objective, s = lr["objective"], int(lr["s"])
    with torch.no_grad():
        delta = flip_deltas(model, x, None, lr.get("neighbours", "model")).double()
    delta_hat = first_order_deltas(model, x)[1].double()
    log_q = gradient_proposal(model, x, objective, lr.get("proposal", "value"))[1]
    t = term(objective, delta)
    reached = -torch.expm1(s * torch.log1p(-log_q.exp().clamp(max=1 - 1e-12)))
    g = torch.Generator().manual_seed(0)
    estimates = [
        float(
            sampled_loss(
                model,
                x,
                objective,
                "ggis",
                lr.get("proposal", "value"),
                s,
                lr["variant"],
                bool(lr.get("replacement", False)),
                g,
                "mean",
                lr.get("neighbours", "model"),
            ).detach()
        )
        for _ in range(draws)
    ]
    corr = torch.corrcoef(torch.stack([delta.flatten(), delta_hat.flatten()]))
    return {
        "estimate": sum(estimates) / draws,
        "missed_share": float(t[reached < rare].sum() / t.sum()),
        "delta_corr": float(corr[0, 1]),
    }


def generate(run: dict, model, data, n: int, sweeps: int, seed: int) -> dict:
    """``n`` graphs drawn as the task draws them (its ``gen_init``, ``sweeps`` Gibbs sweeps),
    scored against the test graphs and, as ``train_*``, against the training graphs; with their
    mean energy (beside the data's in :func:`objective_split`)."""
    g = torch.Generator().manual_seed(seed)
    x0 = init_bits(n, run["config"]["task"]["gen_init"], data.train_x, g)
    with torch.no_grad():
        bits = gibbs_samples(model, x0, sweeps, g)
    graphs = bits_to_graphs(bits, data.max_nodes)
    out = {k: float(v) for k, v in graph_mmd(graphs, data.test_graphs).items()}
    out.update({f"train_{k}": float(v) for k, v in graph_mmd(graphs, data.train_graphs).items()})
    out["edges"] = sum(h.number_of_edges() for h in graphs) / n
    out["nodes"] = sum(h.number_of_nodes() for h in graphs) / n
    with torch.no_grad():
        out["energy_gen"] = float(-model.log_prob(bits).mean())
    return out


def table(done: dict) -> str:
    nan = float("nan")
    rows = [
        "| checkpoint | sweeps | seed | objective train | its estimate | missed share "
        "| corr(delta, first order) | objective test | E(train) | E(test) | E(generated) | edges "
        "| nodes | degree | clustering | orbit | avg vs test | avg vs train |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for key, r in done.items():
        name, sweeps, seed = key.split(" | ")
        rows.append(
            f"| {name} | {sweeps.split()[0]} | {seed.split()[1]} | {r['loss_train']:.4f} "
            f"| {r.get('estimate', nan):.4f} | {r.get('missed_share', nan):.3f} "
            f"| {r.get('delta_corr', nan):.3f} | {r['loss_test']:.4f} | {r['energy_train']:.2f} "
            f"| {r['energy_test']:.2f} "
            f"| {r.get('energy_gen', nan):.2f} | {r['edges']:.1f} "
            f"| {r['nodes']:.1f} | {r['degree']:.4f} | {r['clustering']:.4f} | {r['orbit']:.4f} "
            f"| {r['avg']:.4f} | {r['train_avg']:.4f} |"
        )
    return "\n".join(rows) + "\n"


def figure(done: dict, path: Path) -> None:
    """Against the checkpoint's iteration: the objective on train (exact and the learner's
    estimate) and test; the average MMD vs test / train (mean over seeds, bars from the lowest
    to the highest seed; a line per (sweeps, graphs drawn)); and, for ggis learners, the share of
    the objective the proposal misses and the first-order deltas' correlation with the true."""
    from ebmlab.utils.plotting import plt, save

    fig, (ax_l, ax_m, ax_p) = plt.subplots(1, 3, figsize=(15.0, 3.8))
    steps = sorted({r["step"] for r in done.values()})
    first = {s: next(r for r in done.values() if r["step"] == s) for s in steps}
    for key, ls, name in (
        ("loss_train", "-", "train, exact"),
        ("estimate", ":", "train, the learner's estimate (mean)"),
        ("loss_test", "--", "test, exact"),
    ):
        pts = [(s, first[s][key]) for s in steps if key in first[s]]
        if pts:
            ax_l.plot(*zip(*pts), ls=ls, marker="o", label=name)
    for sweeps, n in sorted({(r["sweeps"], r["samples"]) for r in done.values()}):
        for key, ls in (("avg", "-"), ("train_avg", "--")):
            ys = [
                [
                    r[key]
                    for r in done.values()
                    if r["step"] == s and (r["sweeps"], r["samples"]) == (sweeps, n)
                ]
                for s in steps
            ]
            pts = [(s, y) for s, y in zip(steps, ys) if y]
            mean = [sum(y) / len(y) for _, y in pts]
            err = [
                [m - min(y) for (_, y), m in zip(pts, mean)],
                [max(y) - m for (_, y), m in zip(pts, mean)],
            ]
            vs = "test" if key == "avg" else "train"
            ax_m.errorbar(
                [s for s, _ in pts],
                mean,
                yerr=err,
                ls=ls,
                marker="o",
                capsize=3,
                label=f"vs {vs} graphs ({n} drawn, {sweeps} sweeps)",
            )
    for key, name in (
        ("missed_share", "share of the objective drawn < 1e-4 per step"),
        ("delta_corr", "corr(true, first-order flip deltas)"),
    ):
        pts = [(s, first[s][key]) for s in steps if key in first[s]]
        if pts:
            ax_p.plot(*zip(*pts), marker="o", label=name)
    if not ax_p.lines:  # exact ratio matching (learner=rm): no proposal to measure
        ax_p.text(0.5, 0.5, "exact objective:\nno proposal", ha="center", va="center")
    ax_l.set(
        xlabel="iteration of the checkpoint",
        ylabel=f"{first[steps[0]]['objective']} objective (mean per graph)",
    )
    ax_m.set(xlabel="iteration of the checkpoint", ylabel="average MMD (degree, clustering, orbit)")
    ax_p.set(xlabel="iteration of the checkpoint", ylabel="gradient-guided proposal", ylim=(0, 1))
    for ax in (ax_l, ax_m, ax_p):
        ax.grid(alpha=0.3)
        if ax.lines:
            ax.legend(fontsize=8)
    fig.suptitle(
        "Ego-small: does the graph energy generalise, and does its proposal cover the "
        "objective? (per checkpoint)"
    )
    save(fig, path)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("run", type=Path, help="a graph_generation run directory")
    ap.add_argument(
        "--checkpoints",
        type=Path,
        nargs="*",
        default=[],
        help="checkpoint files of the run (default: its latest)",
    )
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument(
        "--sweeps",
        type=int,
        nargs="+",
        default=None,
        help="Gibbs sweeps per draw (default: the run's task.gen_sweeps)",
    )
    ap.add_argument(
        "--samples",
        type=int,
        default=None,
        help="graphs per draw (default: the run's task.n_samples)",
    )
    a = ap.parse_args(argv)
    run, data = load_run(a.run.resolve())
    task = run["config"]["task"]
    n = a.samples or int(task["n_samples"])
    sweeps_list = a.sweeps or [int(task["gen_sweeps"])]
    if n < 2 or any(s < 1 for s in sweeps_list):
        raise SystemExit(f"--samples must be >= 2 and --sweeps >= 1 (got {n}, {sweeps_list})")
    OUT.mkdir(parents=True, exist_ok=True)
    path_json = OUT / "results.json"
    done = json.loads(path_json.read_text()) if path_json.exists() else {}
    name = label(run, int(run["config"]["run"]["n_steps"]))
    for path in a.checkpoints or [Path(resolve_checkpoint(str(a.run)))]:
        model, step = load_model(run, Path(path))
        split = objective_split(run, model, data)  # deterministic: refreshes older rows too
        for r in done.values():
            if r["run"] == name and r["step"] == step:
                r.update(split)
        for sweeps in sweeps_list:
            for seed in a.seeds:
                key = f"{label(run, step)}, {n} graphs | {sweeps} sweeps | seed {seed}"
                if key in done:
                    continue
                t0 = time.perf_counter()
                r = generate(run, model, data, n, sweeps, seed)
                done[key] = {
                    **split,
                    **r,
                    "run": name,
                    "step": step,
                    "sweeps": sweeps,
                    "samples": n,
                    "seed": seed,
                }
                print(
                    f"{key}: objective train {split['loss_train']:.4f} test "
                    f"{split['loss_test']:.4f}; avg MMD vs test {r['avg']:.4f}, vs train "
                    f"{r['train_avg']:.4f} ({time.perf_counter() - t0:.0f} s)",
                    flush=True,
                )
                path_json.write_text(json.dumps(done, indent=2))
        path_json.write_text(json.dumps(done, indent=2))
    (OUT / "table.md").write_text(table(done))
    figure({k: r for k, r in done.items() if r["run"] == name}, OUT / "generalisation.png")
    print(table(done))


if __name__ == "__main__":
    main()
