"""What a table or figure needs, read from the experiment's ``report:`` node.

``conf/experiment/<paper>/<name>.yaml`` holds::

    report:
      tables:                       # one markdown + CSV table each (and curve figures)
        - name: table               # output file stem (default "table")
          title: ...                # the scale is appended: "(smoke scale; <smoke_note>)"
          smoke_note: ...           # optional, shown at smoke scale only
          group: [sampler, ...]     # row keys: overrides, group choices or dotted config keys
          metrics: [...]            # results.json metrics, mean ± std over seeds
          curve: [...]              # metrics.jsonl series drawn against `x` (default step, seconds)
          paper: <name>             # a table of the claims files: conf/claims/*.yaml `tables:`
          where: {key: [values]}    # keep only these runs
          per: dataset              # one table per value of this key
          include: [other/experiment]       # add that experiment's runs (same scale)
          experiments: [other/experiment]   # use only these experiments' runs
          optional: true            # no runs: skip silently
      figures:                      # ebmlab.report.figures.FIGURES[kind]
        - {kind: ..., name: ..., title: ..., per: ..., include: [...], options: {...}}
      inputs:                       # runs this experiment's runs start from (a chained sweep):
        trained_ebm: {experiment: dlp/table1_ebm_learning, where: {sampler: gwg}, key: dataset}
"""

from __future__ import annotations

from pathlib import Path

import yaml

from ebmlab.report.claims import paper_table
from ebmlab.runs.layout import (  # noqa: F401  (the run layout, re-exported for the report)
    experiment_exists,
    experiment_file,
    sweep_dir,
    sweep_keys,
)

REPO = Path(__file__).resolve().parents[2]
SCALES = ("paper", "smoke")


def report_spec(experiment: str) -> dict:
    """The ``report:`` node of an experiment, with list defaults filled in."""
    node = (yaml.safe_load(experiment_file(experiment).read_text()) or {}).get("report")
    if not isinstance(node, dict):
        raise SystemExit(f"experiment {experiment!r} has no `report:` node")
    return {
        "tables": list(node.get("tables") or []),
        "figures": list(node.get("figures") or []),
        "inputs": dict(node.get("inputs") or {}),
    }


def out_dir(root: Path, experiment: str, scale: str) -> Path:
    return Path(root) / "tables" / experiment / scale


def title(item: dict, scale: str, extra: str = "") -> str:
    """The item's title with the scale (and the smoke note at smoke scale) appended."""
    note = f"{scale} scale"
    if scale == "smoke" and item.get("smoke_note"):
        note += f": {item['smoke_note']}"
    base = item.get("title", "")
    if extra:
        base = f"{base}, {extra}" if base else extra
    return f"{base} ({note})" if base else f"({note})"


def experiments_of(item: dict, experiment: str) -> list[str]:
    """The experiments whose runs an item uses: itself (or ``experiments``) + ``include``."""
    own = list(item.get("experiments") or [experiment])
    return own + [e for e in item.get("include") or [] if e not in own]


def load_paper(item: dict) -> dict | None:
    """A table's paper values (row label -> metric -> number): ``paper: <name>`` names a table
    of the claims files (:func:`~ebmlab.report.claims.paper_table`)."""
    name = item.get("paper")
    return paper_table(str(name)) if name else None
