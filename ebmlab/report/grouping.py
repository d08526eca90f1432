"""Runs grouped into a table's rows, selected by their settings, and how much CPU they had.

The runs themselves are read by :mod:`ebmlab.runs.rundirs` (run directories and records)."""

from __future__ import annotations

import statistics
from collections import defaultdict

from ebmlab.runs.rundirs import MISSING, key_value
from ebmlab.utils.rundir import LOCATION_KEYS, NON_IDENTITY_KEYS

SHARED_BELOW = 0.9  # a run with less CPU per thread than this shared its cores


def cpu_share_note(runs: list[dict]) -> str:
    """A sentence on how much CPU the runs had (``cpu_share`` in results.json: CPU seconds per
    wall second and thread); "" when none of them says (GPU runs, runs from before it)."""
    shares = [float(r["cpu_share"]) for r in runs if r.get("cpu_share") is not None]
    if not shares:
        return ""
    median, low = statistics.median(shares), min(shares)
    text = f"CPU share per thread: median {median:.2f} over {len(shares)} runs (min {low:.2f})"
    if low < SHARED_BELOW:
        text += (
            f"; under {SHARED_BELOW} the cores were shared, so those runs' seconds are "
            "contended wall time"
        )
    return text + "."


def sort_key(v: str):
    """Numbers numerically (s = 5, 10, 50, 100), then text."""
    try:
        return (0, float(v), "")
    except ValueError:
        return (1, 0.0, v)


def row_keys(runs: list[dict], keys: list[str]) -> list[str]:
    """``keys`` plus every command-line override whose value differs between ``runs`` (the
    seed and the keys that never change a number aside), so runs of different settings never
    share a row: e.g. ``learner.objective=hyvarinen`` beside the default Eq. 3 runs."""
    skip = {"seed", "experiment", "scale", *keys}
    found = sorted({k for r in runs for k in r["overrides"]} - skip)
    extra = [
        k
        for k in found
        if k.split(".")[0] not in NON_IDENTITY_KEYS
        and k.split(".")[-1] not in LOCATION_KEYS
        and len({r["overrides"].get(k, MISSING) for r in runs}) > 1
    ]
    return list(keys) + extra


def group_runs(runs: list[dict], keys: list[str]) -> dict[tuple, list[dict]]:
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for r in runs:
        groups[tuple(key_value(r, k) for k in keys)].append(r)
    return dict(sorted(groups.items(), key=lambda kv: [sort_key(v) for v in kv[0]]))


def select(runs: list[dict], where: dict[str, list] | None) -> list[dict]:
    """The runs whose value of each key in ``where`` is one of the listed values."""
    if not where:
        return runs
    allowed = {k: {str(v) for v in vs} for k, vs in where.items()}
    return [r for r in runs if all(key_value(r, k) in vs for k, vs in allowed.items())]
