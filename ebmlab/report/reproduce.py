"""``make reproduce CLAIMS=dlp``: run the experiments behind a paper's claims (resuming what is
done), judge every claim and write ``outputs/reproduction/<paper>.md``.

The report lists, per claim: the paper's value or ordering, ours (mean +/- std over seeds),
the tolerance, the verdict (reproduced / not reproduced / not run, with why), the wall time
of the runs behind it and their first figure; a header gives the scale and hardware, and a
closing section the exact commands. A claim may carry a ``finding:`` (what an investigation
of a non-reproduced claim established); it is printed under the table.

With ``--run`` the claims' selectors become sweeps (:func:`plan`): each selector is sent to
the experiment it names, and a pin the experiment runs anyway is dropped, so a claim that
names a default never launches a second copy of a run; ``--dry-run`` prints them.
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from ebmlab.report.claims import (
    NOT_RUN,
    Verdict,
    ignored_override,
    judge,
    load_claims,
    matches,
    papers,
    same_value,
)
from ebmlab.report.records import (
    CARRIED_RUNS,
    DEVIATIONS,
    Earlier,
    archive_bench,
    archive_runs,
    bench_name,
    bench_recorded,
    carry,
    collect_parked,
    collect_recorded,
    earlier_report,
    failed_recorded,
    fewer_runs,
    records_root,
    verdict_of,
)
from ebmlab.report.runs import collect_unfinished, cpu_share_note
from ebmlab.report.spec import sweep_dir, sweep_keys
from ebmlab.utils.config import compose_job


def _target(claim: dict, sel: dict) -> str:
    """The experiment a selector's runs belong to (``experiment: X`` names another one)."""
    return str(sel.get("experiment", claim["experiment"]))


def experiments(claims: list[dict]) -> dict[str, int]:
    """Experiment -> seeds its claims need (the most any claim asks for), including the
    experiments a selector names (``experiment: X``)."""
    out: dict[str, int] = {}
    for c in claims:
        for e in [c["experiment"]] + [_target(c, s) for s in selectors(c)]:
            out[e] = max(out.get(e, 1), int(c.get("seeds", 1)))
    return out


def selectors(claim: dict) -> list[dict]:
    """Every run selector a claim names."""
    sels = [claim[k] for k in ("where", "numerator", "denominator") if claim.get(k)]
    for entry in claim.get("order", []) or []:
        sels += entry if isinstance(entry, list) else [entry]
    return sels


class Defaults:
    """What an experiment runs with when a key is not given: the composed config (with its
    ``when:`` settings applied) for a set of command-line pins, cached per pin set."""

    def __init__(self, experiment: str, scale: str):
        self.experiment, self.scale = experiment, scale
        self._cache: dict[frozenset, tuple[dict, DictConfig]] = {}

    def _composed(self, pins: dict) -> tuple[dict, DictConfig]:
        key = frozenset((k, str(v)) for k, v in pins.items())
        if key not in self._cache:
            pins_ = [f"{k}={v}" for k, v in pins.items()]
            self._cache[key] = compose_job(
                [f"experiment={self.experiment}", f"scale={self.scale}", *pins_]
            )
        return self._cache[key]

    def is_default(self, key: str, value, pins: dict) -> bool:
        """Whether ``key=value`` is what the experiment runs anyway given the other ``pins``."""
        choices, cfg = self._composed(pins)
        if key in choices:
            return str(choices[key]) == str(value)
        HydraConfig.instance().set_config(cfg)
        node = OmegaConf.select(cfg, key, default=None, throw_on_resolution_failure=False)
        return node is not None and not OmegaConf.is_config(node) and same_value(str(node), value)


