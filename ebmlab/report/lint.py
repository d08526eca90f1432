"""The claims lint: claims that cannot fail, cannot discriminate, or misstate their runs.

``python -m ebmlab.report lint`` (and tests/report/test_claims_lint.py, in ``make test``)
checks every ``conf/claims/<paper>.yaml``; each finding names the claim. Rules:

- ``trivial``: a value or ratio claim whose accepted range contains a trivial value of its
  metric: one a degenerate result gives (zero MMD, zero error, zero ratio) or a clip bound of
  the method (AB's alpha_max). Such a range can only fail from one side. A claim names its
  trivial values with ``trivial:`` (a number or a list); else they are inferred from the
  metric's name (:data:`TRIVIAL_BY_METRIC`).
- ``no-gap``: a bound claim (``less_than`` / ``greater_than``) whose bound sits on the edge of
  another claim's accepted range on the same experiment and metric (DMALA "is trapped",
  < 25 modes, beside the random walk "finds all", = 25): a result one step short of success
  counts as the opposite outcome, so the metric does not discriminate the two statements.
- ``effect``: an ordering whose paper sentence says "substantially", "significantly", "by
  large margins" or "much more" without the effect size it requires (``min_effect:``, or
  ``min_factor:``; ``effect_note:`` says why none applies).
- ``seeds``: a claim's ``seeds:`` below the number of seeds its recorded runs have.
- ``deviation``: a setting flagged in conf/ as deviating from a paper, with a comment
  ``deviation(<experiment>[, <experiment>...]): <dotted.key>`` on the line that sets it, used
  by an experiment some claims file judges, that the file's ``deviations:`` does not declare
  (each entry: ``key``, ``experiments``, ``ours``, ``paper``, ``reason``); and declarations
  that miss a field or name no claim's experiment.

Claims with ``excluded:`` or ``needs:`` (never judged) are skipped by the value rules.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import yaml

from ebmlab.configs import config_dir
from ebmlab.report.claims import CLAIMS_DIR, collect_metric, load_claims, papers, value_tolerance

REPO = Path(__file__).resolve().parents[2]
CONF = config_dir()  # conf/ of the checkout, or ebmlab/conf of an installed wheel
# metric name pattern -> the values a degenerate result gives
TRIVIAL_BY_METRIC = (
    (re.compile(r"(^|_)mmd($|_)"), (0.0,)),
    (re.compile(r"(^|_)(tv|kl|rmse|error)($|_)"), (0.0,)),
)
EFFECT_WORDS = re.compile(
    r"substantial|significant|large margin|much (better|faster|lower|higher|more)|dramatic|"
    r"considerabl|greatly|orders? of magnitude",
    re.IGNORECASE,
)
FLAG = re.compile(r"#.*\bdeviation\(([^)]*)\):\s*([\w.]+)")
DEVIATION_FIELDS = ("key", "experiments", "ours", "paper", "reason")


def trivial_values(claim: dict) -> tuple[float, ...]:
    """The claim's ``trivial:`` values, else those its metric's name implies."""
    if "trivial" in claim:
        t = claim["trivial"]
        return tuple(float(x) for x in (t if isinstance(t, list) else [t]))
    for pattern, values in TRIVIAL_BY_METRIC:
        if pattern.search(claim["metric"]) and not claim["metric"].startswith("log"):
            return values
    return clip_bounds(claim)


def clip_bounds(claim: dict) -> tuple[float, ...]:
    """The bounds a claim's sampler clips its metric to (``<metric>_max`` / ``_min`` in
    conf/sampler/<sampler>.yaml, e.g. AB's ``alpha_max``): a run stuck there is trivial."""
    name = (claim.get("where") or {}).get("sampler")
    path = CONF / "sampler" / f"{name}.yaml"
    if not name or not path.is_file():
        return ()
    node = yaml.safe_load(path.read_text()) or {}
    found = (node.get(f"{claim['metric']}_{end}") for end in ("min", "max"))
    return tuple(float(v) for v in found if isinstance(v, (int, float)))


def accepted_range(claim: dict) -> tuple[float, float] | None:
    """[low, high] a value or ratio claim accepts; None for other kinds."""
    if claim["kind"] == "value":
        tol, _ = value_tolerance(claim)
        return float(claim["paper"]) - tol, float(claim["paper"]) + tol
    if claim["kind"] == "ratio":
        width = float(claim["rel_tolerance"]) * abs(float(claim["paper"]))
        return float(claim["paper"]) - width, float(claim["paper"]) + width
    return None


def _judged(claim: dict) -> bool:
    return not (claim.get("excluded") or claim.get("needs") or claim.get("run_by"))


def lint_trivial(claims: list[dict]) -> list[str]:
    out = []
    for c in filter(_judged, claims):
        span = accepted_range(c)
        if span is None:
            continue
        trivial = (0.0, *trivial_values(c)) if c["kind"] == "ratio" else trivial_values(c)
        for t in trivial:
            if span[0] <= t <= span[1]:
                out.append(
                    f"{c['id']}: accepted range [{span[0]:.4g}, {span[1]:.4g}] of {c['metric']} "
                    f"contains the trivial value {t:g}: it cannot fail from that side"
                )
    return out


def lint_gaps(claims: list[dict]) -> list[str]:
    out = []
    judged = list(filter(_judged, claims))
    for b in judged:
        if b["kind"] not in ("less_than", "greater_than"):
            continue
        for v in judged:
            span = accepted_range(v)
            same = (v["experiment"], v["metric"]) == (b["experiment"], b["metric"])
            if span is None or not same or v is b:
                continue
            edge = span[0] if b["kind"] == "less_than" else span[1]
            if math.isclose(float(b["bound"]), edge, rel_tol=1e-9, abs_tol=1e-12):
                out.append(
                    f"{b['id']}: its bound {b['bound']:g} is the edge of {v['id']}'s accepted "
                    f"range: one step short of that claim's outcome passes as this one's "
                    f"opposite; set a bound that discriminates the two"
                )
    return out


