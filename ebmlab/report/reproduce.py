"""``make reproduce CLAIMS=dlp``: run the experiments behind a paper's claims (resuming what is
done), judge every claim and write ``outputs/reproduction/<paper>.md``.

The report lists, per claim: the paper's value or ordering, ours (mean +/- std over seeds),
the tolerance, the verdict (reproduced / not reproduced / inconclusive / not run, with why;
:mod:`ebmlab.report.claims`), the wall time of the runs behind it and their first figure; a
header gives the scale and hardware, the claims file's declared deviations follow, and a
closing section the exact commands. A claim may carry a ``finding:`` (what an investigation
of a non-reproduced claim established); it is printed under the table.

With ``--run`` the claims' selectors become runs (:func:`points`): each selector is sent to
the experiment it names, and a pin the experiment runs anyway is dropped, so a claim that
names a default never launches a second copy of a run. The runs that have finished (here or
in the committed records, matched by their config hash) are left out, and the rest are
launched in as few sweeps as launch exactly them (:func:`launch_missing`, which says how many
are recorded); ``--dry-run`` prints those sweeps. The launching itself is
:mod:`ebmlab.runs.sweeps`'; this module reads and judges.
"""

from __future__ import annotations

import os
import platform
import re
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from ebmlab.report.claims import (
    NOT_REPRODUCED,
    NOT_RUN,
    VERDICTS,
    Verdict,
    ignored_override,
    judge,
    load_claims,
    matches,
    papers,
)
from ebmlab.report.grouping import cpu_share_note
from ebmlab.runs.layout import experiment_exists, sweep_dir, sweep_keys
from ebmlab.runs.park import collect_parked
from ebmlab.runs.records import (
    archive_bench,
    archive_runs,
    bench_name,
    bench_recorded,
    collect_recorded,
    failed_recorded,
    records_root,
)
from ebmlab.runs.rundirs import collect_unfinished
from ebmlab.runs.sweeps import grids, launch_grids, missing_jobs, run_sweep


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


def points(claims: list[dict], experiment: str) -> list[dict]:
    """The settings (key -> value) the claims' selectors want run in ``experiment``, each once
    (claims run elsewhere or needing what ebmlab lacks want none)."""
    out: list[dict] = []
    for c in claims:
        if c.get("run_by") or c.get("needs"):
            continue
        for sel in selectors(c):
            point = {k: v for k, v in sel.items() if k != "experiment"}
            if _target(c, sel) == experiment and point not in out:
                out.append(point)
    return out


def plan(claims: list[dict], experiment: str, scale: str) -> list[dict[str, list]]:
    """The sweeps that produce exactly the runs the claims select in ``experiment``, each a
    grid (key -> values) whose every point is wanted; a pin the experiment runs anyway is
    dropped (:func:`~ebmlab.runs.sweeps.launch_grids`)."""
    return launch_grids(experiment, scale, points(claims, experiment))


def claim_runs(claim: dict, runs_by_exp: dict[str, list[dict]]) -> list[dict]:
    """The runs a claim is judged on: its experiment's, plus those of every experiment one of
    its selectors names (``experiment: X``), so one claim can compare two experiments."""
    names = [claim["experiment"]] + [s["experiment"] for s in selectors(claim) if "experiment" in s]
    return [r for e in dict.fromkeys(names) for r in runs_by_exp[e]]