def plan(claims: list[dict], experiment: str, scale: str) -> list[dict[str, list]]:
    """The sweeps that produce exactly the runs the claims select in ``experiment``, each a
    grid (key -> values) whose every point is wanted.

    A pinned key that the experiment does not sweep and whose value it runs anyway (its
    default after the ``when:`` settings) is dropped, so that a selector naming a default
    reuses the experiment's own runs instead of launching the same run a second time under
    another directory name. The experiment's own sweep covers the keys no selector fixes.
    """
    swept = sweep_keys(experiment)
    defaults = Defaults(experiment, scale)
    points: list[dict] = []
    for c in claims:
        if c.get("run_by") or c.get("needs"):
            continue
        for sel in selectors(c):
            if _target(c, sel) != experiment:
                continue
            point = {k: v for k, v in sel.items() if k != "experiment"}
            for k in sorted(point):
                rest = {j: w for j, w in point.items() if j != k}
                if k not in swept and defaults.is_default(k, point[k], rest):
                    point = rest
            if point not in points:
                points.append(point)
    by_keys: dict[tuple, list[dict]] = {}
    for p in points:
        by_keys.setdefault(tuple(sorted(p)), []).append(p)
    return [g for keys, pts in by_keys.items() for g in _grids(list(keys), pts)]


def _grids(keys: list[str], points: list[dict]) -> list[dict[str, list]]:
    """Cover ``points`` (all with ``keys``) by grids with no unwanted point: one grid when
    the points form a full product, else one grid per setting of all keys but the one with
    the most values."""
    values = {k: list(dict.fromkeys(p[k] for p in points)) for k in keys}
    size = 1
    for vs in values.values():
        size *= len(vs)
    if size == len(points):
        return [values]
    axis = max(keys, key=lambda k: len(values[k]))
    rows: dict[tuple, dict[str, list]] = {}
    for p in points:
        row = rows.setdefault(
            tuple(str(p[k]) for k in keys if k != axis),
            {k: ([] if k == axis else [p[k]]) for k in keys},
        )
        row[axis].append(p[axis])
    return list(rows.values())


def claim_runs(claim: dict, runs_by_exp: dict[str, list[dict]]) -> list[dict]:
    """The runs a claim is judged on: its experiment's, plus those of every experiment one of
    its selectors names (``experiment: X``), so one claim can compare two experiments."""
    names = [claim["experiment"]] + [s["experiment"] for s in selectors(claim) if "experiment" in s]
    return [r for e in dict.fromkeys(names) for r in runs_by_exp[e]]


def run_sweep(
    experiment: str, scale: str, seeds: int, grid: dict, extra: list[str], dry_run: bool = False
) -> int:
    """``python -m ebmlab.run -m experiment=... scale=... <grid> seed=0,..,n-1``; finished
    runs return at once, interrupted ones resume. Returns the sweep's exit code (with
    ``dry_run`` the command is only printed)."""
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
    return 0 if dry_run else subprocess.run(cmd).returncode


def off_protocol(claims: list[dict], runs_by_exp: dict[str, list[dict]]) -> dict[str, Counter]:
    """Experiment -> Counter of the command-line settings its runs used that no claim selects
    and that are not the seed (e.g. ``task.n_steps=20000`` for a declared shorter run), so a
    report never presents a shortened run as the paper's protocol."""
    chosen = {k for c in claims for s in selectors(c) for k in s}
    out: dict[str, Counter] = {}
    for exp, runs in runs_by_exp.items():
        extra = Counter(
            f"{k}={v}"
            for r in runs
            for k, v in r["overrides"].items()
            if k not in chosen and not ignored_override(k)
        )
        if extra:
            out[exp] = extra
    return out


def _hardware(runs: list[dict]) -> str:
    hw = sorted({r["hardware"] for r in runs if r.get("hardware")})
    return ", ".join(hw) or f"{platform.machine()} ({os.cpu_count()} cores)"


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _meant_for(v, incomplete: list[dict]) -> list[dict]:
    """The runs (finished or not) whose settings match one of the claim's selectors."""
    return [r for r in incomplete if any(matches(r, sel) for sel in selectors(v.claim))]


