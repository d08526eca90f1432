"""Paper claims as data, judged against our runs (the reproduction report).

A claim (``conf/claims/<paper>.yaml``) names an experiment, a metric of ``results.json``,
run selectors and the paper's value or ordering with a tolerance. :func:`judge` finds the
matching finished runs of the experiment's sweep, averages over seeds (mean +/- std) and
returns a verdict: ``reproduced``, ``not reproduced``, ``inconclusive`` or ``not run`` (with
the reason).

One statistical test decides every judged verdict, whichever way the numbers point: each
comparison has a *margin* (how far the measured value lies inside (+) or outside (-) what the
claim accepts, in metric units) and a standard error of that margin (:attr:`Stat.se`: the
larger of the runs' own ``<metric>_se`` and the spread over seeds). A comparison whose
|margin| is under 2 standard errors is ``inconclusive``; a claim is ``not reproduced`` when any
comparison fails by 2 or more, else ``inconclusive`` when any is inconclusive, else
``reproduced``. Without a standard error (one seed, no ``<metric>_se``) a comparison is judged
on its point value and the verdict says it was not tested for noise.

Kinds:
- ``value``: ``where`` selector, ``paper`` number, ``tolerance`` (absolute) or
  ``rel_tolerance``.
- ``ordering``: ``order`` = selectors best first (an entry may be a list of selectors: an
  unordered group that must all rank below the previous entry), ``direction`` lower|higher,
  optional ``slack`` (allowed violation in metric units) and ``min_factor`` (each entry must
  beat the next by at least this factor).
- ``min_effect`` (ordering): the effect size a word of the paper requires ("substantially",
  "significantly", "by large margins"): ``{ratio: r}`` (each entry beats the next by a factor
  r; the larger of it and ``min_factor``) and/or ``{diff: d}`` (by d metric units), with
  ``word:`` quoting the paper's word.
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
shorter ``run.n_steps``) do not stop a match, but runs at the paper's settings replace such
runs, and runs at two declared settings are never pooled (the claim is then 'not run'). An
ordering or ratio whose sides ran at different settings (a 20,000-iteration run against a
2,000-iteration one) is judged, and its verdict says what each side ran at.
``min_run`` (dotted key -> least value) excludes runs shorter than a claim needs (a GRBM trained
for 300 of the paper's 50,000 epochs says nothing about the modes it would learn); the verdict
is then 'not run', with what the short runs would have given.
Every comparison names its margin and its size in standard errors (from the runs' own
``<metric>_se`` and from the spread over seeds, the larger); under 2 of them it is
inconclusive whichever way it points (:func:`decide`).
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from ebmlab.configs import config_dir
from ebmlab.runs.rundirs import MISSING, key_value, logged_rows, same_value
from ebmlab.utils.rundir import NON_IDENTITY_KEYS

REPO = Path(__file__).resolve().parents[2]
CLAIMS_DIR = config_dir() / "claims"  # conf/claims of the checkout, or the installed copy
KINDS = ("value", "ordering", "ratio", "less_than", "greater_than")
REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE, NOT_RUN = (
    "reproduced",
    "not reproduced",
    "inconclusive",
    "not run",
)
# the claims files are large: libyaml's safe loader where PyYAML has it (the same documents)
SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
VERDICTS = (REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE, NOT_RUN)
NOISE_SE = 2.0  # a margin under this many standard errors is inconclusive
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
    data = yaml.load(path.read_text(), Loader=SAFE_LOADER)
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


def paper_table(name: str) -> dict[str, dict[str, float]]:
    """The paper's values of table ``name`` that a report table puts beside ours (``paper:
    <name>`` in an experiment's ``report:`` node): ``tables: <name>:`` of every claims file,
    merged (a table may hold two papers' numbers), as row label -> metric -> number. A cell
    that names a claim's id stands for that claim's ``paper:`` number, so a number is written
    once (in its claim); a cell holding a number is one no claim judges."""
    files = {p: load_claims(p) for p in papers()}
    by_id = {c["id"]: c for data in files.values() for c in data["claims"]}
    found, table, where = False, {}, {}
    for p, data in files.items():
        rows = (data.get("tables") or {}).get(name)
        if rows is None:
            continue
        found = True
        for label, cells in rows.items():
            for metric, cell in (cells or {}).items():
                if (label, metric) in where:
                    raise SystemExit(
                        f"paper table {name!r}: {label!r} {metric} is given twice "
                        f"(conf/claims/{where[label, metric]}.yaml and conf/claims/{p}.yaml)"
                    )
                where[label, metric] = p
                table.setdefault(str(label), {})[metric] = _paper_number(cell, by_id, name, p)
            table.setdefault(str(label), {})
    if not found:
        known = sorted({t for data in files.values() for t in data.get("tables") or {}})
        raise SystemExit(f"no paper table {name!r} in conf/claims/*.yaml; known: {known}")
    return table


def _paper_number(cell, by_id: dict, name: str, paper: str) -> float:
    """A table cell's number: the cell itself, or the ``paper:`` of the claim it names."""
    if isinstance(cell, (int, float)) and not isinstance(cell, bool):
        return cell
    claim = by_id.get(str(cell))
    if claim is None or not isinstance(claim.get("paper"), (int, float)):
        raise SystemExit(
            f"conf/claims/{paper}.yaml, table {name!r}: {cell!r} is neither a number nor the id "
            "of a claim whose `paper:` is a number"
        )
    return claim["paper"]


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
    deviation such as a shorter ``run.n_steps``; () for a run at the paper's settings."""
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


@dataclass
class Check:
    """One comparison behind a verdict: ``margin`` is how far the measurement lies inside (+)
    or outside (-) what the claim accepts, in metric units; ``se`` its standard error (None
    without one); ``strict`` a bound that the value must pass, not touch (``<``, ``>``)."""

    what: str
    margin: float
    se: float | None
    strict: bool = False

    @property
    def outcome(self) -> str:
        if self.se is not None and self.se > 0 and abs(self.margin) < NOISE_SE * self.se:
            return INCONCLUSIVE
        ok = self.margin > 0 if self.strict else self.margin >= 0
        return REPRODUCED if ok else NOT_REPRODUCED

    def fmt(self) -> str:
        size = f", {abs(self.margin) / self.se:.1f} SE" if self.se else ""
        return f"{self.what} (margin {self.margin:+.3g}{size})"


def _combine_se(*parts: tuple[float, float | None]) -> float | None:
    """sqrt(sum (c * se)^2) over (coefficient, se) pairs; a side without a standard error (one
    seed, no ``<metric>_se``) adds none; None when no side has one."""
    known = [(c, se) for c, se in parts if se is not None]
    return math.sqrt(sum((c * se) ** 2 for c, se in known)) if known else None


def decide(checks: list[Check]) -> tuple[str, str]:
    """The verdict of a claim's comparisons and why: ``not reproduced`` when one fails by
    2 standard errors or more (or, without one, at all), else ``inconclusive`` when one is
    within 2 standard errors of its threshold either way, else ``reproduced``."""
    out = [c.outcome for c in checks]
    failed = [c.fmt() for c, o in zip(checks, out) if o == NOT_REPRODUCED]
    noisy = [c.fmt() for c, o in zip(checks, out) if o == INCONCLUSIVE]
    why = []
    if failed:
        why.append("violated: " + "; ".join(failed[:4]))
    if noisy:
        why.append(f"within {NOISE_SE:g} standard errors: " + "; ".join(noisy[:4]))
    if any(c.se is None for c in checks):
        why.append("not tested for noise (one seed and no standard error)")
    verdict = NOT_REPRODUCED if failed else INCONCLUSIVE if noisy else REPRODUCED
    return verdict, "; ".join(why)


def effect(claim: dict) -> tuple[float, float]:
    """(factor, difference) each ordered entry must beat the next by: ``min_factor`` and
    ``min_effect: {ratio, diff}`` (the effect a word such as "substantially" asks for)."""
    eff = claim.get("min_effect") or {}
    factor = max(float(claim.get("min_factor", 1.0)), float(eff.get("ratio", 1.0)))
    return factor, float(eff.get("diff", 0.0))


def _ordering(claim: dict, runs: list[dict]) -> Verdict:
    metric, lower = claim["metric"], claim["direction"] == "lower"
    groups = [e if isinstance(e, list) else [e] for e in claim["order"]]
    better = " < " if lower else " > "
    paper = better.join(label(g if len(g) > 1 else g[0]) for g in groups) + f" ({metric})"
    stats = [[(s, collect_metric(runs, s, metric)) for s in g] for g in groups]
    missing = [label(s) for g in stats for s, st in g if st is None]
    if missing:
        return Verdict(claim, NOT_RUN, paper, "", "order", f"no runs for {'; '.join(missing)}")
    slack = float(claim.get("slack", 0.0))
    factor, diff = effect(claim)
    checks = []
    for a, b in zip(stats, stats[1:]):
        for sa, x in a:
            for sb, y in b:
                # lower is better: x * factor <= y + slack - diff
                if lower:
                    margin = y.mean + slack - diff - x.mean * factor
                    se = _combine_se((factor, x.se), (1.0, y.se))
                else:
                    margin = x.mean - y.mean * factor + slack - diff
                    se = _combine_se((1.0, x.se), (factor, y.se))
                what = f"{label(sa)} ({x.mean:.4g}) vs {label(sb)} ({y.mean:.4g})"
                checks.append(Check(what, margin, se))
    ours = "; ".join(f"{label(s)}: {st.fmt()}" for g in stats for s, st in g)
    word = (claim.get("min_effect") or {}).get("word")
    tol = (
        "order"
        + (f", slack {slack:g}" if slack else "")
        + (f", factor {factor:g}" if factor != 1 else "")
        + (f", by {diff:g}" if diff else "")
        + (f' ("{word}")' if word else "")
    )
    secs = sum(st.seconds for g in stats for _, st in g)
    figs = stats[0][0][1].figures
    verdict, why = decide(checks)
    why = "; ".join(w for w in (why, _unequal_settings([x for g in stats for x in g])) if w)
    fewest = min(st.seeds for g in stats for _, st in g)
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


def at_logged(run: dict, metric: str, at: dict) -> dict:
    """``run`` with ``metric`` replaced by its last logged value at or before ``at`` (``{seconds:
    1400}`` or ``{step: 3000}``, read from the run's ``metrics.jsonl``); without a log that
    reaches back that far the run no longer reports the metric (so it is not judged on its end
    of training), and its own ``<metric>_se`` (an end-of-training error) is dropped."""
    ((key, x),) = at.items()
    if metric not in run["metrics"]:
        return run
    rows = [r for r in logged_rows(run, metric) if r.get(key) is not None and r[key] <= x]
    metrics = {k: v for k, v in run["metrics"].items() if k not in (metric, f"{metric}_se")}
    if rows:
        metrics[metric] = rows[-1][metric]
    return {**run, "metrics": metrics}


def judge(claim: dict, runs: list[dict]) -> Verdict:
    """The verdict of one claim given the finished runs of its experiment. A claim that
    ``needs`` something ebmlab lacks, or is measured outside the runner (``run_by``), is
    'not run' with that reason when no run matches. A claim with ``min_run`` (e.g.
    ``{run.n_steps: 5000}``) ignores runs shorter than that, and says so when only such
    runs were there. A verdict resting on fewer seeds than the claim's ``seeds`` says so.
    ``at: {seconds: 1400}`` judges the metric as logged at that point of each run
    (:func:`at_logged`); ``excluded: <reason>`` keeps a measured claim out of the counts (its
    runs measure something the paper's number does not: it is 'not run', with the reason and
    what it would have given)."""
    if claim.get("at"):
        runs = [at_logged(r, claim["metric"], claim["at"]) for r in runs]
    short = {id(r): _too_short(claim, r) for r in runs}
    try:
        v = _judge(claim, [r for r in runs if not short[id(r)]])
    except MixedSettings as e:
        return Verdict(claim, NOT_RUN, str(claim.get("paper", "")), "", "", str(e))
    if claim.get("excluded") and v.verdict != NOT_RUN:  # measured, but not comparable
        v.why = f"excluded ({claim['excluded']}); measured, not judged: {v.verdict}"
        v.verdict = NOT_RUN
        return v
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
        # delta method: se(r) = |r| sqrt((se_n / n)^2 + (se_d / d)^2)
        se = _combine_se((abs(r / num.mean), num.se), (abs(r / den.mean), den.se))
        width = float(claim["rel_tolerance"]) * abs(claim["paper"])
        check = Check(f"ratio {r:.4g} vs {claim['paper']:g}", width - abs(r - claim["paper"]), se)
        verdict, why = decide([check])
        settings = _unequal_settings([(claim["numerator"], num), (claim["denominator"], den)])
        return Verdict(
            claim,
            verdict,
            paper,
            f"{r:.4g} ({num.fmt()} / {den.fmt()})",
            tol,
            "; ".join(w for w in (why, settings) if w),
            num.seconds + den.seconds,
            num.figures,
            min(num.seeds, den.seeds),
        )
    where = claim.get("where", {})
    st = collect_metric(runs, where, metric)
    if kind in ("less_than", "greater_than"):
        below = kind == "less_than"
        bound = float(claim["bound"])
        paper = f"{'<' if below else '>'} {bound:g}"
        if st is None:
            return Verdict(claim, NOT_RUN, paper, "", "bound", f"no runs for {label(where)}")
        every = bool(claim.get("every_run"))
        if every:  # each run on its own, with its own reported standard error
            ses = st.ses or [None] * len(st.values)
            checks = [
                Check(f"run {i}: {x:.4g}", bound - x if below else x - bound, se, strict=True)
                for i, (x, se) in enumerate(zip(st.values, ses))
            ]
        else:
            checks = [
                Check(f"{st.mean:.4g}", bound - st.mean if below else st.mean - bound, st.se, True)
            ]
        v, why = decide(checks)
        vals = st.values
        ours = st.fmt() + (f", max {max(vals):.4g}, min {min(vals):.4g}" if every else "")
        if claim.get("first_crossing"):
            first_below = claim["first_crossing"] == "below"
            ours += "; " + _crossings(runs, where, metric, bound, first_below)
        tol = "bound, every run" if every else "bound"
        return Verdict(claim, v, paper, ours, tol, why, st.seconds, st.figures, st.seeds)
    target = float(claim["paper"])
    tol, tol_s = value_tolerance(claim)
    if st is None:
        return Verdict(claim, NOT_RUN, f"{target:g}", "", tol_s, f"no runs for {label(where)}")
    v, why = decide(
        [Check(f"{st.mean:.4g} vs {target:g} ± {tol:.3g}", tol - abs(st.mean - target), st.se)]
    )
    return Verdict(claim, v, f"{target:g}", st.fmt(), tol_s, why, st.seconds, st.figures, st.seeds)


def value_tolerance(claim: dict) -> tuple[float, str]:
    """A value claim's absolute tolerance and how the report writes it."""
    if "tolerance" in claim:
        return float(claim["tolerance"]), f"±{float(claim['tolerance']):g}"
    rel = float(claim["rel_tolerance"])
    return rel * abs(float(claim["paper"])), f"±{rel:.0%}"
