"""Claims judged against runs: each kind can pass, fail, or be 'not run'; every claims file
names real experiments, config-group options and config keys."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import OmegaConf

import ebmlab.run  # noqa: F401 - registers resolvers
from ebmlab.report import claims as C
from ebmlab.report.reproduce import selectors

CONF = C.REPO / "conf"
NODES = ("run", "task", "model", "dataset", "sampler", "learner")  # roots of dotted selector keys
_ABSENT = object()


def run(sampler: str, value: float, seed: int = 0, **config) -> dict:
    return {
        "run_dir": Path("/nonexistent"),
        "seed": seed,
        "overrides": {"sampler": sampler, "seed": str(seed)},
        "choices": {"sampler": sampler},
        "config": config,
        "metrics": {"m": value, "seconds": 2.0},
    }


RUNS = [run("a", 1.0), run("a", 3.0, seed=1), run("b", 5.0), run("c", 6.0, task={"k": 3})]


def test_value_claims_average_over_seeds():
    c = {"id": "x", "kind": "value", "metric": "m", "where": {"sampler": "a"}, "paper": 2.5}
    # mean 2, SE over the two seeds 1.0: the margin must exceed 2 SE either way
    v = C.judge({**c, "tolerance": 3.0}, RUNS)  # margin 2.5
    assert v.verdict == C.REPRODUCED and "2 ± 1.4 (n=2)" in v.ours and v.seconds == 4.0
    assert C.judge({**c, "paper": 5.5, "tolerance": 0.4}, RUNS).verdict == C.NOT_REPRODUCED
    assert C.judge({**c, "rel_tolerance": 1.2}, RUNS).verdict == C.REPRODUCED
    missing = C.judge({**c, "where": {"sampler": "z"}, "tolerance": 1}, RUNS)
    assert missing.verdict == C.NOT_RUN and "sampler=z" in missing.why


def test_a_verdict_on_fewer_seeds_than_the_claim_asks_for_says_so():
    c = {"id": "x", "kind": "value", "metric": "m", "where": {"sampler": "a"}, "paper": 2.5}
    c = {**c, "tolerance": 3.0}
    assert C.judge({**c, "seeds": 2}, RUNS).why == ""
    v = C.judge({**c, "seeds": 3}, RUNS)
    assert v.verdict == C.REPRODUCED and v.why == "on 2 of the 3 seeds asked for"
    order = {"id": "o", "kind": "ordering", "metric": "m", "direction": "lower", "seeds": 2}
    v = C.judge({**order, "order": [{"sampler": "a"}, {"sampler": "b"}]}, RUNS)
    assert v.why == "on 1 of the 2 seeds asked for"  # b has one seed (a's SE of 1 gives 3 SE)
    assert (
        C.judge({**c, "where": {"sampler": "z"}, "seeds": 3}, RUNS).why == "no runs for sampler=z"
    )


def test_min_run_ignores_runs_shorter_than_the_claim_needs():
    runs = [run("a", 1.0, task={"n": 300}), run("a", 3.0, seed=1, task={"n": 5000})]
    c = {"id": "s", "kind": "value", "metric": "m", "where": {"sampler": "a"}, "paper": 3}
    c = {**c, "tolerance": 0.1, "min_run": {"task.n": 5000}}
    v = C.judge(c, runs)
    assert v.verdict == C.REPRODUCED and "(n=1)" in v.ours  # the 300-step run is left out
    only_short = C.judge(c, runs[:1])
    assert only_short.verdict == C.NOT_RUN
    assert "task.n 300 < 5,000" in only_short.why and "would give: not reproduced" in only_short.why
    assert "1 (n=1)" in only_short.ours  # what the short run measured is still shown
    missing = C.judge({**c, "min_run": {"task.other": 1}}, runs)
    assert missing.verdict == C.NOT_RUN and "task.other missing" in missing.why


def test_dotted_selectors_read_the_resolved_config():
    c = {"kind": "value", "metric": "m", "where": {"task.k": 3}, "paper": 6, "tolerance": 0}
    assert C.judge({"id": "y", **c}, RUNS).verdict == C.REPRODUCED


def test_ordering_groups_slack_and_factor():
    base = {"id": "o", "kind": "ordering", "metric": "m", "direction": "lower"}
    ok = C.judge({**base, "order": [{"sampler": "a"}, [{"sampler": "b"}, {"sampler": "c"}]]}, RUNS)
    assert ok.verdict == C.REPRODUCED
    bad = C.judge({**base, "order": [{"sampler": "c"}, {"sampler": "b"}]}, RUNS)
    assert bad.verdict == C.NOT_REPRODUCED and "sampler=c" in bad.why
    assert (
        C.judge({**base, "order": [{"sampler": "c"}, {"sampler": "b"}], "slack": 1.5}, RUNS).verdict
        == C.REPRODUCED
    )
    factor = {**base, "order": [{"sampler": "b"}, {"sampler": "c"}], "min_factor": 1.5}
    assert C.judge(factor, RUNS).verdict == C.NOT_REPRODUCED  # 5 * 1.5 > 6 (no SE: the point)
    noisy = {**factor, "order": [{"sampler": "a"}, {"sampler": "b"}], "min_factor": 3}
    assert C.judge(noisy, RUNS).verdict == C.INCONCLUSIVE  # 2 * 3 > 5, but a's SE is 1 (x 3)
    high = {**base, "direction": "higher", "order": [{"sampler": "c"}, {"sampler": "a"}]}
    assert C.judge(high, RUNS).verdict == C.REPRODUCED


def test_ratio_and_bounds():
    r = {
        "id": "r",
        "kind": "ratio",
        "metric": "m",
        "numerator": {"sampler": "b"},
        "denominator": {"sampler": "a"},
        "paper": 2.5,
        "rel_tolerance": 0.01,
    }
    # 5 / 2 = 2.5, but a's mean 2 has SE 1: the ratio's SE (1.25) swamps a 1% tolerance
    assert C.judge(r, RUNS).verdict == C.INCONCLUSIVE
    assert C.judge({**r, "denominator": {"sampler": "c"}, "paper": 5 / 6}, RUNS).verdict == (
        C.REPRODUCED  # one seed each, no standard error: judged on the point value
    )
    lt = {"id": "l", "kind": "less_than", "metric": "m", "where": {"sampler": "b"}, "bound": 4}
    assert C.judge(lt, RUNS).verdict == C.NOT_REPRODUCED
    assert C.judge({**lt, "kind": "greater_than"}, RUNS).verdict == C.REPRODUCED
    every = {**lt, "where": {"sampler": "a"}, "bound": 4.5}  # runs 1 and 3: mean 2 (SE 1) < 4.5
    assert C.judge(every, RUNS).verdict == C.REPRODUCED
    assert C.judge({**every, "bound": 2.5}, RUNS).verdict == C.INCONCLUSIVE  # 0.5 SE inside
    every = {**every, "bound": 2.5, "every_run": True}  # each run on its own: 3 > 2.5
    assert C.judge(every, RUNS).verdict == C.NOT_REPRODUCED


def test_first_crossing_names_when_each_run_crossed_the_bound(tmp_path):
    runs = []
    for seed, curve in enumerate([[-4.0, -5.2, -4.9, -5.5], [-4.0, -4.5, -4.8, -4.9]]):
        d = tmp_path / str(seed)
        d.mkdir()
        rows = [
            {"step": 100 * (i + 1), "seconds": 10.0 * (i + 1), "m": v} for i, v in enumerate(curve)
        ]
        rows.insert(1, {"step": 150, "seconds": 15.0, "loss": 1.0})  # a training-log row
        (d / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        runs.append({**run("a", curve[-1], seed=seed), "run_dir": d, "seed": seed})
    runs.append({**run("a", -6.0, seed=2), "seed": 2})  # a record without its metric log
    c = {"id": "f", "kind": "less_than", "metric": "m", "where": {"sampler": "a"}, "bound": -5.0}
    v = C.judge({**c, "first_crossing": "below"}, runs)
    assert v.verdict == C.INCONCLUSIVE  # mean of the final values -5.47 < -5, by 1.5 SE
    assert "first below -5: seed 0: iteration 200 (20 s); seed 1: never" in v.ours
    assert "seed 2: curve not recorded" in v.ours
    assert "first below" not in C.judge(c, runs).ours  # only when the claim asks for it
    gt = {**c, "kind": "greater_than", "first_crossing": "below"}  # a bound to stay above
    assert "seed 0: iteration 200 (20 s)" in C.judge(gt, runs).ours
    above = C.judge({**gt, "bound": -4.2, "first_crossing": "above"}, runs)
    assert "first above -4.2: seed 0: iteration 100 (10 s)" in above.ours


def test_a_malformed_first_crossing_is_refused_when_the_claims_load(tmp_path, monkeypatch):
    bad = {"id": "b", "kind": "less_than", "metric": "m", "where": {}, "bound": 1}
    monkeypatch.setattr(C, "CLAIMS_DIR", tmp_path)
    for wrong in (
        {**bad, "first_crossing": True},
        {**bad, "kind": "value", "first_crossing": "below"},
    ):
        (tmp_path / "x.yaml").write_text(yaml.safe_dump({"claims": [wrong]}))
        with pytest.raises(SystemExit, match="first_crossing must be"):
            C.load_claims("x")


@pytest.mark.parametrize("paper", C.papers())
def test_every_claims_file_is_well_formed(paper):
    data = C.load_claims(paper)
    ids = [c["id"] for c in data["claims"]]
    assert len(ids) == len(set(ids))
    for c in data["claims"]:
        assert {"id", "source", "text", "experiment", "metric", "kind"} <= set(c), c["id"]
        need = {
            "value": {"where", "paper"},
            "ordering": {"order", "direction"},
            "ratio": {"numerator", "denominator", "paper", "rel_tolerance"},
            "less_than": {"where", "bound"},
            "greater_than": {"where", "bound"},
        }[c["kind"]]
        assert need <= set(c), c["id"]
        experiment = C.REPO / "conf" / "experiment" / f"{c['experiment']}.yaml"
        # a claim of an experiment ebmlab cannot run offline names what it needs instead
        assert experiment.exists() or c.get("needs"), f"{c['id']}: no experiment {c['experiment']}"
    yaml.safe_dump(data)


def _is_group(key: str) -> bool:
    return "." not in key and (CONF / key).is_dir()


def _measured_selectors(paper: str):
    """(claim id, experiment, selector) of every claim the runner measures."""
    for c in C.load_claims(paper)["claims"]:
        missing = not (CONF / "experiment" / f"{c['experiment']}.yaml").is_file()
        if c.get("run_by") or (c.get("needs") and missing):  # not written yet: needs says why
            continue
        for sel in selectors(c):
            yield c["id"], sel.get("experiment", c["experiment"]), sel


@pytest.mark.parametrize("paper", C.papers())
def test_selectors_name_real_options_and_keys(paper):
    """A selector key is `experiment`, a config group (its value an option of the group) or a
    dotted key under a config node; `needs` / `run_by` are reasons, not flags."""
    for c in C.load_claims(paper)["claims"]:
        for field in ("needs", "run_by"):
            assert isinstance(c.get(field, "x"), str) and c.get(field, "x"), (c["id"], field)
    for cid, exp, sel in _measured_selectors(paper):
        assert (CONF / "experiment" / f"{exp}.yaml").is_file(), (cid, exp)
        for key, value in sel.items():
            if key == "experiment":
                continue
            if _is_group(key):
                assert (CONF / key / f"{value}.yaml").is_file(), (cid, f"{key}={value}")
            else:
                assert key.split(".")[0] in NODES, (cid, key)


@pytest.fixture(scope="module")
def _hydra():
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        yield


@pytest.mark.parametrize("paper", C.papers())
def test_dotted_selector_keys_exist_in_the_composed_config(paper, _hydra):
    """`make reproduce` pins selector values on the command line: each dotted key must exist
    in its experiment's config with the selector's group choices (scale=smoke)."""
    composed: dict = {}
    for cid, exp, sel in _measured_selectors(paper):
        dotted = [k for k in sel if k != "experiment" and not _is_group(k)]
        if not dotted:
            continue
        pins = tuple(sorted(f"{k}={v}" for k, v in sel.items() if _is_group(k)))
        if (exp, pins) not in composed:
            overrides = [f"experiment={exp}", "scale=smoke", *pins]
            cfg = compose("config", overrides=overrides, return_hydra_config=True)
            HydraConfig.instance().set_config(cfg)
            composed[(exp, pins)] = cfg
        cfg = composed[(exp, pins)]
        for key in dotted:
            assert OmegaConf.select(cfg, key, default=_ABSENT) is not _ABSENT, (cid, exp, key)


def test_settings_no_claim_selects_are_declared_as_deviations():
    from ebmlab.report.reproduce import off_protocol

    claims = [{"id": "x", "experiment": "e", "where": {"sampler": "a"}}]
    short = run("a", 1.0)
    short["overrides"] = {**short["overrides"], "run.n_steps": "20000", "logger": "none"}
    out = off_protocol(claims, {"e": [run("a", 2.0), short], "f": [run("b", 1.0)]})
    assert out == {"e": {"run.n_steps=20000": 1}}  # seed, selected keys, logger are not deviations


def test_runs_of_a_variant_count_only_for_selectors_that_name_it():
    """A run with an extra override of a key some claim selects on (the Hyvarinen objective)
    is not a run of the paper's method; a declared shorter run still is (when no run at the
    paper's settings is there: see the test below)."""
    paper = run("a", 1.0)
    variant = run("a", 9.0, seed=1)
    variant["overrides"] = {**variant["overrides"], "learner.objective": "hyvarinen"}
    short = run("a", 3.0, seed=2)
    short["overrides"] = {**short["overrides"], "run.n_steps": "20000"}
    short2 = run("a", 5.0, seed=3)
    short2["overrides"] = {**short2["overrides"], "run.n_steps": "20000"}
    runs = [variant, short, short2]
    for r in [paper, *runs]:
        r["variant_keys"] = frozenset({"learner.objective"})
    c = {"id": "v", "kind": "value", "metric": "m", "paper": 2.0, "tolerance": 0.01}
    assert C.judge({**c, "where": {"sampler": "a"}}, runs).ours.startswith("4 ± 1.4 (n=2)")
    hyv = C.judge({**c, "where": {"sampler": "a", "learner.objective": "hyvarinen"}}, runs)
    assert hyv.ours == "9 (n=1)"


