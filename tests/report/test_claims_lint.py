"""The claims lint (ebmlab.report.lint): claims that cannot fail, cannot discriminate, or
misstate their runs or the paper's settings, each named by its claim."""

from pathlib import Path

import pytest

from ebmlab.report import lint as L
from ebmlab.report.claims import papers


@pytest.mark.parametrize("paper", papers())
def test_every_claims_file_passes_the_lint(paper):
    runs_of = L.recorded_runs(L.REPO / "outputs")
    assert L.lint_paper(paper, runs_of) == []


def _value(cid, metric, paper, **tol):
    return {"id": cid, "kind": "value", "experiment": "e", "metric": metric, "paper": paper, **tol}


def test_a_value_range_holding_the_trivial_value_is_named():
    """Issue 41: RMwGGIS Table 1's +-100% accepted zero MMD; AB's alpha 0.96 +- 0.04 accepted
    the clip 0.99 (alpha_max in conf/sampler/ab_trace.yaml)."""
    wide = _value("mmd-wide", "mmd", 0.02, rel_tolerance=1.0)
    fair = _value("mmd-fair", "mmd", 0.02, rel_tolerance=0.5)
    log = _value("log-mmd", "log_mmd", -6.0, tolerance=7.0)  # a log scale has no zero floor
    found = L.lint_trivial([wide, fair, log])
    assert len(found) == 1 and found[0].startswith("mmd-wide:") and "trivial value 0" in found[0]
    clip = {**_value("alpha", "alpha", 0.96, tolerance=0.04), "where": {"sampler": "ab_trace"}}
    assert "trivial value 0.99" in L.lint_trivial([clip])[0]
    assert L.lint_trivial([{**clip, "tolerance": 0.02}]) == []
    named = _value("named", "ess", 5.0, tolerance=2.0) | {"trivial": [4.0]}
    assert L.lint_trivial([named])[0].startswith("named:")
    assert L.lint_trivial([named | {"excluded": "not comparable"}]) == []


def test_a_bound_on_the_edge_of_the_opposite_claim_does_not_discriminate():
    """ACS Fig. 1: 'DMALA is trapped' (< 25 modes) passed at 13 of 25, where 'the random walk
    finds all' (= 25) fails."""
    finds_all = _value("rw-all", "modes", 25, tolerance=0)
    trapped = {"id": "dmala-trapped", "kind": "less_than", "experiment": "e", "metric": "modes"}
    found = L.lint_gaps([finds_all, {**trapped, "bound": 25}])
    assert len(found) == 1 and found[0].startswith("dmala-trapped:") and "rw-all" in found[0]
    assert L.lint_gaps([finds_all, {**trapped, "bound": 13}]) == []
    other = {**trapped, "bound": 25, "experiment": "f"}
    assert L.lint_gaps([finds_all, other]) == []


def test_a_word_of_effect_without_an_effect_size_is_named():
    order = {"id": "o", "kind": "ordering", "metric": "ess", "direction": "higher"}
    said = {**order, "quote": "AB samplers substantially outperform previous samplers"}
    assert L.lint_effects([said])[0].startswith("o:") and "substantial" in L.lint_effects([said])[0]
    assert L.lint_effects([{**said, "min_effect": {"ratio": 1.2}}]) == []
    assert L.lint_effects([{**order, "quote": "AB outperforms LB"}]) == []


def _run(seed):
    return {
        "run_dir": Path("/nonexistent"),
        "seed": seed,
        "overrides": {"sampler": "a"},
        "choices": {"sampler": "a"},
        "config": {"seed": seed},
        "metrics": {"m": 1.0},
    }


def test_seeds_that_disagree_with_the_runs_are_named():
    """Issue 41: ACS Table 1 said seeds: 1 and had 3."""
    claim = _value("t1", "m", 1.0, tolerance=0.5) | {"where": {"sampler": "a"}, "seeds": 1}
    runs = [_run(0), _run(1), _run(2)]
    found = L.lint_seeds([claim], lambda c: runs)
    assert found == ["t1: seeds: 1 but its runs have 3 seeds"]
    assert L.lint_seeds([{**claim, "seeds": 3}], lambda c: runs) == []


def test_a_flagged_deviation_must_be_declared_by_the_claims_that_use_it():
    """DLP Fig. 5 runs DMALA at the reference code's 0.2 (the paper: 0.15): flagged in
    conf/sampler/dmala.yaml, it must be in dlp.yaml's deviations:."""
    flags = L.deviation_flags()
    assert ("conf/sampler/dmala.yaml", "sampler.step_size", ["dlp/fig5_ising_learning"]) in flags
    claim = {"id": "fig5", "kind": "ordering", "experiment": "dlp/fig5_ising_learning"}
    claim["order"] = [{"sampler": "dmala"}, {"sampler": "gwg"}]
    flag = [("conf/sampler/dmala.yaml", "sampler.step_size", ["dlp/fig5_ising_learning"])]
    found = L.lint_deviations("dlp", {"claims": [claim]}, flag)
    assert len(found) == 1 and found[0].startswith("fig5:") and "sampler.step_size" in found[0]
    decl = {"key": "sampler.step_size", "experiments": ["dlp/fig5_ising_learning"]}
    decl |= {"ours": "0.2", "paper": "0.15", "reason": "reference code"}
    assert L.lint_deviations("dlp", {"claims": [claim], "deviations": [decl]}, flag) == []
    gwg_only = {**claim, "order": [{"sampler": "gwg"}, {"sampler": "gibbs"}]}
    assert L.lint_deviations("dlp", {"claims": [gwg_only]}, flag) == []  # no DMALA run used
    half = {"key": "k", "experiments": ["dlp/fig5_ising_learning"]}
    found = L.lint_deviations("dlp", {"claims": [gwg_only], "deviations": [half]}, [])
    assert found == ["dlp deviations: k: missing ours, paper, reason"]