def _with_incomplete(v, incomplete: list[dict]) -> str:
    """A 'not run' reason extended by the failed and the unfinished jobs that were meant for
    the claim (their settings match one of its selectors), so that a failure is reported, not
    hidden, and a run on its way is said to be."""
    hits = _meant_for(v, incomplete)
    notes = [
        f"the run {r['run_dir'].name} failed: {r['failed']}"
        if "failed" in r
        else f"the run {r['run_dir'].name} is unfinished ({r['unfinished']})"
        for r in hits
    ]
    return "; ".join([v.why, *notes]) if notes else v.why


def _with_on_its_way(v, incomplete: list[dict]) -> str:
    """A judged verdict's reason extended by the unfinished jobs meant for the claim (a
    longer run at the paper's settings on its way, say): the verdict may change when they land."""
    hits = [r for r in _meant_for(v, incomplete) if "failed" not in r]
    notes = [f"the run {r['run_dir'].name} is unfinished ({r['unfinished']})" for r in hits]
    if not notes:
        return v.why
    on_way = "; ".join(notes) + "; the verdict may change when it lands"
    return f"{v.why}; {on_way}" if v.why else on_way


def _with_warnings(v, runs: list[dict]) -> str:
    """A judged verdict's reason extended by the warnings of the runs it was judged on
    (``results.json`` ``warnings``, e.g. frozen chains): finite numbers that may mislead."""
    hits = [r for r in _meant_for(v, runs) if r.get("warnings")]
    notes = [f"warning from the run {r['run_dir'].name}: {w}" for r in hits for w in r["warnings"]]
    return "; ".join([v.why, *notes] if v.why else notes)


def claim_experiments(claims: list[dict]) -> list[str]:
    """Every experiment whose runs the claims read (selectors may name another's)."""
    names = set(experiments(claims))
    for c in claims:
        names |= {s["experiment"] for s in selectors(c) if "experiment" in s}
    return sorted(names)


@dataclass
class Judged:
    """A paper's claims judged on the runs there are: the verdicts, and the runs behind them
    (per experiment, and per benchmark for ``bench:`` claims)."""

    verdicts: list[Verdict]
    runs_by_exp: dict[str, list[dict]]
    rows_by_bench: dict[str, list[dict]]

    @property
    def runs(self) -> list[dict]:
        return [r for rs in [*self.runs_by_exp.values(), *self.rows_by_bench.values()] for r in rs]


def judge_claims(claims: list[dict], root: Path, scale: str) -> Judged:
    """Judge each claim on the finished runs under ``root`` (live or recorded); a claim left
    "not run" names the failed or unfinished jobs meant for it, a judged one its unfinished ones."""
    names = claim_experiments(claims)
    runs_by_exp = {e: collect_recorded(root, e, scale) for e in names}
    selected: dict[str, set[str]] = {}  # experiment -> keys its runs are selected on
    for c in claims:
        for sel in selectors(c):
            selected.setdefault(sel.get("experiment", c["experiment"]), set()).update(sel)
    incomplete_by_exp = {  # jobs that failed, and jobs still running or interrupted
        e: failed_recorded(root, e, scale)
        + collect_unfinished(sweep_dir(root, e, scale))
        + collect_parked(root, e, scale)
        for e in names
    }
    for exp, runs in runs_by_exp.items():
        swept = frozenset(sweep_keys(exp))
        variant_keys = frozenset(selected.get(exp, set()) - swept - {"experiment", "scale", "seed"})
        for r in [*runs, *incomplete_by_exp[exp]]:
            r["variant_keys"], r["sweep_keys"] = variant_keys, swept
    benches = {c["bench"] for c in claims if c.get("bench")}
    rows_by_bench = {b: bench_recorded(root, bench_name(b, scale)) for b in sorted(benches)}
    verdicts = [
        judge(c, rows_by_bench[c["bench"]] if c.get("bench") else claim_runs(c, runs_by_exp))
        for c in claims
    ]
    for v in verdicts:
        if v.claim.get("bench"):
            continue
        incomplete = claim_runs(v.claim, incomplete_by_exp)
        if v.verdict == NOT_RUN:
            v.why = _with_incomplete(v, incomplete)
        else:
            v.why = _with_warnings(v, claim_runs(v.claim, runs_by_exp))
            v.why = _with_on_its_way(v, incomplete)
    return Judged(verdicts, runs_by_exp, rows_by_bench)