def lint_effects(claims: list[dict]) -> list[str]:
    out = []
    for c in claims:
        if c["kind"] != "ordering":
            continue
        word = EFFECT_WORDS.search(f"{c.get('quote', '')} {c.get('text', '')}")
        has = c.get("min_effect") or c.get("min_factor") or c.get("effect_note")
        if word and not has:
            out.append(
                f"{c['id']}: the paper says {word.group(0)!r} but the claim states no effect "
                "size (min_effect:, or effect_note: why none applies)"
            )
    return out


def lint_seeds(claims: list[dict], runs_of) -> list[str]:
    """``runs_of(claim)`` -> the recorded runs the claim is judged on."""
    from ebmlab.report.reproduce import selectors

    out = []
    for c in filter(_judged, claims):
        runs = runs_of(c)
        found = 0
        for sel in selectors(c):
            try:
                st = collect_metric(runs, sel, c["metric"])
            except ValueError:  # runs at several declared settings: the verdict says so
                continue
            found = max(found, st.seeds if st else 0)
        if found > int(c.get("seeds", 1)):
            out.append(f"{c['id']}: seeds: {c.get('seeds', 1)} but its runs have {found} seeds")
    return out


def deviation_flags(conf: Path = CONF) -> list[tuple[str, str, list[str]]]:
    """(file, dotted key, experiments) of each ``deviation(...)`` comment under ``conf``."""
    out = []
    for path in sorted(conf.rglob("*.yaml")):
        for line in path.read_text().splitlines():
            m = FLAG.search(line)
            if m:
                exps = [e.strip() for e in m.group(1).split(",") if e.strip()]
                out.append((path.relative_to(conf.parent).as_posix(), m.group(2), exps))
    return out


def _flag_applies(file: str, claim: dict, exp: str) -> bool:
    """Whether a flag in ``conf/<group>/<option>.yaml`` concerns ``claim``'s runs of ``exp``:
    some selector of the claim for ``exp`` chooses that option, or none names the group (the
    experiment's own choice, which may be it). A flag in an experiment file always does."""
    from ebmlab.report.reproduce import selectors

    parts = Path(file).parts  # conf, group..., option.yaml
    if parts[1] == "experiment":
        return True
    group, option = "/".join(parts[1:-1]), Path(file).stem
    sels = [s for s in selectors(claim) if s.get("experiment", claim["experiment"]) == exp]
    named = [s[group] for s in sels if group in s]
    return not named or option in map(str, named)


def lint_deviations(paper: str, data: dict, flags) -> list[str]:
    from ebmlab.report.reproduce import selectors

    out = []
    claims = data["claims"]

    def runs_in(c: dict) -> set[str]:
        return {c["experiment"]} | {s["experiment"] for s in selectors(c) if "experiment" in s}

    used = set().union(*(runs_in(c) for c in claims)) if claims else set()
    declared = data.get("deviations") or []
    for d in declared:
        missing = [k for k in DEVIATION_FIELDS if k not in d]
        if missing:
            out.append(f"{paper} deviations: {d.get('key', '?')}: missing {', '.join(missing)}")
        elif not set(d["experiments"]) & used:
            out.append(f"{paper} deviations: {d['key']}: no claim judges {d['experiments']}")
    for file, key, exps in flags:
        for exp in exps:
            hit = [c["id"] for c in claims if exp in runs_in(c) and _flag_applies(file, c, exp)]
            ok = any(d.get("key") == key and exp in (d.get("experiments") or []) for d in declared)
            if hit and not ok:
                out.append(
                    f"{hit[0]}: its runs ({exp}) use {key}, flagged as a deviation in {file}, "
                    f"which conf/claims/{paper}.yaml does not declare (deviations:); "
                    f"{len(hit)} claims: {', '.join(hit[:5])}"
                )
    return out


def lint_paper(paper: str, runs_of=None, flags=None) -> list[str]:
    """Every finding of ``paper``'s claims; ``runs_of`` (claim -> runs) enables the seeds rule."""
    data = load_claims(paper)
    claims = data["claims"]
    flags = deviation_flags() if flags is None else flags
    found = lint_trivial(claims) + lint_gaps(claims) + lint_effects(claims)
    if runs_of is not None:
        found += lint_seeds(claims, runs_of)
    return found + lint_deviations(paper, data, flags)


def recorded_runs(root: Path, scale: str = "paper"):
    """claim -> its runs in the committed records (``records/`` beside ``root``; what a clean
    checkout judges): the seeds rule."""
    from ebmlab.report.reproduce import claim_experiments, claim_runs
    from ebmlab.runs.records import bench_name, bench_recorded, collect_recorded

    cache: dict[str, list[dict]] = {}

    def runs_of(claim: dict) -> list[dict]:
        if claim.get("bench"):
            return bench_recorded(root, bench_name(claim["bench"], scale), live_too=False)
        for e in claim_experiments([claim]):
            if e not in cache:
                cache[e] = collect_recorded(root, e, scale, live_too=False)
        return claim_runs(claim, cache)

    return runs_of


def lint_all(root: Path = REPO / "outputs") -> list[str]:
    runs_of = recorded_runs(root)
    flags = deviation_flags()
    return [f for p in papers() for f in lint_paper(p, runs_of, flags)]


__all__ = ["CLAIMS_DIR", "lint_all", "lint_paper"]
