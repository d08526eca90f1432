"""Paper claims as data, judged against our runs (the reproduction report).

A claim (``conf/claims/<paper>.yaml``) names an experiment, a metric of ``results.json``,
run selectors and the paper's value or ordering with a tolerance. :func:`judge` finds the
matching finished runs of the experiment's sweep, averages over seeds (mean +/- std) and
returns a verdict: ``reproduced``, ``not reproduced`` or ``not run`` (with the reason).

Kinds:
- ``value``: ``where`` selector, ``paper`` number, ``tolerance`` (absolute) or
  ``rel_tolerance``.
- ``ordering``: ``order`` = selectors best first (an entry may be a list of selectors: an
  unordered group that must all rank below the previous entry), ``direction`` lower|higher,
  optional ``slack`` (allowed violation in metric units) and ``min_factor`` (each entry must
  beat the next by at least this factor).
- ``ratio``: ``numerator`` / ``denominator`` selectors, ``paper`` ratio, ``rel_tolerance``.
- ``less_than`` / ``greater_than``: ``where`` selector, ``bound``; the seed mean is checked,
  or with ``every_run: true`` every matching run (e.g. a bound on an estimator's spread).
  With ``first_crossing: below`` (or ``above``) the row also says, per run, the first logged
  evaluation (iteration and seconds, from the run's ``metrics.jsonl``) at which the metric
  went below (above) the bound: the paper's "a log-RMSE of -5.0 in 800s" on other hardware,
  or when a baseline that should stay above the bound first fell below it.
A selector maps config-group choices or dotted config keys to values ({sampler: dmala}).
A run may carry ``variant_keys`` (set by the report: keys some claim selects on that the run's
experiment does not sweep, e.g. ``learner.objective``); a run that overrides one of them
matches only selectors that name it, so a run of a variant (the Hyvarinen objective) never
counts as a run of the paper's method ({learner: rmwggis}). Other extra overrides (a declared
shorter ``task.n_steps``) do not stop a match, but runs at the paper's settings replace such
runs, and runs at two declared settings are never pooled (the claim is then 'not run'). An
ordering or ratio whose sides ran at different settings (a 20,000-iteration run against a
2,000-iteration one) is judged, and its verdict says what each side ran at.
``min_run`` (dotted key -> least value) excludes runs shorter than a claim needs (a GRBM trained
for 300 of the paper's 50,000 epochs says nothing about the modes it would learn); the verdict
is then 'not run', with what the short runs would have given.
A violated ordering names each violation's size in standard errors (from the runs' own
``<metric>_se`` and from the spread over seeds, the larger) and says when every
violation is within 2 of them: the order is then unresolved at that sample size.
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from ebmlab.report.runs import MISSING, key_value, logged_rows
from ebmlab.utils.rundir import NON_IDENTITY_KEYS

REPO = Path(__file__).resolve().parents[2]
CLAIMS_DIR = REPO / "conf" / "claims"
KINDS = ("value", "ordering", "ratio", "less_than", "greater_than")
REPRODUCED, NOT_REPRODUCED, NOT_RUN = "reproduced", "not reproduced", "not run"
# overrides that never make a run a different setting of a claim
IGNORED_OVERRIDES = ("seed", "experiment", "scale", *NON_IDENTITY_KEYS)


def ignored_override(key: str) -> bool:
    """An override that never makes a run a different setting (``health.min_accept_rate``
    counts as its group ``health``)."""
    return key in IGNORED_OVERRIDES or key.split(".")[0] in NON_IDENTITY_KEYS


def papers() -> list[str]:
    return sorted(p.stem for p in CLAIMS_DIR.glob("*.yaml"))


def load_claims(paper: str) -> dict:
    path = CLAIMS_DIR / f"{paper}.yaml"
    if not path.exists():
        raise SystemExit(f"no claims file {path}; papers with claims: {', '.join(papers())}")
    data = yaml.safe_load(path.read_text())
    for c in data["claims"]:
        if c.get("kind") not in KINDS:
            raise SystemExit(f"{path}: claim {c.get('id')}: kind must be one of {KINDS}")
        if "first_crossing" in c and (
            c["first_crossing"] not in ("below", "above")
            or c["kind"] not in ("less_than", "greater_than")
        ):
            raise SystemExit(
                f"{path}: claim {c.get('id')}: first_crossing must be 'below' or 'above', on a "
                "less_than / greater_than claim"
            )
    return data


def same_value(actual: str, wanted) -> bool:
    if actual == MISSING:
        return False
    try:
        return math.isclose(float(actual), float(wanted), rel_tol=1e-9, abs_tol=1e-12)
    except (TypeError, ValueError):
        return actual == str(wanted)


def matches(run: dict, selector: dict) -> bool:
    selector = selector or {}
    if any(k in run["overrides"] and k not in selector for k in run.get("variant_keys", ())):
        return False
    return all(same_value(key_value(run, k), v) for k, v in selector.items())


@dataclass
class Stat:
    """A metric over the matching runs (one per seed); ``ses`` the runs' own standard errors
    of it (``<metric>_se`` in results.json) when every run reports one."""

    values: list[float]
    seconds: float = 0.0
    figures: list[str] = field(default_factory=list)
    ses: list[float] | None = None
    seeds: int = 1  # distinct seeds among the runs
    setting: tuple[tuple[str, str], ...] = ()  # the runs' declared setting (:func:`declared`)

    @property
    def mean(self) -> float:
        return statistics.fmean(self.values)

    @property
    def std(self) -> float:
        return statistics.stdev(self.values) if len(self.values) > 1 else 0.0

    @property
    def se(self) -> float | None:
        """Standard error of the mean: the larger of the one from the runs' own standard
        errors (when they report them) and the one from the spread over seeds (when there are
        several); None with one seed and no reported error."""
        n = len(self.values)
        found = [self.std / math.sqrt(n)] if n > 1 else []
        if self.ses is not None:
            found.append(math.sqrt(sum(s * s for s in self.ses)) / n)
        return max(found) if found else None

    def fmt(self) -> str:
        n = len(self.values)
        return f"{self.mean:.4g} ± {self.std:.2g} (n={n})" if n > 1 else f"{self.mean:.4g} (n=1)"


def _identity(run: dict) -> str:
    """Runs of the same resolved config (e.g. one from a table's sweep, one from
    ``make reproduce``, in different directories) count once."""
    key = run.get("config") or [str(run["run_dir"]), run.get("overrides", {})]
    return json.dumps(key, sort_keys=True, default=str)


class MixedSettings(ValueError):
    """Runs at more than one declared setting match one selector: pooling them would average,
    say, a 2,000-iteration run with a 20,000-iteration one."""


def declared(run: dict, selector: dict) -> tuple[tuple[str, str], ...]:
    """The run's command-line settings that neither the selector, nor its experiment's sweep
    (``run["sweep_keys"]``, set by the report), nor the seed account for: a declared
    deviation such as a shorter ``task.n_iters``; () for a run at the paper's settings."""
    skip = {*selector, *run.get("sweep_keys", ())}
    return tuple(
        sorted(
            (k, str(v))
            for k, v in run["overrides"].items()
            if k not in skip and not ignored_override(k)
        )
    )