def test_runs_at_the_papers_settings_replace_declared_shorter_ones_never_pool_with_them():
    """A 2,000-iteration run and a 20,000-iteration run of the same method are not two seeds:
    the run at the paper's settings is judged alone, and runs at two declared settings with
    none at the paper's are 'not run' with both named, never averaged."""
    c = {"id": "x", "kind": "value", "metric": "m", "paper": 1.0, "tolerance": 0.5}
    full, short, shorter = run("a", 1.0), run("a", 80.0), run("a", 90.0, seed=1)
    short["overrides"] = {**short["overrides"], "run.n_steps": "2000"}
    shorter["overrides"] = {**shorter["overrides"], "run.n_steps": "500"}
    swept = run("b", 7.0, seed=1)  # a setting of the experiment's own sweep is not declared
    for r in (full, short, shorter, swept):
        r["sweep_keys"] = frozenset({"sampler"})
    v = C.judge({**c, "where": {"sampler": "a"}}, [short, full, shorter])
    assert v.verdict == C.REPRODUCED and v.ours.startswith("1 (n=1)")
    mixed = C.judge({**c, "where": {"sampler": "a"}}, [short, shorter])
    assert mixed.verdict == C.NOT_RUN and mixed.ours == ""
    assert "run.n_steps=2000 | run.n_steps=500" in mixed.why
    spread = {**c, "kind": "less_than", "where": {}, "bound": 100.0, "every_run": True}
    assert C.judge(spread, [full, swept]).verdict == C.REPRODUCED


