"""AB Table 4 finding: why LB's ESS rises from the medium to the high condition on the rotated
lattice Gaussian, and overtakes the quadratic AB samplers there.

The paper's ESS (DISCS convention, ``task=sampler_ess``) is that of one statistic per chain:
the Hamming distance to a fixed random reference state. On {0..20}^100 with our rotated target
(precision eigenvalues 1..L, mean at the box centre 10), each coordinate's marginal standard
deviation is about sqrt(mean(1/lambda)): 0.83, 0.51 and 0.28 lattice units at L = 2, 10, 50.
At L = 50 nearly all of a coordinate's mass sits on the value 10, and the Hamming distance to a
reference moves only when one of the few coordinates whose reference value is 10 (or 9, 11)
steps off or onto it. The hypothesis: that statistic then measures how fast single coordinates
jitter, not how fast the chain crosses the target along its slow directions.

This runs the experiment's own samplers on the experiment's own targets (same configs and
adaptation, fewer chains and steps, declared in the output) and records, after burn-in, four
statistics per chain: the paper's Hamming distance; the log-probability f(x); the projection
of x on the precision's eigenvector with the SMALLEST eigenvalue (the slowest direction of the
Gaussian); and every coordinate (ESS averaged over coordinates). ESS is per 10,000 queries, as
in the paper.

    python scripts/investigations/ab_ess_statistic.py [--targets rotated_medium rotated_high]
        [--samplers dmala ab_1st ab_trace] [--chains 50] [--burn-in 20000] [--steps 10000]
        [--table-runs-only]

It also reads the table's own runs on the same targets (their last checkpoints): where their
chains end (mean f(x), the fraction sitting on the centre b) and the spread of the per-chain
ESS. Writes outputs/investigations/ab_ess_statistic/<target>_<sampler>.json and summary.md.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path
from types import SimpleNamespace

import torch
from tqdm import tqdm

from ebmlab.core.loop import Cadence
from ebmlab.metrics.ess import ess_1d, ess_per_dim, ess_per_queries, hamming_to_reference
from ebmlab.utils.config import build, compose_job
from ebmlab.utils.seeding import make_generator

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "outputs" / "investigations" / "ab_ess_statistic"
TABLE_RUNS = ROOT / "outputs" / "multirun" / "ab" / "tables1to5_ess" / "paper"
STATS = ("hamming", "log_prob", "slow_projection", "per_coordinate")


def run_one(target: str, sampler: str, chains: int, burn_in: int, steps: int, seed: int) -> dict:
    """One sampler on one target through the sampler_ess task's own build and step."""
    overrides = [
        "experiment=ab/tables1to5_ess",
        "scale=paper",
        f"ab_target={target}",
        f"sampler={sampler}",
        f"seed={seed}",
        f"task.n_chains={chains}",
        f"task.burn_in={burn_in}",
        f"run.n_steps={burn_in + steps}",
    ]
    _, cfg = compose_job(overrides)
    task = build(cfg.task, "task")
    task.cadence = Cadence.from_config(cfg.run)  # as the loop sets it
    dev = torch.device("cpu")
    t0 = time.perf_counter()
    ctx = SimpleNamespace(
        cfg=cfg,
        device=dev,
        generator=make_generator(seed, dev),
        build=lambda group, **extra: build(cfg[group], group, **extra),
        elapsed=lambda: time.perf_counter() - t0,
    )
    p = task.build(ctx)
    A = p.model.precision().double()
    evals, evecs = torch.linalg.eigh(A)
    slow = evecs[:, 0].float()  # eigenvector of the smallest eigenvalue
    xs = torch.empty(steps, chains, int(p.model.dim), dtype=torch.uint8)
    lp = torch.empty(steps, chains)
    queries = 0.0
    for step in tqdm(range(1, burn_in + steps + 1), desc=f"{target} {sampler}", mininterval=30):
        out = task.step(p, step, ctx)
        if step > burn_in:
            i = step - burn_in - 1
            x = p.runner.state.x.reshape(chains, -1)
            xs[i] = x.round().to(torch.uint8)
            lp[i] = p.runner.state.log_prob.float()  # the sampler's cached f(x), no second forward
            queries += float(out["queries"])
    xf = xs.float()
    series = {
        "hamming": hamming_to_reference(xf, p.ref),
        "log_prob": lp,
        "slow_projection": xf @ slow,
    }
    ess = {k: float(ess_1d(v).mean()) for k, v in series.items()}
    ess["per_coordinate"] = float(ess_per_dim(xf).mean())
    sd = xf.std(dim=(0, 1))
    at_mode = (xs == int(round(float(p.model.b[0])))).float().mean()
    return {
        "target": target,
        "sampler": sampler,
        "seed": seed,
        "chains": chains,
        "burn_in": burn_in,
        "steps": steps,
        "queries": queries,
        "ess": ess,
        "ess_n": {k: ess_per_queries(v, queries) for k, v in ess.items()},
        "hamming_mean": float(series["hamming"].mean()),
        "coordinate_sd_mean": float(sd.mean()),
        "fraction_at_centre": float(at_mode),
        "slow_eigenvalue": float(evals[0]),
        "seconds": time.perf_counter() - t0,
    }


