"""ACS Fig. 6 finding: how much of ACS's faster convergence from the mode start is its tuning.

ACS tunes its schedule (Algorithm 2) for about 10% of the sampling steps BEFORE the logged
trace starts, on the same chains, as the ACS code does (``rbm_sample.py`` and
``rbm_mode_escape.py`` run ``tuning_alg`` / ``run_adaptive_burnin`` on x, then log log-MMD from
the tuned state). So ACS's step 0 is, in moves made, the others' step ``tune_steps``. This
reads finished ``dlp/fig4_rbm_sampling`` runs and compares, per sampler, the mean log-MMD over
the whole trace (the claim's metric, ``log_mmd_mean``) with the mean over an equal budget of
moves: ACS's trace up to step n_steps - tune_steps, the others' from step tune_steps on.

    python scripts/investigations/acs_tuning_head_start.py [--dataset mnist_threshold]
        [--extra task.train_split=test] [--init mode]

Prints a markdown table (mean over the seeds found) and writes it to
outputs/investigations/acs_tuning_head_start/<dataset>_<init>[_<extra>...].md.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from ebmlab.utils.logging import read_metrics

ROOT = Path(__file__).resolve().parents[2]
RUNS = ROOT / "outputs" / "multirun" / "dlp" / "fig4_rbm_sampling" / "paper"
OUT = ROOT / "outputs" / "investigations" / "acs_tuning_head_start"
SAMPLERS = ("acs", "dmala", "gwg", "ab_1st")


def trace(run: Path) -> list[tuple[int, float]]:
    rows = read_metrics(run / "metrics.jsonl")
    return [(int(r["step"]), float(r["log_mmd"])) for r in rows if "log_mmd" in r]


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dataset", default="mnist_threshold")
    ap.add_argument("--init", default="mode")
    ap.add_argument("--extra", nargs="*", default=[], help="further overrides in the run names")
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    a = ap.parse_args(argv)
    found: dict[str, dict] = {}
    for s in SAMPLERS:
        for seed in a.seeds:
            parts = [f"dataset={a.dataset}", f"sampler={s}", f"seed={seed}", f"task.init={a.init}"]
            run = RUNS / ",".join(sorted(parts + a.extra))
            if (run / "results.json").exists():
                m = json.loads((run / "results.json").read_text())["metrics"]
                found.setdefault(s, {})[seed] = (m, trace(run))
    if "acs" not in found:
        raise SystemExit(f"no finished ACS runs under {RUNS} for {a.dataset} {a.init} {a.extra}")
    tune = statistics.median(int(m["tune_steps"]) for m, _ in found["acs"].values())
    lines = [
        f"# ACS's tuning head start: {a.dataset}, init {a.init} {' '.join(a.extra)}",
        "",
        f"ACS tuned for {tune:.0f} steps (median over seeds) before its trace starts. Mean "
        "log-MMD over the trace (the claim's metric) and over an equal budget of moves.",
        "",
        "| sampler | seeds | final log-MMD | mean over the trace | mean over an equal budget |",
        "|---|---|---|---|---|",
    ]
    for s, runs in found.items():
        full, equal, final = [], [], []
        for m, tr in runs.values():
            n = max(step for step, _ in tr)
            if s == "acs":
                pts = [v for step, v in tr if step + tune <= n]
            else:
                pts = [v for step, v in tr if step >= tune]
            full.append(float(m["log_mmd_mean"]))
            equal.append(statistics.mean(pts))
            final.append(float(m["log_mmd"]))
        lines.append(
            f"| {s} | {len(runs)} | {statistics.mean(final):.3f} | {statistics.mean(full):.3f} "
            f"| {statistics.mean(equal):.3f} |"
        )
    text = "\n".join(lines) + "\n"
    OUT.mkdir(parents=True, exist_ok=True)
    extra = "".join(f"_{e.split('.')[-1]}" for e in a.extra)  # e.g. _n_steps=10000
    (OUT / f"{a.dataset}_{a.init}{extra}.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