def test_a_comparison_of_sides_at_different_settings_says_so():
    """A paper-length run ranked against a declared shorter one is judged, and the verdict
    names each side's setting; sides at one setting add nothing."""
    order = {"id": "o", "kind": "ordering", "metric": "m", "direction": "lower"}
    order["order"] = [{"sampler": "a"}, {"sampler": "b"}]
    a, b = run("a", 1.0), run("b", 2.0)
    a["metrics"]["m_se"] = b["metrics"]["m_se"] = 0.1
    b["overrides"] = {**b["overrides"], "run.n_steps": "2000"}
    v = C.judge(order, [a, b])
    assert v.verdict == C.REPRODUCED
    assert v.why == (
        "sides ran at different settings: sampler=a at the paper's; sampler=b at run.n_steps=2000"
    )
    ratio = {"id": "r", "kind": "ratio", "metric": "m", "paper": 0.5, "rel_tolerance": 0.1}
    ratio.update(numerator={"sampler": "a"}, denominator={"sampler": "b"})
    assert "sampler=b at run.n_steps=2000" in C.judge(ratio, [a, b]).why
    a["overrides"] = {**a["overrides"], "run.n_steps": "2000"}
    assert C.judge(order, [a, b]).why == ""


def test_a_judged_verdict_names_the_unfinished_runs_meant_for_it():
    """A verdict judged on the runs there are says which longer runs are still on their way
    (they may change it); failed jobs and jobs of other selectors are not named."""
    from ebmlab.report.reproduce import _with_on_its_way

    order = {"id": "o", "kind": "ordering", "metric": "m", "direction": "lower"}
    order["order"] = [{"sampler": "a"}, {"sampler": "b"}]
    a, b = run("a", 1.0), run("b", 2.0)
    b["overrides"] = {**b["overrides"], "run.n_steps": "2000"}
    v = C.judge(order, [a, b])
    on_way = {**run("b", 0.0), "run_dir": Path("seed=0"), "unfinished": "parked at step 11,500"}
    failed = {**run("b", 0.0), "run_dir": Path("seed=1"), "failed": "diverged"}
    other = {**run("c", 0.0), "run_dir": Path("seed=2"), "unfinished": "running now"}
    why = _with_on_its_way(v, [on_way, failed, other])
    assert why.startswith(v.why + "; the run seed=0 is unfinished (parked at step 11,500)")
    assert why.endswith("the verdict may change when it lands")
    assert "seed=1" not in why and "seed=2" not in why
    assert _with_on_its_way(v, [failed, other]) == v.why
    v.why = ""
    assert _with_on_its_way(v, [on_way]).startswith("the run seed=0 is unfinished")