def _chosen(runs: list[dict], selector: dict, metric: str) -> list[dict]:
    """The finished runs matching ``selector`` that report ``metric``, one per config. Where
    they ran at several declared settings, the runs at the paper's settings are kept; without
    those the choice is ambiguous (:class:`MixedSettings`)."""
    chosen, seen = [], set()
    for r in runs:
        if matches(r, selector) and metric in r["metrics"] and _identity(r) not in seen:
            seen.add(_identity(r))
            chosen.append(r)
    settings = {declared(r, selector) for r in chosen}
    if len(settings) > 1:
        if () not in settings:
            names = " | ".join(", ".join(f"{k}={v}" for k, v in s) for s in sorted(settings))
            raise MixedSettings(
                f"runs at {len(settings)} declared settings match {label(selector)} ({names}); "
                "run the paper's settings, or keep the runs of one setting"
            )
        chosen = [r for r in chosen if not declared(r, selector)]
    return chosen


def collect_metric(runs: list[dict], selector: dict, metric: str) -> Stat | None:
    chosen = _chosen(runs, selector, metric)
    if not chosen:
        return None
    figs = [str(p) for r in chosen[:1] for p in sorted((r["run_dir"] / "figures").glob("*.png"))]
    ses = [r["metrics"].get(f"{metric}_se") for r in chosen]
    return Stat(
        [float(r["metrics"][metric]) for r in chosen],
        sum(float(r["metrics"].get("seconds", 0.0)) for r in chosen),
        figs,
        [float(s) for s in ses] if all(s is not None for s in ses) else None,
        len({str(r.get("seed")) for r in chosen}),
        declared(chosen[0], selector),
    )


def _unequal_settings(sides: list[tuple[dict, Stat]]) -> str:
    """'' when every side of a comparison ran at one setting; else what each side ran at, so
    a reader sees that (say) a 20,000-iteration run was compared with a 2,000-iteration one."""
    if len({st.setting for _, st in sides}) < 2:
        return ""
    at = [
        f"{label(s)} at " + (", ".join(f"{k}={v}" for k, v in st.setting) or "the paper's")
        for s, st in sides
    ]
    return "sides ran at different settings: " + "; ".join(at)