def _row(v: Verdict) -> str:
    """A verdict as a row of the report's table."""
    c = v.claim
    fig = f"[png]({v.figures[0]})" if v.figures else ""
    verdict = f"**{v.verdict}**" + (f": {v.why}" if v.why else "")
    return (
        f"| `{c['id']}`: {_cell(c['text'])} | {_cell(c.get('source', ''))} | "
        f"{_cell(v.paper)} | {_cell(v.ours)} | {_cell(v.tolerance)} | {_cell(verdict)} | "
        f"{v.seconds:.0f} | {fig} |"
    )


def _header(
    paper_name: str,
    scale: str,
    root: Path,
    runs: list[dict],
    carried: list[str],
    before: Earlier,
    counts: Counter,
) -> list[str]:
    n_kept = sum(records_root(root) in r["run_dir"].parents for r in runs)
    return [
        f"# Reproduction: {paper_name}",
        "",
        f"Scale: **{scale}**. Hardware: {_hardware(runs)}. "
        f"Generated {time.strftime('%Y-%m-%d %H:%M')} from {len(runs)} finished runs under "
        f"`{root}` ({n_kept} of them from their records in `{records_root(root)}`)."
        + (
            f" {len(carried)} {'verdict is' if len(carried) == 1 else 'verdicts are'} carried"
            f" over from the report of {before.when} "
            f"(marked), made on {before.hardware}: their runs predate the records and are not "
            "on this machine."
            if carried
            else ""
        )
        + (f" {note}" if (note := cpu_share_note(runs)) else ""),
        "",
        "Verdicts: "
        + ", ".join(f"{k}: {counts.get(k, 0)}" for k in ("reproduced", "not reproduced", "not run"))
        + f", carried over: {len(carried)}",
        "",
    ]


def _deviations(
    claims: list[dict], runs_by_exp: dict[str, list[dict]], carried: list[str], before: Earlier
) -> list[str]:
    """The declared settings other than the paper's, of these runs and of the carried ones."""
    lines = []
    deviations = off_protocol(claims, runs_by_exp)
    if deviations:
        lines += [
            f"{DEVIATIONS} (declared; a claim judges them where no run at the paper's "
            "settings matches it, and never pools two settings):",
            "",
        ]
        for exp, extra in deviations.items():
            settings = ", ".join(f"`{k}` ({n} runs)" for k, n in sorted(extra.items()))
            lines.append(f"- {exp}: {settings}")
        lines.append("")
    if carried and before.deviations:
        lines += [CARRIED_RUNS.format(before.when), "", *before.deviations, ""]
    return lines


# What a claim says beside its numbers, in the order a reader needs it: how the run differs
# from the paper's, how the paper's value or tolerance was read, and what was found.
NOTE_KEYS = ("scale_note", "note", "tolerance_note", "finding")


def _notes_and_commands(
    paper: str, scale: str, claims: list[dict], verdicts: list[Verdict]
) -> list[str]:
    lines = []
    notes = [v for v in verdicts if any(v.claim.get(key) for key in NOTE_KEYS)]
    if notes:
        lines += ["", "## Findings, notes and declared deviations", ""]
        for v in notes:
            for key in NOTE_KEYS:
                if v.claim.get(key):
                    lines.append(f"- `{v.claim['id']}` ({key.replace('_', ' ')}): {v.claim[key]}")
    outside = dict.fromkeys(c["run_by"] for c in claims if c.get("run_by"))
    lines += ["", "## Commands", "", "```", f"make reproduce CLAIMS={paper} SCALE={scale}"]
    return lines + [*outside, "```"]