def test_variant_keys_leave_out_what_the_experiment_sweeps():
    from ebmlab.report.spec import sweep_keys

    assert sweep_keys("rmwggis/table3_ising_learning") == {"learner"}
    assert sweep_keys("rmwggis/table3_timing") == {"learner"}
    assert sweep_keys("dlp/fig5_ising_learning") == {"sampler", "learner.sampler_steps"}


def test_one_test_on_both_sides_an_ordering_within_2_se_is_inconclusive_either_way():
    """The margin of an order in standard errors (from the runs' own <metric>_se, or the
    spread over seeds): under 2 it is inconclusive, whether it points for or against."""
    base = {"id": "s", "kind": "ordering", "metric": "m", "direction": "higher"}
    order = {"order": [{"sampler": "a"}, {"sampler": "b"}]}
    a, b = run("a", 10.0), run("b", 11.0)
    a["metrics"]["m_se"], b["metrics"]["m_se"] = 0.6, 0.8  # gap 1 = 1.0 SE, against
    v = C.judge({**base, **order}, [a, b])
    assert v.verdict == C.INCONCLUSIVE and "1.0 SE" in v.why and "within 2 standard" in v.why
    a["metrics"]["m"] = 12.0  # gap 1 = 1.0 SE, for: a pass by noise is no pass
    assert C.judge({**base, **order}, [a, b]).verdict == C.INCONCLUSIVE
    a["metrics"]["m"], b["metrics"]["m"] = 10.0, 14.0  # gap 4 = 4.0 SE: a real violation
    v = C.judge({**base, **order}, [a, b])
    assert v.verdict == C.NOT_REPRODUCED and "4.0 SE" in v.why and "within 2" not in v.why
    a["metrics"]["m"], b["metrics"]["m"] = 14.0, 10.0  # 4.0 SE for it
    assert C.judge({**base, **order}, [a, b]).verdict == C.REPRODUCED
    plain = C.judge({**base, **order}, [run("a", 1.0), run("b", 2.0)])  # one seed, no SE
    assert plain.verdict == C.NOT_REPRODUCED and "not tested for noise" in plain.why
    seeds = [run("a", 1.0), run("a", 3.0, seed=1), run("b", 5.0), run("b", 7.0, seed=1)]
    v = C.judge({**base, **order}, seeds)  # means 2 vs 6, SE 1 each: 2.8 SE
    assert v.verdict == C.NOT_REPRODUCED and "2.8 SE" in v.why