def off_protocol(claims: list[dict], runs_by_exp: dict[str, list[dict]]) -> dict[str, Counter]:
    """Experiment -> Counter of the command-line settings its runs used that no claim selects
    and that are not the seed (e.g. ``run.n_steps=20000`` for a declared shorter run), so a
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


DEVIATIONS = "Runs with settings other than the paper's"


def _hardware(runs: list[dict]) -> str:
    hw = sorted({r["hardware"] for r in runs if r.get("hardware")})
    return ", ".join(hw) or f"{platform.machine()} ({os.cpu_count()} cores)"


# an absolute path into a checkout's outputs/ (a failed job's message names its checkpoint)
_MACHINE_PATH = re.compile(r"(?<![\w.])/(?:[^\s/|]+/)+?(outputs/)")


def _cell(text: str) -> str:
    """Text for a table cell: pipes escaped, one line, machine paths made repo-relative."""
    return _MACHINE_PATH.sub(r"\1", str(text)).replace("|", "\\|").replace("\n", " ")


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


def sweep_commands(claim: dict, scale: str) -> list[str]:
    """The sweeps that would produce a claim's runs: one ``python -m ebmlab.run -m`` line per
    experiment and grid of its selectors (every point wanted, :func:`~ebmlab.runs.sweeps.grids`)."""
    seeds = ",".join(str(s) for s in range(int(claim.get("seeds", 1))))
    by_exp: dict[str, list[dict]] = {}
    for sel in selectors(claim):
        point = {k: v for k, v in sel.items() if k != "experiment"}
        pts = by_exp.setdefault(_target(claim, sel), [])
        if point not in pts:
            pts.append(point)
    out = []
    for exp, points in by_exp.items():
        by_keys: dict[tuple, list[dict]] = {}
        for p in points:
            by_keys.setdefault(tuple(sorted(p)), []).append(p)
        for keys, pts in by_keys.items():
            for grid in grids(list(keys), pts):
                pins = " ".join(f"{k}={','.join(str(v) for v in vs)}" for k, vs in grid.items())
                words = ["python -m ebmlab.run -m", f"experiment={exp}", f"scale={scale}", pins]
                out.append(" ".join(w for w in [*words, f"seed={seeds}"] if w))
    return out


def judge_claims(claims: list[dict], root: Path, scale: str, records_only: bool = False) -> Judged:
    """Judge each claim on the finished runs under ``root`` (live or recorded; with
    ``records_only`` the records alone); a claim left "not run" names the failed or unfinished
    jobs meant for it and the sweep that runs it, a judged one its unfinished ones."""
    live = not records_only
    names = claim_experiments(claims)
    runs_by_exp = {e: collect_recorded(root, e, scale, live) for e in names}
    selected: dict[str, set[str]] = {}  # experiment -> keys its runs are selected on
    for c in claims:
        for sel in selectors(c):
            selected.setdefault(sel.get("experiment", c["experiment"]), set()).update(sel)
    incomplete_by_exp = {  # jobs that failed, and jobs still running or interrupted
        e: failed_recorded(root, e, scale, live)
        + (collect_unfinished(sweep_dir(root, e, scale)) if live else [])
        + collect_parked(root, e, scale, live)
        for e in names
    }
    for exp, runs in runs_by_exp.items():
        swept = frozenset(sweep_keys(exp)) if experiment_exists(exp) else frozenset()
        variant_keys = frozenset(selected.get(exp, set()) - swept - {"experiment", "scale", "seed"})
        for r in [*runs, *incomplete_by_exp[exp]]:
            r["variant_keys"], r["sweep_keys"] = variant_keys, swept
    benches = {c["bench"] for c in claims if c.get("bench")}
    rows_by_bench = {b: bench_recorded(root, bench_name(b, scale), live) for b in sorted(benches)}
    verdicts = [
        judge(c, rows_by_bench[c["bench"]] if c.get("bench") else claim_runs(c, runs_by_exp))
        for c in claims
    ]
    for v in verdicts:
        c = v.claim
        if c.get("bench"):
            continue
        incomplete = claim_runs(c, incomplete_by_exp)
        if v.verdict == NOT_RUN:
            v.why = _with_incomplete(v, incomplete)
            if not (c.get("needs") or c.get("run_by") or c.get("excluded")):
                cmds = "; ".join(f"`{cmd}`" for cmd in sweep_commands(c, scale))
                v.why = "; ".join(w for w in (v.why, f"to run it: {cmds}") if w)
        else:
            v.why = _with_warnings(v, claim_runs(c, runs_by_exp))
            v.why = _with_on_its_way(v, incomplete)
    return Judged(verdicts, runs_by_exp, rows_by_bench)


def _display(path) -> str:
    """A path as the report prints it: relative to the working directory where it is below it
    (never a machine's absolute path where it can be helped)."""
    p = Path(path)
    try:
        return p.resolve().relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return p.as_posix()


def _row(v: Verdict, with_figure: bool) -> str:
    """A verdict as a row of the report's table."""
    c = v.claim
    verdict = f"**{v.verdict}**" + (f": {v.why}" if v.why else "")
    cells = [
        f"`{c['id']}`: {_cell(c['text'])}",
        _cell(c.get("source", "")),
        _cell(v.paper),
        _cell(v.ours),
        _cell(v.tolerance),
        _cell(verdict),
        f"{v.seconds:.0f}",
    ]
    if with_figure:
        cells.append(f"[png]({_display(v.figures[0])})" if v.figures else "")
    return "| " + " | ".join(cells) + " |"


def count_verdicts(verdicts: list[Verdict]) -> Counter:
    return Counter(v.verdict for v in verdicts)


def _counts_line(counts: Counter) -> str:
    return "Verdicts: " + ", ".join(f"{k}: {counts.get(k, 0)}" for k in VERDICTS)


def _header(
    paper_name: str, scale: str, root: Path, runs: list[dict], counts: Counter, records_only: bool
) -> list[str]:
    where = (
        f"{len(runs)} recorded runs (the committed records in `records/`)"
        if records_only
        else f"{len(runs)} finished runs under `{_display(root)}` "
        f"({sum(records_root(root) in r['run_dir'].parents for r in runs)} of them from their "
        f"records in `{_display(records_root(root))}`)"
    )
    return [
        f"# Reproduction: {paper_name}",
        "",
        f"Scale: **{scale}**. Hardware: {_hardware(runs)}. "
        f"Generated {time.strftime('%Y-%m-%d %H:%M')} from {where}."
        + (f" {note}" if (note := cpu_share_note(runs)) else ""),
        "",
        _counts_line(counts),
        "",
    ]


def declared_deviations(data: dict) -> list[str]:
    """The claims file's ``deviations:`` (settings where ours differ from the paper's, each
    with key, experiments, ours, the paper's and the reason) as markdown lines."""
    items = data.get("deviations") or []
    if not items:
        return []
    lines = [
        "## Declared deviations from the paper's settings",
        "",
        "| setting | experiments | ours | paper's | why |",
        "|---|---|---|---|---|",
    ]
    for d in items:
        exps = ", ".join(d.get("experiments") or [])
        lines.append(
            f"| `{d['key']}` | {_cell(exps)} | {_cell(d['ours'])} | {_cell(d['paper'])} | "
            f"{_cell(d['reason'])} |"
        )
    return [*lines, ""]


def _deviations(claims: list[dict], runs_by_exp: dict[str, list[dict]]) -> list[str]:
    """The command-line settings other than the paper's that these runs used."""
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
    return lines


# What a claim says beside its numbers, in the order a reader needs it: how the run differs
# from the paper's, how the paper's value or tolerance was read, and what was found.
NOTE_KEYS = ("scale_note", "note", "tolerance_note", "effect_note", "finding")


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


@dataclass
class PaperReport:
    """One paper's report: its key, title, markdown and verdicts."""

    paper: str
    title: str
    text: str
    verdicts: list[Verdict]

    @property
    def counts(self) -> Counter:
        return count_verdicts(self.verdicts)


def build_report(paper: str, scale: str, root: Path, records_only: bool = False) -> PaperReport:
    """Judge ``paper``'s claims on the runs under ``root`` (live or recorded; the records alone
    with ``records_only``) and lay out its report."""
    data = load_claims(paper)
    claims = data["claims"]
    judged = judge_claims(claims, root, scale, records_only)
    with_figure = any(v.figures for v in judged.verdicts)
    head = "| claim | source | paper | ours | tolerance | verdict | wall s |"
    lines = [
        *_header(
            data["paper"], scale, root, judged.runs, count_verdicts(judged.verdicts), records_only
        ),
        *declared_deviations(data),
        *_deviations(claims, judged.runs_by_exp),
        head + (" figure |" if with_figure else ""),
        "|---" * (8 if with_figure else 7) + "|",
        *(_row(v, with_figure) for v in judged.verdicts),
        *_notes_and_commands(paper, scale, claims, judged.verdicts),
    ]
    return PaperReport(paper, data["paper"], "\n".join(lines) + "\n", judged.verdicts)


def write_report(
    paper: str, scale: str, root: Path, out_dir: Path, records_only: bool = False
) -> Path:
    """Judge ``paper``'s claims (:func:`build_report`) and write ``<out_dir>/<paper>.md``."""
    return save_report(build_report(paper, scale, root, records_only), out_dir)


def save_report(rep: PaperReport, out_dir: Path) -> Path:
    """Write a paper's report to ``<out_dir>/<paper>.md`` and say on the console what a reader
    should act on (not reproduced claims without a finding)."""
    paper = rep.paper
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{paper}.md"
    path.write_text(rep.text)
    counts = rep.counts
    not_run = counts.get(NOT_RUN, 0)
    print(f"{paper}: {dict(counts)} -> {path}" + (f" ({not_run} not run)" if not_run else ""))
    unexplained = unexplained_failures(rep.verdicts)
    if unexplained:
        print(
            f"{paper}: {len(unexplained)} claims are not reproduced and have no `finding:` in "
            f"conf/claims/{paper}.yaml: " + ", ".join(unexplained)
        )
    return path


def unexplained_failures(verdicts: list[Verdict]) -> list[str]:
    """Ids of the claims that are not reproduced but carry no ``finding:``: a claim that does
    not reproduce is a finding to investigate and to write down."""
    return [
        v.claim["id"]
        for v in verdicts
        if v.verdict == NOT_REPRODUCED and not v.claim.get("finding")
    ]


SHORT_NAMES = {"rmwggis": "RMwGGIS"}
DOC_INTRO = """\
Generated by `python -m ebmlab.report reproduce all --scale {scale} --into {into}` from the
committed run records (`records/`) alone, so a clean checkout regenerates this page
and the pages it links to (tests/report/test_reproduction_doc.py checks that it does). The
narrative written beside the earlier, two-valued report (its investigations, the commands of
its runs, and the verdicts it carried over from runs lost before records began) is kept in
[reproduction/history.md](reproduction/history.md); its counts are not this page's.

Each claim of the five papers is data in `conf/claims/<paper>.yaml`: the paper's sentence,
the runs that test it, and the value, bound or ordering the sentence states. A verdict is one
of four:

- **reproduced**: every comparison the claim makes holds by at least 2 standard errors;
- **not reproduced**: some comparison fails by 2 standard errors or more;
- **inconclusive**: no comparison fails by that much, but one lies within 2 standard errors
  of its threshold, whichever side it is on;
- **not run**: no recorded run answers the claim; the verdict says why (what ebmlab lacks
  offline, runs shorter than the claim needs, a claim excluded as not comparable) and the
  sweep that would run it.

The standard error of a value is the larger of the one from its runs' own error bars (e.g.
the ESS standard error over chains) and the one from the spread over seeds; a value from one
seed with no error bar is judged on its point value, and the verdict says it was not tested
for noise. A word of the paper such as "substantially" is a stated effect size
(`min_effect:`) the margin must exceed. Settings where our runs differ from the paper's are
declared on each paper's page. Each table below holds a paper's headline claims; its page
holds every claim with the numbers, the notes and the findings.
"""


def paper_label(paper: str) -> str:
    return SHORT_NAMES.get(paper, paper.upper())


def index_page(reports: list[PaperReport], scale: str, into: Path, pages: str) -> str:
    """The docs index: the counts per paper, then one table of headline claims per paper,
    each linking to the paper's page (``<pages>/<paper>.md``, relative to the index)."""
    lines = ["# Reproduction report (measured)", ""]
    lines += [DOC_INTRO.format(scale=scale, into=f"docs/{into.name}").rstrip("\n"), ""]
    lines += [f"Generated {time.strftime('%Y-%m-%d %H:%M')}.", ""]
    head = ["paper", *VERDICTS]
    lines += ["| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
    for rep in reports:
        counts = rep.counts
        link = f"[{paper_label(rep.paper)}]({pages}/{rep.paper}.md)"
        lines.append("| " + " | ".join([link, *(str(counts.get(k, 0)) for k in VERDICTS)]) + " |")
    for rep in reports:
        lines += ["", f"## {paper_label(rep.paper)}: {rep.title}", ""]
        heads = [v for v in rep.verdicts if v.claim.get("headline")]
        if heads:
            lines += ["| headline claim | source | verdict |", "|---|---|---|"]
            for v in heads:
                lines.append(
                    f"| {_cell(v.claim['text'])} | {_cell(v.claim.get('source', ''))} | "
                    f"**{v.verdict}** |"
                )
            lines.append("")
        n = len(rep.verdicts)
        lines.append(
            f"All {n} claims, with our numbers, the reasons of each verdict, the declared "
            f"deviations and the findings: [{pages}/{rep.paper}.md]({pages}/{rep.paper}.md)."
        )
    return "\n".join(lines) + "\n"


def write_docs(into: Path, reports: list[PaperReport], scale: str) -> list[Path]:
    """Write the index ``into`` and one page per paper in the folder of its name beside it
    (``docs/reproduction.md`` and ``docs/reproduction/<paper>.md``)."""
    pages = into.parent / into.stem
    pages.mkdir(parents=True, exist_ok=True)
    written = []
    for rep in reports:
        path = pages / f"{rep.paper}.md"
        path.write_text(rep.text)
        written.append(path)
    into.write_text(index_page(reports, scale, into, into.stem))
    return [into, *written]


def launch_missing(
    paper: str, scale: str, root: Path, only: list[str], extra: list[str], dry_run: bool
) -> int:
    """Launch (with ``dry_run``, print) the runs ``paper``'s claims want that have not finished
    here or on record (:func:`~ebmlab.runs.sweeps.missing_jobs`), per experiment in as few
    sweeps as launch exactly those, saying how many are recorded. Returns the worst exit code."""
    claims = load_claims(paper)["claims"]
    worst = 0
    for exp, seeds in experiments(claims).items():
        if (only and exp not in only) or not experiment_exists(exp):
            continue  # (a claim that needs what ebmlab lacks may name no experiment)
        wanted = points(claims, exp)
        if not wanted:
            continue
        todo = missing_jobs(root, exp, scale, wanted, seeds, extra)
        notes = [
            f"{todo.parked} of them parked: `python -m ebmlab.report unpark` first resumes them"
            if todo.parked
            else "",
            f"{todo.others} finished runs of it at other settings (e.g. a declared shorter run: "
            "--args with its overrides counts them)"
            if todo.others
            else "",
        ]
        print(
            f"{exp} ({scale}): {todo.wanted} runs wanted, {todo.done} finished or recorded, "
            f"{todo.missing} to run"
            + (f" in {len(todo.sweeps)} sweep(s)" if todo.sweeps else "")
            + "".join(f"; {n}" for n in notes if n),
            flush=True,
        )
        for grid in todo.sweeps:
            worst = max(worst, run_sweep(exp, scale, grid, extra, dry_run))
    return worst


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
    records_only: bool = False,
) -> int:
    """Judge (and with ``run`` first run) the claims of ``which`` (a paper or ``all``). The
    finished runs are first copied to the records (unless ``records_only``: then the records
    alone are read). With ``into`` (every paper) the docs index and pages are written from the
    records alone (:func:`write_docs`)."""
    names = papers() if which == "all" else [which]
    if into is not None and which != "all":
        raise SystemExit("--into writes every paper's page: use it with `reproduce all`")
    worst = 0
    reports = []
    for paper in names:
        if run:
            worst = max(worst, launch_missing(paper, scale, root, only, extra, dry_run))
        if not dry_run:
            claims = load_claims(paper)["claims"]
            if not records_only:
                for exp in claim_experiments(claims):
                    archive_runs(root, exp, scale)
                for bench in {c["bench"] for c in claims if c.get("bench")}:
                    archive_bench(root, bench_name(bench, scale))
            rep = build_report(paper, scale, root, records_only or into is not None)
            save_report(rep, out_dir)
            reports.append(rep)
    if into is not None and reports:
        for path in write_docs(into, reports, scale):
            print(f"written: {path}")
    return worst
