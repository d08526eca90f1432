"""Compare the results.json of two sets of run directories, metric by metric.

    python scripts/compare_results.py BASE_DIR NEW_DIR [--map old=new ...]

Each argument directory holds one sub-directory per run (with a results.json). Timing
metrics (seconds, per-second rates, time per iteration) are listed but not counted as
differences. Used to check that a refactor leaves every result unchanged for a fixed seed.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from ebmlab.utils.jsonio import field, read_json

TIMING = ("seconds", "per_second", "time_per", "ess_t", "_time", "wall")


def is_timing(key: str) -> bool:
    return any(t in key for t in TIMING)


def load(d: Path) -> dict:
    path = d / "results.json"
    return field(read_json(path, "the run's results"), "metrics", path, "the run's results")


def compare(base: dict, new: dict) -> list[tuple[str, object, object, str]]:
    rows = []
    for k in sorted(set(base) | set(new)):
        a, b = base.get(k, "<absent>"), new.get(k, "<absent>")
        if is_timing(k):
            status = "timing"
        elif isinstance(a, float) and isinstance(b, float):
            status = (
                "same"
                if a == b or (math.isnan(a) and math.isnan(b))
                else (f"DIFF (rel {abs(a - b) / max(abs(a), 1e-300):.1e})")
            )
        else:
            status = "same" if a == b else "DIFF"
        rows.append((k, a, b, status))
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("base", type=Path)
    ap.add_argument("new", type=Path)
    ap.add_argument("--only-diff", action="store_true", help="print differing metrics only")
    args = ap.parse_args(argv)
    n_diff = 0
    for d in sorted(p for p in args.base.iterdir() if (p / "results.json").exists()):
        other = args.new / d.name
        if not (other / "results.json").exists():
            print(f"## {d.name}: no new run")
            continue
        rows = compare(load(d), load(other))
        diffs = [r for r in rows if r[3].startswith("DIFF")]
        n_diff += len(diffs)
        print(
            f"## {d.name}: {'identical' if not diffs else f'{len(diffs)} differ'} "
            f"(timings excluded)"
        )
        for k, a, b, s in rows:
            if not args.only_diff or s.startswith("DIFF"):
                print(f"  {k:<32} {a!s:<24} {b!s:<24} {s}")
    return 1 if n_diff else 0


if __name__ == "__main__":
    raise SystemExit(main())