def label(sel) -> str:
    if isinstance(sel, list):
        return "{" + " | ".join(label(s) for s in sel) + "}"
    return ", ".join(f"{k}={v}" for k, v in sel.items())


def first_crossing(rows: list[dict], metric: str, bound: float, below: bool) -> dict | None:
    """The first logged row whose ``metric`` is below (``below``) or above ``bound``."""
    for row in rows:
        v = row.get(metric)
        if v is not None and (v < bound if below else v > bound):
            return row
    return None


def _crossings(runs: list[dict], selector: dict, metric: str, bound: float, below: bool) -> str:
    """Per matching run: when its logged ``metric`` first crossed ``bound``."""
    out = []
    for r in _chosen(runs, selector, metric):
        seed = r.get("seed", "?")
        rows = logged_rows(r, metric)
        if not rows:
            out.append(f"seed {seed}: curve not recorded")
            continue
        row = first_crossing(rows, metric, bound, below)
        if row is None:
            out.append(f"seed {seed}: never")
        else:
            out.append(f"seed {seed}: iteration {row['step']:,} ({row['seconds']:,.0f} s)")
    side = "below" if below else "above"
    return f"first {side} {bound:g}: " + "; ".join(out)


@dataclass
class Verdict:
    claim: dict
    verdict: str
    paper: str
    ours: str
    tolerance: str
    why: str = ""
    seconds: float = 0.0
    figures: list[str] = field(default_factory=list)
    seeds: int = 0  # the fewest seeds behind any value the verdict compares


def _ordering(claim: dict, runs: list[dict]) -> Verdict:
    metric, lower = claim["metric"], claim["direction"] == "lower"
    groups = [e if isinstance(e, list) else [e] for e in claim["order"]]
    better = " < " if lower else " > "
    paper = better.join(label(g if len(g) > 1 else g[0]) for g in groups) + f" ({metric})"
    stats = [[(s, collect_metric(runs, s, metric)) for s in g] for g in groups]
    missing = [label(s) for g in stats for s, st in g if st is None]
    if missing:
        return Verdict(claim, NOT_RUN, paper, "", "order", f"no runs for {'; '.join(missing)}")
    slack, factor = float(claim.get("slack", 0.0)), float(claim.get("min_factor", 1.0))
    fails, gaps_in_se = [], []
    for a, b in zip(stats, stats[1:]):
        for sa, x in a:
            for sb, y in b:
                # lower is better: x * factor <= y (+ slack); higher: x >= y * factor (- slack)
                if lower:
                    ok = x.mean * factor <= y.mean + slack
                else:
                    ok = x.mean >= y.mean * factor - slack
                if not ok:
                    text = f"{label(sa)} ({x.mean:.4g}) vs {label(sb)} ({y.mean:.4g})"
                    if x.se is not None and y.se is not None and (x.se > 0 or y.se > 0):
                        gaps_in_se.append(abs(x.mean - y.mean) / math.hypot(x.se, y.se))
                        text += f", {gaps_in_se[-1]:.1f} SE"
                    fails.append(text)
    ours = "; ".join(f"{label(s)}: {st.fmt()}" for g in stats for s, st in g)
    tol = (
        "order"
        + (f", slack {slack:g}" if slack else "")
        + (f", factor {factor:g}" if factor != 1 else "")
    )
    secs = sum(st.seconds for g in stats for _, st in g)
    figs = stats[0][0][1].figures
    why = "violated: " + "; ".join(fails[:4]) if fails else ""
    if fails and len(gaps_in_se) == len(fails) and max(gaps_in_se) < 2.0:
        why += " (every violation is within 2 standard errors: unresolved at this sample size)"
    why = "; ".join(w for w in (why, _unequal_settings([x for g in stats for x in g])) if w)
    fewest = min(st.seeds for g in stats for _, st in g)
    verdict = NOT_REPRODUCED if fails else REPRODUCED
    return Verdict(claim, verdict, paper, ours, tol, why, secs, figs, fewest)


def _too_short(claim: dict, run: dict) -> list[str]:
    """The ``min_run`` settings (dotted key -> least value) ``run`` falls short of."""
    short = []
    for key, least in (claim.get("min_run") or {}).items():
        value = key_value(run, key)
        try:
            below = value == MISSING or float(value) < float(least)
        except ValueError:
            below = True
        if below:
            need = f"{least:,}" if isinstance(least, (int, float)) else str(least)
            short.append(f"{key} {value} < {need}" if value != MISSING else f"{key} missing")
    return short


