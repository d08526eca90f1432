"""``make reproduce CLAIMS=dlp``: run the experiments behind a paper's claims (resuming what is
done), judge every claim and write ``outputs/reproduction/<paper>.md``.

The report lists, per claim: the paper's value or ordering, ours (mean +/- std over seeds),
the tolerance, the verdict (reproduced / not reproduced / not run, with why), the wall time
of the runs behind it and their first figure; a header gives the scale and hardware, and a
closing section the exact commands. A claim may carry a ``finding:`` (what an investigation
of a non-reproduced claim established); it is printed under the table.
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from ebmlab.report.claims import NOT_RUN, judge, load_claims, papers
from ebmlab.report.runs import collect
from ebmlab.report.spec import sweep_dir, sweep_keys
from ebmlab.utils.rundir import NON_IDENTITY_KEYS


def experiments(claims: list[dict]) -> dict[str, int]:
    """Experiment -> seeds its claims need (the most any claim asks for)."""
    out: dict[str, int] = {}
    for c in claims:
        out[c["experiment"]] = max(out.get(c["experiment"], 1), int(c.get("seeds", 1)))
    return out


def selectors(claim: dict) -> list[dict]:
    """Every run selector a claim names."""
    sels = [claim[k] for k in ("where", "numerator", "denominator") if claim.get(k)]
    for entry in claim.get("order", []) or []:
        sels += entry if isinstance(entry, list) else [entry]
    return sels


def launches(claims: list[dict], experiment: str) -> list[dict[str, list]]:
    """The sweeps that produce exactly the runs an experiment's claims select: selectors with
    the same keys are merged into one grid (key -> values); the experiment's own sweep covers
    the keys no selector fixes."""
    grids: dict[frozenset, dict[str, list]] = {}
    for c in claims:
        if c["experiment"] != experiment or c.get("run_by") or c.get("needs"):
            continue
        for sel in selectors(c):
            grid = grids.setdefault(frozenset(sel), {k: [] for k in sel})
            for k, v in sel.items():
                if v not in grid[k]:
                    grid[k].append(v)
    return list(grids.values())


def claim_runs(claim: dict, runs_by_exp: dict[str, list[dict]]) -> list[dict]:
    """The runs a claim is judged on: its experiment's, plus those of every experiment one of
    its selectors names (``experiment: X``), so one claim can compare two experiments."""
    names = [claim["experiment"]] + [s["experiment"] for s in selectors(claim) if "experiment" in s]
    return [r for e in dict.fromkeys(names) for r in runs_by_exp[e]]


def run_sweep(experiment: str, scale: str, seeds: int, grid: dict, extra: list[str]) -> int:
    """``python -m ebmlab.run -m experiment=... scale=... <grid> seed=0,..,n-1``; finished
    runs return at once, interrupted ones resume. Returns the sweep's exit code."""
    pins = [f"{k}={','.join(str(v) for v in vals)}" for k, vals in grid.items()]
    cmd = [
        sys.executable,
        "-m",
        "ebmlab.run",
        "-m",
        f"experiment={experiment}",
        f"scale={scale}",
        *pins,
        "seed=" + ",".join(str(s) for s in range(seeds)),
        "progress=false",
        *extra,
    ]
    print("+", " ".join(cmd), flush=True)
    return subprocess.run(cmd).returncode


def off_protocol(claims: list[dict], runs_by_exp: dict[str, list[dict]]) -> dict[str, Counter]:
    """Experiment -> Counter of the command-line settings its runs used that no claim selects
    and that are not the seed (e.g. ``task.n_steps=20000`` for a declared shorter run), so a
    report never presents a shortened run as the paper's protocol."""
    chosen = {"seed"} | {k for c in claims for s in selectors(c) for k in s}
    chosen |= set(NON_IDENTITY_KEYS)
    out: dict[str, Counter] = {}
    for exp, runs in runs_by_exp.items():
        extra = Counter(
            f"{k}={v}"
            for r in runs
            for k, v in r["overrides"].items()
            if k not in chosen and k not in ("experiment", "scale")
        )
        if extra:
            out[exp] = extra
    return out