def _warn(paper: str, claims: list[dict], rows: dict[str, str], before: Earlier) -> None:
    """Say on the console what a reader of the report should act on: rows that replace a
    carried row with fewer runs, and non-reproduced claims without a finding."""
    thinner = {
        cid: pairs for cid in rows if (pairs := fewer_runs(rows[cid], before.rows.get(cid, "")))
    }
    if thinner:
        print(
            f"{paper}: {len(thinner)} claims replace a carried row with fewer runs (re-run the "
            "missing seeds): "
            + ", ".join(
                f"{cid} (" + ", ".join(f"n={a} where it had {b}" for a, b in pairs) + ")"
                for cid, pairs in thinner.items()
            )
        )
    unexplained = unexplained_failures(claims, rows)
    if unexplained:
        print(
            f"{paper}: {len(unexplained)} claims are not reproduced and have no `finding:` in "
            f"conf/claims/{paper}.yaml: " + ", ".join(unexplained)
        )


def write_report(
    paper: str, scale: str, root: Path, out_dir: Path, earlier: str | None = None
) -> Path:
    """Judge ``paper``'s claims on the runs under ``root`` (live or recorded) and write
    ``<out_dir>/<paper>.md``. ``earlier`` is the text of an assembled report: a claim left
    "not run" here keeps its row there if that row has a verdict (:func:`records.carry`)."""
    data = load_claims(paper)
    claims = data["claims"]
    judged = judge_claims(claims, root, scale)
    rows = {v.claim["id"]: _row(v) for v in judged.verdicts}
    before = earlier_report(earlier or "", data["paper"])
    carried = [
        cid
        for cid, row in rows.items()
        if verdict_of(row) == NOT_RUN
        and verdict_of(before.rows.get(cid, "")) not in (None, NOT_RUN)
    ]
    for cid in carried:
        rows[cid] = carry(before.rows[cid], before.when)
    counts = Counter(verdict_of(row) for row in rows.values())
    lines = [
        *_header(data["paper"], scale, root, judged.runs, carried, before, counts),
        *_deviations(claims, judged.runs_by_exp, carried, before),
        "| claim | source | paper | ours | tolerance | verdict | wall s | figure |",
        "|---|---|---|---|---|---|---|---|",
        *rows.values(),
        *_notes_and_commands(paper, scale, claims, judged.verdicts),
    ]
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{paper}.md"
    path.write_text("\n".join(lines))
    not_run = counts.get(NOT_RUN, 0)
    print(f"{paper}: {dict(counts)} -> {path}" + (f" ({not_run} not run)" if not_run else ""))
    _warn(paper, claims, rows, before)
    return path


def unexplained_failures(claims: list[dict], rows: dict[str, str]) -> list[str]:
    """Ids of the claims whose row says "not reproduced" but which carry no ``finding:``: a
    claim that does not reproduce is a finding to investigate and to write down."""
    return [
        c["id"]
        for c in claims
        if verdict_of(rows.get(c["id"], "")) == "not reproduced" and not c.get("finding")
    ]


SUMMARY_COLUMNS = ("reproduced", "not reproduced", "not run", "carried over")
SUMMARY_HEADER = "| paper | " + " | ".join(SUMMARY_COLUMNS) + " |"
SUMMARY_RULE = "|---" * (len(SUMMARY_COLUMNS) + 1) + "|"
OLD_SUMMARY_HEADER = "| paper | reproduced | not reproduced | not run |"  # before "carried over"
FIRST_REPORT = "## Reproduction: "


def _verdict_counts(report: str) -> list[str]:
    """The counts of a report's ``Verdicts:`` line, in SUMMARY_HEADER's order (a report
    written before verdicts were carried over counts none)."""
    line = next(ln for ln in report.splitlines() if ln.startswith("Verdicts: "))
    counts = dict(part.rsplit(": ", 1) for part in line[len("Verdicts: ") :].split(", "))
    return [counts.get(k, "0") for k in SUMMARY_COLUMNS]