def table_runs(target: str) -> list[dict]:
    """The final chain states of the table's own runs (``ab/tables1to5_ess``, 20,000 + 20,000
    steps, seed 0) on ``target``: mean f(x) (0 at the centre b), the fraction of chains sitting
    exactly on the centre, and the spread of the per-chain ESS."""
    from ebmlab.utils.workspace import Workspace

    _, cfg = compose_job(["experiment=ab/tables1to5_ess", "scale=paper", f"ab_target={target}"])
    model = build(cfg.model, "model")
    rows = []
    # run.n_steps=40000 (task.n_steps=40000 in directories made before issue 44)
    for d in sorted(TABLE_RUNS.glob(f"ab_target={target},sampler=*,seed=0,*.n_steps=40000")):
        ck, res = Workspace(d).load(), d / "results.json"
        if not isinstance(ck, dict) or not res.exists():
            continue
        m = json.loads(res.read_text())["metrics"]
        x = ck["task"]["x"].reshape(ck["task"]["x"].shape[0], -1)
        rows.append(
            {
                "sampler": d.name.split("sampler=")[1].split(",")[0],
                "f_mean": float(model.log_prob(x).mean()),
                "at_centre": float((x == model.b).all(1).float().mean()),
                "ess_n": float(m["ess_n"]),
                "ess_mean": float(m["ess"]),
                "ess_std": float(m["ess_std"]),
                "jump": float(m["jump"]),
            }
        )
    return rows


def table_summary(target: str, rows: list[dict]) -> str:
    lines = [
        f"## The table's runs on {target}: where the chains end",
        "",
        "f(x) is 0 at the centre b and negative elsewhere. ESS over chains: mean and standard "
        "deviation of the per-chain ESS (of the Hamming statistic) behind ESS_n.",
        "",
        "| sampler | mean f(x) of the final states | chains on the centre | ESS_n | per-chain ESS, "
        "mean +- sd | mean jump per step |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['sampler']} | {r['f_mean']:.2f} | {r['at_centre']:.2f} | {r['ess_n']:,.0f} "
            f"| {r['ess_mean']:,.0f} +- {r['ess_std']:,.0f} | {r['jump']:.4f} |"
        )
    return "\n".join(lines) + "\n"


def summary(records: list[dict]) -> str:
    r0 = records[0]
    lines = [
        "# ESS of four statistics on the rotated lattice Gaussian",
        "",
        f"`python scripts/investigations/ab_ess_statistic.py` — {r0['chains']} chains, "
        f"{r0['burn_in']:,} burn-in + {r0['steps']:,} steps, seed {r0['seed']} (the tables: 100 "
        "chains, 20,000 + 20,000). ESS per 10,000 queries, averaged over chains (per coordinate: "
        "also over coordinates).",
        "",
        "| target | sampler | " + " | ".join(STATS) + " | mean Hamming | coordinate sd "
        "| fraction at 10 |",
        "|---|---|" + "---|" * (len(STATS) + 3),
    ]
    for r in records:
        vals = " | ".join(f"{r['ess_n'][k]:,.1f}" for k in STATS)
        lines.append(
            f"| {r['target']} | {r['sampler']} | {vals} | {r['hamming_mean']:.1f} "
            f"| {r['coordinate_sd_mean']:.3f} | {r['fraction_at_centre']:.3f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--targets", nargs="+", default=["rotated_medium", "rotated_high"])
    ap.add_argument("--samplers", nargs="+", default=["dmala", "ab_1st", "ab_trace"])
    ap.add_argument("--chains", type=int, default=50)
    ap.add_argument("--burn-in", type=int, default=20000)
    ap.add_argument("--steps", type=int, default=10000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--table-runs-only", action="store_true", help="only summarise the table's own runs"
    )
    a = ap.parse_args(argv)
    OUT.mkdir(parents=True, exist_ok=True)
    if a.table_runs_only:
        text = "".join(table_summary(t, table_runs(t)) + "\n" for t in a.targets)
        (OUT / f"table_runs_{'_'.join(a.targets)}.md").write_text(text)
        print(text)
        return
    records = []
    for t in a.targets:
        for s in a.samplers:
            path = OUT / f"{t}_{s}.json"
            if path.exists():  # resumable: a finished pair is kept
                rec = json.loads(path.read_text())
                same = (rec["chains"], rec["burn_in"], rec["steps"], rec["seed"])
                if same == (a.chains, a.burn_in, a.steps, a.seed):
                    records.append(rec)
                    continue
            rec = run_one(t, s, a.chains, a.burn_in, a.steps, a.seed)
            if not all(math.isfinite(v) for v in rec["ess_n"].values()):
                raise SystemExit(f"non-finite ESS for {t} {s}: {rec['ess_n']}")
            path.write_text(json.dumps(rec, indent=1))
            records.append(rec)
            print(json.dumps({k: rec[k] for k in ("target", "sampler", "ess_n")}))
    text = summary(records)
    for t in a.targets:
        rows = table_runs(t)
        if rows:
            text += "\n" + table_summary(t, rows)
    (OUT / "summary.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