def test_a_stated_effect_size_must_be_exceeded_by_2_standard_errors():
    """ "Substantially" (min_effect): a 2% lead with a standard error of 8 times the lead
    (issue 41, AB grid J=0.4407) is inconclusive; with a factor 1.2 asked for, a 10% lead
    measured precisely is not reproduced; a 50% lead is reproduced."""
    base = {"id": "e", "kind": "ordering", "metric": "m", "direction": "higher"}
    base["order"] = [{"sampler": "a"}, {"sampler": "b"}]
    a, b = run("a", 102.0), run("b", 100.0)
    a["metrics"]["m_se"] = b["metrics"]["m_se"] = 16.0 / 2**0.5  # margin 2, SE 16
    assert C.judge(base, [a, b]).verdict == C.INCONCLUSIVE
    sized = {**base, "min_effect": {"ratio": 1.2, "word": "substantially"}}
    a["metrics"]["m"], a["metrics"]["m_se"], b["metrics"]["m_se"] = 110.0, 1.0, 1.0
    v = C.judge(sized, [a, b])
    assert v.verdict == C.NOT_REPRODUCED and '"substantially"' in v.tolerance
    assert C.judge(base, [a, b]).verdict == C.REPRODUCED  # without the word: 10 = 6.4 SE
    a["metrics"]["m"] = 150.0
    assert C.judge(sized, [a, b]).verdict == C.REPRODUCED
    diff = {**base, "min_effect": {"diff": 45.0}, "direction": "higher"}
    assert C.judge(diff, [a, b]).verdict == C.REPRODUCED  # 50 - 45 = 5 = 3.3 SE
    assert C.judge({**diff, "min_effect": {"diff": 49.0}}, [a, b]).verdict == C.INCONCLUSIVE