def judge(claim: dict, runs: list[dict]) -> Verdict:
    """The verdict of one claim given the finished runs of its experiment. A claim that
    ``needs`` something ebmlab lacks, or is measured outside the runner (``run_by``), is
    'not run' with that reason when no run matches. A claim with ``min_run`` (e.g.
    ``{learner.n_epochs: 5000}``) ignores runs shorter than that, and says so when only such
    runs were there. A verdict resting on fewer seeds than the claim's ``seeds`` says so."""
    short = {id(r): _too_short(claim, r) for r in runs}
    try:
        v = _judge(claim, [r for r in runs if not short[id(r)]])
    except MixedSettings as e:
        return Verdict(claim, NOT_RUN, str(claim.get("paper", "")), "", "", str(e))
    seeds = int(claim.get("seeds", 1))
    if v.verdict != NOT_RUN and v.seeds < seeds:
        v.why = "; ".join(w for w in (v.why, f"on {v.seeds} of the {seeds} seeds asked for") if w)
    if v.verdict == NOT_RUN and (claim.get("needs") or claim.get("run_by")):
        v.why = claim.get("needs") or f"measured by `{claim['run_by']}`, not by a run"
    elif v.verdict == NOT_RUN and any(short.values()):
        full = _judge(claim, runs)
        if full.verdict != NOT_RUN:  # the short runs would have given a verdict
            reasons = sorted({why for w in short.values() for why in w})
            v.why = (
                f"only runs shorter than the claim needs ({'; '.join(reasons)}); "
                f"they would give: {full.verdict}"
            )
            v.ours, v.seconds, v.figures = full.ours, full.seconds, full.figures
    return v


def _judge(claim: dict, runs: list[dict]) -> Verdict:
    kind, metric = claim["kind"], claim["metric"]
    if kind == "ordering":
        return _ordering(claim, runs)
    if kind == "ratio":
        num = collect_metric(runs, claim["numerator"], metric)
        den = collect_metric(runs, claim["denominator"], metric)
        paper, tol = f"{claim['paper']:g}", f"±{float(claim['rel_tolerance']):.0%}"
        if num is None or den is None:
            side = "numerator" if num is None else "denominator"
            return Verdict(claim, NOT_RUN, paper, "", tol, f"no runs for the {side}")
        r = num.mean / den.mean
        ok = abs(r - claim["paper"]) <= float(claim["rel_tolerance"]) * abs(claim["paper"])
        return Verdict(
            claim,
            REPRODUCED if ok else NOT_REPRODUCED,
            paper,
            f"{r:.4g} ({num.fmt()} / {den.fmt()})",
            tol,
            _unequal_settings([(claim["numerator"], num), (claim["denominator"], den)]),
            num.seconds + den.seconds,
            num.figures,
            min(num.seeds, den.seeds),
        )
    where = claim.get("where", {})
    st = collect_metric(runs, where, metric)
    if kind in ("less_than", "greater_than"):
        paper = f"{'<' if kind == 'less_than' else '>'} {claim['bound']:g}"
        if st is None:
            return Verdict(claim, NOT_RUN, paper, "", "bound", f"no runs for {label(where)}")
        every = bool(claim.get("every_run"))
        vals = st.values if every else [st.mean]
        ok = all(x < claim["bound"] if kind == "less_than" else x > claim["bound"] for x in vals)
        v = REPRODUCED if ok else NOT_REPRODUCED
        ours = st.fmt() + (f", max {max(vals):.4g}, min {min(vals):.4g}" if every else "")
        if claim.get("first_crossing"):
            below = claim["first_crossing"] == "below"
            ours += "; " + _crossings(runs, where, metric, claim["bound"], below)
        tol = "bound, every run" if every else "bound"
        return Verdict(claim, v, paper, ours, tol, "", st.seconds, st.figures, st.seeds)
    target = float(claim["paper"])
    if "tolerance" in claim:
        tol, tol_s = float(claim["tolerance"]), f"±{float(claim['tolerance']):g}"
    else:
        tol = float(claim["rel_tolerance"]) * abs(target)
        tol_s = f"±{float(claim['rel_tolerance']):.0%}"
    if st is None:
        return Verdict(claim, NOT_RUN, f"{target:g}", "", tol_s, f"no runs for {label(where)}")
    ok = abs(st.mean - target) <= tol
    v = REPRODUCED if ok else NOT_REPRODUCED
    return Verdict(claim, v, f"{target:g}", st.fmt(), tol_s, "", st.seconds, st.figures, st.seeds)