def assemble(into: Path, reports: dict[str, Path]) -> None:
    """Rewrite the measured part of a hand-written report file (``docs/reproduction.md``).

    What precedes the first ``## Reproduction:`` heading of ``into`` is kept, except that the
    rows of its summary table (SUMMARY_HEADER, or the older OLD_SUMMARY_HEADER, which gains
    the last column; a row belongs to the paper whose key is the first word of its first cell,
    case-insensitively; a missing paper gets a row) take the reports' verdict counts; then each
    report follows, in the table's order, its headings one level down.
    """
    text = into.read_text() if into.exists() else "# Reproduction report (measured)\n\n"
    cut = text.find("\n" + FIRST_REPORT)
    lines = (text if cut < 0 else text[: cut + 1]).rstrip("\n").split("\n")
    bodies = {k: path.read_text() for k, path in reports.items()}
    if OLD_SUMMARY_HEADER in lines:  # a table of four columns gains the fifth
        i = lines.index(OLD_SUMMARY_HEADER)
        lines[i : i + 2] = [SUMMARY_HEADER, SUMMARY_RULE]
    if SUMMARY_HEADER not in lines:
        lines += ["", SUMMARY_HEADER, SUMMARY_RULE]
    at = lines.index(SUMMARY_HEADER) + 2
    end = at
    while end < len(lines) and lines[end].startswith("|"):
        end += 1
    rows, order = lines[at:end], []
    for i, row in enumerate(rows):
        label = row.strip("|").split("|")[0].strip()
        key = next((k for k in bodies if label.split(" ")[0].lower() == k.lower()), None)
        if key is not None and key not in order:
            rows[i] = "| " + " | ".join([label, *_verdict_counts(bodies[key])]) + " |"
            order.append(key)
    new = [k for k in bodies if k not in order]
    rows += ["| " + " | ".join([k, *_verdict_counts(bodies[k])]) + " |" for k in new]
    out = lines[:at] + rows + lines[end:]
    for body in (bodies[k] for k in order + new):  # in the summary table's order
        out.append("")
        fenced = False
        for ln in body.rstrip("\n").split("\n"):
            fenced ^= ln.startswith("```")
            out.append("#" + ln if ln.startswith("#") and not fenced else ln)
    into.write_text("\n".join(out) + "\n")


def reproduce(
    which: str,
    scale: str,
    root: Path,
    out_dir: Path,
    run: bool,
    only: list[str],
    extra: list[str],
    dry_run: bool = False,
    into: Path | None = None,
) -> int:
    """Judge (and with ``run`` first run) the claims of ``which`` (a paper or ``all``); with
    ``into``, also rewrite that file's measured part from the reports (:func:`assemble`)."""
    names = papers() if which == "all" else [which]
    worst = 0
    reports = {}
    earlier = into.read_text() if into is not None and into.exists() else None
    for paper in names:
        if run:
            claims = load_claims(paper)["claims"]
            for exp, seeds in experiments(claims).items():
                if only and exp not in only:
                    continue
                for grid in plan(claims, exp, scale):
                    worst = max(worst, run_sweep(exp, scale, seeds, grid, extra, dry_run))
        if not dry_run:
            claims = load_claims(paper)["claims"]
            for exp in claim_experiments(claims):
                archive_runs(root, exp, scale)
            for bench in {c["bench"] for c in claims if c.get("bench")}:
                archive_bench(root, bench_name(bench, scale))
            reports[paper] = write_report(paper, scale, root, out_dir, earlier)
    if into is not None and reports:  # every paper's latest report, not only this call's
        assemble(into, {p: out_dir / f"{p}.md" for p in papers() if (out_dir / f"{p}.md").exists()})
        print(f"reports assembled into {into}")
    return worst