def test_a_claim_judged_at_a_logged_time_and_an_excluded_claim(tmp_path):
    """``at: {seconds: 1400}`` judges the value logged then (not at the end); ``excluded``
    keeps a measured claim out of the verdict counts with its reason."""
    d = tmp_path / "r"
    d.mkdir()
    rows = [{"step": s, "seconds": 500.0 * s, "m": -4.0 - s / 10} for s in range(1, 8)]
    (d / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    r = {**run("a", -4.7), "run_dir": d}
    gt = {"id": "t", "kind": "greater_than", "metric": "m", "where": {"sampler": "a"}}
    gt["bound"] = -4.5
    assert C.judge(gt, [r]).verdict == C.NOT_REPRODUCED  # the end: -4.7
    v = C.judge({**gt, "at": {"seconds": 1400}}, [r])  # logged at 1,000 s: -4.2
    assert v.verdict == C.REPRODUCED and "-4.2 (n=1)" in v.ours
    no_log = C.judge({**gt, "at": {"seconds": 1400}}, [run("a", -4.7)])
    assert no_log.verdict == C.NOT_RUN
    out = C.judge({**gt, "excluded": "not comparable"}, [r])
    assert out.verdict == C.NOT_RUN and "excluded (not comparable)" in out.why
    assert "not reproduced" in out.why  # what it would have given


def test_the_larger_of_reported_and_seed_standard_errors_is_used():
    """Seeds that disagree more than their own standard errors say: the spread wins."""
    runs = [run("a", 1.0), run("a", 5.0, seed=1)]
    for r in runs:
        r["metrics"]["m_se"] = 0.1
    stat = C.collect_metric(runs, {"sampler": "a"}, "m")
    assert stat.se == pytest.approx(stat.std / 2**0.5) and stat.se > 0.1
    runs[1]["metrics"]["m"] = 1.01
    stat = C.collect_metric(runs, {"sampler": "a"}, "m")
    assert stat.se == pytest.approx((0.01 + 0.01) ** 0.5 / 2)


def test_launch_plan_drops_pins_the_experiment_runs_anyway():
    """A selector naming a default (DMALA's Fig. 3 step 0.4, set by the experiment's conf/when/)
    reuses the experiment's own run instead of launching it again under another name; a
    non-default value (0.6) and a swept key (sampler) stay pinned."""
    from ebmlab.report.reproduce import plan

    claims = [
        {
            "experiment": "dlp/fig3_ising_sampling",
            "kind": "ordering",
            "order": [
                {"sampler": "dmala", "sampler.step_size": 0.4},
                {"sampler": "dmala", "sampler.step_size": 0.6},
                {"sampler": "gwg", "sampler.n_flips": 1},
            ],
        }
    ]
    grids = plan(claims, "dlp/fig3_ising_sampling", "paper")
    assert {"sampler": ["dmala", "gwg"]} in grids
    assert {"sampler": ["dmala"], "sampler.step_size": [0.6]} in grids
    assert len(grids) == 2


def test_launch_plan_sends_a_selector_to_the_experiment_it_names():
    from ebmlab.report.reproduce import experiments, plan

    claims = [
        {
            "experiment": "rmwggis/table2_graphs",
            "kind": "ordering",
            "seeds": 2,
            "order": [{"learner": "rmwggis"}, {"experiment": "rmwggis/table2_graphs_gwg"}],
        }
    ]
    assert experiments(claims) == {"rmwggis/table2_graphs": 2, "rmwggis/table2_graphs_gwg": 2}
    assert plan(claims, "rmwggis/table2_graphs", "paper") == [{}]  # rmwggis is its default
    assert plan(claims, "rmwggis/table2_graphs_gwg", "paper") == [{}]


def test_launch_grids_contain_no_point_nobody_asked_for():
    from itertools import product

    from ebmlab.runs.sweeps import grids as _grids

    points = [{"a": 1, "b": 1}, {"a": 2, "b": 1}, {"a": 1, "b": 2}, {"a": 3, "b": 1}]
    grids = _grids(["a", "b"], points)
    launched = [dict(zip(g, vs)) for g in grids for vs in product(*g.values())]
    assert sorted(map(str, launched)) == sorted(map(str, points))
    assert _grids(["a", "b"], points[:2]) == [{"a": [1, 2], "b": [1]}]


def test_dry_run_prints_the_sweeps_and_runs_nothing(root, capsys):
    from ebmlab.report.reproduce import reproduce

    code = reproduce("acs", "paper", root, root / "rep", True, ["acs/fig1_toy"], [], True)
    out = capsys.readouterr().out
    assert code == 0
    assert "experiment=acs/fig1_toy scale=paper sampler=acs,rwm,dmala,ab_1st seed=0,1,2" in out
    assert not (root / "multirun").exists() and not (root / "rep").exists()


def test_launch_plan_leaves_an_initialised_hydra_as_it_was(_hydra):
    from ebmlab.report.reproduce import plan

    plan(
        [{"experiment": "acs/fig1_toy", "kind": "value", "where": {"sampler": "acs"}}],
        "acs/fig1_toy",
        "smoke",
    )
    assert GlobalHydra.instance().is_initialized()
    compose("config", overrides=["experiment=acs/fig1_toy"])


def test_claims_measured_by_a_benchmark_are_judged_from_its_rows(root):
    """`bench: ratio_matching` claims read outputs/bench/ratio_matching.json: a row's fields
    select it, its round is its seed, a failed row is left out, the command is listed."""
    import json

    from ebmlab.report.reproduce import write_report
    from ebmlab.runs.rundirs import bench_rows

    def row(method, nb, k, cpu, mem):
        return {
            "dim": 2048,
            "method": method,
            "neighbours": nb,
            "round": k,
            "time_s": cpu,
            "cpu_time_s": cpu,
            "mem_bytes": mem,
            "hardware": "test CPU (2 cores), 1 thread(s)",
        }

    rows = [row("rm", "generic", k, 60.0 + k, 8e9) for k in range(3)]
    rows += [row("rmwggis", "generic", k, 10.0, 4e8) for k in range(3)]
    rows += [row("rm", "model", k, 1.0, 1e9) for k in range(3)]  # must not count as generic
    rows += [{"dim": 2048, "method": "rmwggis", "neighbours": "model", "error": "rc -9"}]
    (root / "bench").mkdir(parents=True)
    (root / "bench" / "ratio_matching.json").write_text(json.dumps({"rows": rows}))
    assert len(bench_rows(root / "bench" / "ratio_matching.json")) == 9
    assert bench_rows(root / "missing.json") == []
    text = write_report("rmwggis", "paper", root, root / "rep").read_text()
    speed = next(ln for ln in text.splitlines() if "`rmwggis-t5-speedup-2048`" in ln)
    assert "6.1 (61 ± 1 (n=3) / 10 ± 0 (n=3))" in speed and "**reproduced**" in speed
    memory = next(ln for ln in text.splitlines() if "`rmwggis-t5-memory-2048`" in ln)
    assert "0.05 (" in memory and "**reproduced**" in memory
    assert "test CPU (2 cores)" in text.splitlines()[2]
    assert "make bench-ratio-matching" in text.split("## Commands")[1]
    # without the file: not run, with the command that measures it
    text = write_report("rmwggis", "paper", root / "none", root / "rep2").read_text()
    speed = next(ln for ln in text.splitlines() if "`rmwggis-t5-speedup-2048`" in ln)
    assert "**not run**: measured by `make bench-ratio-matching`" in speed


def test_a_failed_run_is_named_in_the_not_run_reason(root):
    """A sweep job that failed (status.json, no results.json) is reported beside the claims it
    was meant for, matched on the group choices it recorded or on its directory name."""
    import json

    from ebmlab.report.reproduce import write_report
    from ebmlab.report.spec import sweep_dir
    from ebmlab.runs.rundirs import collect_failed

    base = sweep_dir(root, "grbm/fig1_gmm", "paper")

    def job(name, code, message, choices=None):
        d = base / name
        d.mkdir(parents=True)
        status = {"exit_code": code, "message": message}
        if choices is not None:
            status["choices"] = choices
        (d / "status.json").write_text(json.dumps(status))

    job("a", 1, "training diverged at step 200", {"grbm_gmm_setting": "langevin_w_adjust",
                                                  "dataset": "gmm_iso"})  # fmt: skip
    job("dataset=gmm_aniso,grbm_gmm_setting=langevin_w_adjust", 1, "out of memory")
    job("dataset=gmm_iso,grbm_gmm_setting=gibbs", 0, "ok")
    assert [r["failed"] for r in collect_failed(base)] == [
        "training diverged at step 200",
        "out of memory",
    ]
    text = write_report("grbm", "paper", root, root / "rep").read_text()
    lines = {ln.split("`")[1]: ln for ln in text.splitlines() if ln.startswith("| `")}
    iso = lines["grbm-fig1-iso-langevin-w-adjust-in-modes"]
    assert "**not run**" in iso and "the run a failed: training diverged at step 200" in iso
    assert "out of memory" not in iso
    aniso = lines["grbm-fig1-aniso-langevin-w-adjust-in-modes"]
    assert "failed: out of memory" in aniso and "diverged" not in aniso
    assert "failed" not in lines["grbm-fig1-iso-gibbs-in-modes"]


def test_an_unfinished_run_is_named_with_its_progress(root):
    """A run that started and neither finished nor failed is reported beside its claims: how
    far it got (progress.json, else its log and checkpoint) and whether its process is alive."""
    import json
    import os
    import socket

    from ebmlab.report.reproduce import write_report
    from ebmlab.report.spec import sweep_dir
    from ebmlab.runs.rundirs import collect_unfinished

    base = sweep_dir(root, "grbm/fig1_gmm", "paper")

    def job(name):
        d = base / name
        (d / "checkpoints").mkdir(parents=True)
        (d / "run_config.json").write_text(json.dumps({"hash": "x", "config": {}}))
        return d

    running = job("dataset=gmm_iso,grbm_gmm_setting=langevin_w_adjust")
    (running / ".hydra").mkdir()  # the group choices Hydra saved (here one set by no override)
    saved = {"hydra": {"runtime": {"choices": {"sampler": "gibbs", "hydra/launcher": "basic"}}}}
    (running / ".hydra" / "hydra.yaml").write_text(json.dumps(saved))
    progress = {"step": 3200, "n_steps": 5000, "updated": "2026-11-23 07:40 UTC"}
    (running / "progress.json").write_text(json.dumps(progress))
    me = {"pid": os.getpid(), "host": socket.gethostname()}
    (running / ".lock").write_text(json.dumps(me))
    stopped = job("dataset=gmm_aniso,grbm_gmm_setting=langevin_w_adjust")
    (stopped / "checkpoints" / "last.pt").write_bytes(b"")
    (stopped / "metrics.jsonl").write_text('{"step": 1000, "kl": 1.0}\n{"step": 2000}\n')
    elsewhere = job("dataset=gmm_iso,grbm_gmm_setting=langevin_wo_adjust")
    (elsewhere / ".lock").write_text(json.dumps({"pid": 12345, "host": "node-7"}))
    done = job("dataset=gmm_iso,grbm_gmm_setting=gibbs")
    (done / "results.json").write_text(json.dumps({"metrics": {}}))
    failed = job("dataset=gmm_aniso,grbm_gmm_setting=gibbs")
    (failed / "status.json").write_text(json.dumps({"exit_code": 1, "message": "diverged"}))

    rows = {r["run_dir"].name: r["unfinished"] for r in collect_unfinished(base)}
    choices = {r["run_dir"].name: r["choices"] for r in collect_unfinished(base)}
    assert choices[running.name] == {"sampler": "gibbs"} and choices[stopped.name] == {}
    assert set(rows) == {running.name, stopped.name, elsewhere.name}
    assert rows[elsewhere.name] == "held by process 12345 on node-7, no checkpoint yet"
    assert rows[running.name] == (
        "running now, step 3,200 of 5,000 at its last checkpoint (2026-11-23 07:40 UTC)"
    )
    assert rows[stopped.name].startswith("interrupted; its command resumes it, logged to step 2,")
    text = write_report("grbm", "paper", root, root / "rep").read_text()
    lines = {ln.split("`")[1]: ln for ln in text.splitlines() if ln.startswith("| `")}
    iso = lines["grbm-fig1-iso-langevin-w-adjust-in-modes"]
    assert "**not run**" in iso and f"the run {running.name} is unfinished (running now" in iso
    assert stopped.name not in iso
    assert "is unfinished (interrupted" in lines["grbm-fig1-aniso-langevin-w-adjust-in-modes"]


def test_a_claims_notes_are_printed_beside_its_finding(root):
    """How the paper's value or tolerance was read (`note`, `tolerance_note`) is part of the
    verdict: the report prints them with the finding, in that order, even with no runs."""
    from ebmlab.report.reproduce import write_report

    text = write_report("dlp", "paper", root, root / "rep").read_text()
    notes = text.split("## Findings, notes and declared deviations")[1].split("## Commands")[0]
    mine = [ln for ln in notes.splitlines() if ln.startswith("- `dlp-fig3-dula-similar-to-gwg`")]
    assert [ln.split("(")[1].split(")")[0] for ln in mine] == [
        "note",
        "tolerance note",
        "finding",
    ]
    assert "'similar'" in mine[0] and "[0.5, 1.5]" in mine[1] and "floors" in mine[2]


def test_a_judged_verdict_carries_the_warnings_of_its_runs():
    """A run that finished with frozen chains (results.json ``warnings``) is named beside the
    verdict judged on it; a warning of a run the claim does not select is not."""
    from ebmlab.report.reproduce import _with_warnings

    order = {"id": "o", "kind": "ordering", "metric": "m", "direction": "lower"}
    order["order"] = [{"sampler": "a"}, {"sampler": "b"}]
    a, b, c = run("a", 1.0), run("b", 2.0), run("c", 0.5)
    b["run_dir"], b["warnings"] = Path("seed=0"), ["sampler acceptance 0.0007 ... frozen"]
    c["warnings"] = ["not this one"]
    v = C.judge(order, [a, b, c])
    assert v.verdict == C.REPRODUCED
    why = _with_warnings(v, [a, b, c])
    assert why.endswith("warning from the run seed=0: sampler acceptance 0.0007 ... frozen")
    assert "not this one" not in why
    b["warnings"] = []
    assert _with_warnings(v, [a, b, c]) == v.why


def test_settings_that_never_change_a_number_are_not_declared_deviations():
    r = run("a", 1.0)
    r["overrides"] = {**r["overrides"], "health.min_accept_rate": "0", "run.n_steps": "10"}
    assert C.declared(r, {"sampler": "a"}) == (("run.n_steps", "10"),)
