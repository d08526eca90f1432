"""RMwGGIS Table 1: is the MMD's reported standard error the spread between sample draws?

Two draws of the same trained model (scripts/investigations/rmwggis_temperature.py, sampling
seeds 0 and 1) differed by 2-3 reported standard errors on 2spirals and checkerboard. This
evaluates one trained run at beta = 1 on ``--draws`` sampling seeds (the same 20 Gibbs sweeps
from uniform bits and fresh data as that script) and prints each draw's MMD^2, their standard
deviation and the mean reported standard error.

    python scripts/investigations/rmwggis_mmd_draws.py [--runs 2spirals:rm checkerboard:rmwggis]
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from rmwggis_temperature import EXPERIMENT, evaluate

from ebmlab.runs.rundirs import collect

REPO = Path(__file__).resolve().parents[2]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "--runs", nargs="*", default=["2spirals:rm", "checkerboard:rm", "checkerboard:rmwggis"]
    )
    ap.add_argument("--seed", default="0", help="the training seed of the runs")
    ap.add_argument("--draws", type=int, default=10)
    ap.add_argument("--samples", type=int, default=4000)
    a = ap.parse_args()
    runs = collect(REPO / "outputs" / "multirun" / EXPERIMENT / "paper")
    for spec in a.runs:
        dataset, learner = spec.split(":")
        run = next(
            (
                r
                for r in runs
                if r["overrides"].get("dataset.name") == dataset
                and r["overrides"].get("learner") == learner
                and str(r["overrides"].get("seed")) == a.seed
            ),
            None,
        )
        if run is None:
            raise SystemExit(f"no finished {EXPERIMENT} run for {spec}, seed {a.seed}")
        cells = [
            evaluate(run, [1.0], a.samples, 20, s)["mmd_by_beta"]["1.0"] for s in range(a.draws)
        ]
        vals = [c["mmd"] for c in cells]
        print(f"{dataset} {learner} seed {a.seed}: " + " ".join(f"{v:.4f}" for v in vals))
        print(
            f"  mean {statistics.fmean(vals):.4f}, sd over draws {statistics.stdev(vals):.4f}, "
            f"mean reported SE {statistics.fmean(c['mmd_se'] for c in cells):.4f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