def _hardware(runs: list[dict]) -> str:
    hw = sorted({r["hardware"] for r in runs if r.get("hardware")})
    return ", ".join(hw) or f"{platform.machine()} ({os.cpu_count()} cores)"


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def write_report(paper: str, scale: str, root: Path, out_dir: Path) -> Path:
    data = load_claims(paper)
    names = set(experiments(data["claims"]))
    for c in data["claims"]:  # selectors may name runs of another experiment
        names |= {s["experiment"] for s in selectors(c) if "experiment" in s}
    runs_by_exp = {e: collect(sweep_dir(root, e, scale)) for e in sorted(names)}
    selected: dict[str, set[str]] = {}  # experiment -> keys its runs are selected on
    for c in data["claims"]:
        for sel in selectors(c):
            selected.setdefault(sel.get("experiment", c["experiment"]), set()).update(sel)
    for exp, runs in runs_by_exp.items():
        keys = selected.get(exp, set()) - sweep_keys(exp) - {"experiment", "scale", "seed"}
        variant_keys = frozenset(keys)
        for r in runs:
            r["variant_keys"] = variant_keys
    verdicts = [judge(c, claim_runs(c, runs_by_exp)) for c in data["claims"]]
    counts = Counter(v.verdict for v in verdicts)
    all_runs = [r for rs in runs_by_exp.values() for r in rs]  # for the header
    lines = [
        f"# Reproduction: {data['paper']}",
        "",
        f"Scale: **{scale}**. Hardware: {_hardware(all_runs)}. "
        f"Generated {time.strftime('%Y-%m-%d %H:%M')} from {len(all_runs)} finished runs under "
        f"`{root}`.",
        "",
        "Verdicts: "
        + ", ".join(
            f"{k}: {counts.get(k, 0)}" for k in ("reproduced", "not reproduced", "not run")
        ),
        "",
    ]
    deviations = off_protocol(data["claims"], runs_by_exp)
    if deviations:
        lines += [
            "Runs with settings other than the paper's (declared; verdicts below use them):",
            "",
        ]
        for exp, extra in deviations.items():
            settings = ", ".join(f"`{k}` ({n} runs)" for k, n in sorted(extra.items()))
            lines.append(f"- {exp}: {settings}")
        lines.append("")
    lines += [
        "| claim | source | paper | ours | tolerance | verdict | wall s | figure |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for v in verdicts:
        c = v.claim
        fig = f"[png]({v.figures[0]})" if v.figures else ""
        verdict = f"**{v.verdict}**" + (f": {v.why}" if v.why else "")
        lines.append(
            f"| `{c['id']}`: {_cell(c['text'])} | {_cell(c.get('source', ''))} | "
            f"{_cell(v.paper)} | {_cell(v.ours)} | {_cell(v.tolerance)} | {_cell(verdict)} | "
            f"{v.seconds:.0f} | {fig} |"
        )
    notes = [v for v in verdicts if v.claim.get("finding") or v.claim.get("scale_note")]
    if notes:
        lines += ["", "## Findings and declared deviations", ""]
        for v in notes:
            for key in ("scale_note", "finding"):
                if v.claim.get(key):
                    lines.append(f"- `{v.claim['id']}` ({key.replace('_', ' ')}): {v.claim[key]}")
    lines += ["", "## Commands", "", "```", f"make reproduce CLAIMS={paper} SCALE={scale}", "```"]
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{paper}.md"
    path.write_text("\n".join(lines))
    not_run = counts.get(NOT_RUN, 0)
    print(f"{paper}: {dict(counts)} -> {path}" + (f" ({not_run} not run)" if not_run else ""))
    return path


def reproduce(
    which: str, scale: str, root: Path, out_dir: Path, run: bool, only: list[str], extra: list[str]
) -> int:
    """Judge (and with ``run`` first run) the claims of ``which`` (a paper or ``all``)."""
    names = papers() if which == "all" else [which]
    worst = 0
    for paper in names:
        if run:
            claims = load_claims(paper)["claims"]
            for exp, seeds in experiments(claims).items():
                if only and exp not in only:
                    continue
                for grid in launches(claims, exp):
                    worst = max(worst, run_sweep(exp, scale, seeds, grid, extra))
        write_report(paper, scale, root, out_dir)
    return worst
