"""Compare the ratios of two or more ``bench_samplers`` records (``outputs/bench/<name>.json``).

For every (model, chains, ratio) prints each run's median ratio by CPU time and by wall
time, and the relative difference (max - min) / mean across the runs; ``--tol`` (default
0.10) flags differences above it and sets the exit status (1 when any primary-clock ratio
differs by more).

    python -m benchmarks.compare_runs outputs/bench/samplers_run1.json \\
        outputs/bench/samplers_run2.json [--tol 0.1] [--out outputs/bench/agreement.md]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def rel_spread(values: list[float]) -> float:
    """(max - min) / mean of ``values`` (0 for one value)."""
    mean = sum(values) / len(values)
    return (max(values) - min(values)) / mean if mean else float("inf")


def ratio_table(records: list[dict]) -> dict:
    """{(model label, chains, ratio name): {clock: [median per run]}} over the records'
    common keys, in the first record's order."""
    per_run = []
    for rec in records:
        d = {}
        for c in rec["cases"]:
            for name, r in c["summary"]["ratios"].items():
                d[(c["model_label"], c["chains"], name)] = {
                    k: r[k]["median"] for k in ("cpu", "wall")
                }
        per_run.append(d)
    keys = [k for k in per_run[0] if all(k in d for d in per_run[1:])]
    return {k: {c: [d[k][c] for d in per_run] for c in ("cpu", "wall")} for k in keys}


def compare(records: list[dict], names: list[str], tol: float) -> tuple[str, bool]:
    """Markdown table of the runs' median ratios and their spread; True when all primary
    ratios agree within ``tol``."""
    primary = records[0].get("primary_clock", "cpu")
    table = ratio_table(records)
    runs = " / ".join(names)
    lines = [
        f"Median ratio per run, by CPU time and wall time; spread = (max - min) / mean; "
        f"primary clock {primary}, tolerance {tol:.0%}.\n",
        f"| model | chains | ratio | CPU: {runs} | CPU spread | wall: {runs} | wall spread |",
        "|---|---|---|---|---|---|---|",
    ]
    ok = True
    for (model, chains, name), v in table.items():
        cells = []
        for c in ("cpu", "wall"):
            s = rel_spread(v[c])
            flag = " **!**" if s > tol else ""
            if c == primary and s > tol:
                ok = False
            cells.append(" / ".join(f"{x:.3f}" for x in v[c]))
            cells.append(f"{s:.1%}{flag}")
        lines.append(f"| {model} | {chains} | {name} | " + " | ".join(cells) + " |")
    worst = {
        c: max((rel_spread(v[c]) for v in table.values()), default=0.0) for c in ("cpu", "wall")
    }
    lines.append(
        f"\nLargest spread: CPU {worst['cpu']:.1%}, wall {worst['wall']:.1%}; "
        f"all {primary} ratios within {tol:.0%}: {'yes' if ok else 'NO'}."
    )
    return "\n".join(lines) + "\n", ok


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("records", nargs="+", type=Path)
    ap.add_argument("--tol", type=float, default=0.10)
    ap.add_argument("--out", type=Path, default=None, help="also write the table here")
    a = ap.parse_args(argv)
    records = [json.loads(p.read_text()) for p in a.records]
    md, ok = compare(records, [p.stem for p in a.records], a.tol)
    print(md)
    if a.out is not None:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(md)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
