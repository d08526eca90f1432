"""The committed run records (records/, beside outputs/): every verdict recomputes from them."""

import hashlib
import json
import shutil

import pytest
import yaml

from ebmlab.report.claims import load_claims
from ebmlab.report.reproduce import write_report
from ebmlab.runs.layout import sweep_dir
from ebmlab.runs.records import (
    archive_bench,
    archive_runs,
    bench_recorded,
    collect_recorded,
    records_root,
)

EXP = "grbm/fig1_gmm"
TITLE = load_claims("grbm")["paper"]
ISO = "dataset=gmm_iso,grbm_gmm_setting=gibbs,run.n_steps=5000"


def _finished_run(root, name, covered, seed=1234):
    d = sweep_dir(root, EXP, "paper") / name
    (d / ".hydra").mkdir(parents=True)
    (d / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(name.split(",")))
    (d / "run_config.json").write_text(
        json.dumps({"config": {"learner": {"n_epochs": 5000}, "seed": seed}})
    )
    metrics = {"sample_modes_covered": covered, "seconds": 10.0}
    (d / "metrics.jsonl").write_text(json.dumps({"step": 1, "seconds": 10.0, "loss": 0.5}) + "\n")
    (d / "results.json").write_text(
        json.dumps({"metrics": metrics, "hardware": "test CPU", "seed": seed})
    )
    (d / "checkpoints").mkdir()
    (d / "checkpoints" / "last.pt").write_bytes(b"\0" * 1000)  # not part of the record
    return d


def _rows(text):
    return {ln.split("`")[1]: ln for ln in text.splitlines() if ln.startswith("| `")}


def test_a_recorded_run_is_judged_after_its_run_directory_is_gone(root):
    run_dir = _finished_run(root, ISO, 3)
    assert archive_runs(root, EXP, "paper") == 1
    assert archive_runs(root, EXP, "paper") == 0  # unchanged: nothing copied again
    kept = records_root(root) / run_dir.relative_to(root)
    assert kept.is_relative_to(root.parent / "records")  # beside outputs/, not inside it
    assert sorted(p.name for p in kept.rglob("*") if p.is_file()) == [
        "metrics.jsonl",  # the curve, for the figures and first crossings of a fresh clone
        "overrides.yaml",
        "results.json",
        "run_config.json",
    ]
    live = write_report("grbm", "paper", root, root / "a").read_text()
    shutil.rmtree(root / "multirun")
    again = write_report("grbm", "paper", root, root / "b").read_text()
    row = _rows(again)["grbm-fig1-iso-gibbs-all-modes"]
    assert "measured, not judged: reproduced" in row and "3 (n=1)" in row  # (claim excluded)
    assert _rows(live)["grbm-fig1-iso-gibbs-all-modes"].split("|")[:7] == row.split("|")[:7]
    assert "1 finished runs" in again and "1 of them from their records" in again


def test_a_failed_job_is_recorded_and_named_after_its_directory_is_gone(root):
    name = "dataset=gmm_iso,grbm_gmm_setting=langevin_wo_adjust,run.n_steps=5000"
    d = sweep_dir(root, EXP, "paper") / name
    (d / ".hydra").mkdir(parents=True)
    (d / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(name.split(",")))
    status = {"exit_code": 1, "message": "training diverged at step 16665"}
    (d / "status.json").write_text(json.dumps(status))
    assert archive_runs(root, EXP, "paper") == 1
    shutil.rmtree(root / "multirun")
    text = write_report("grbm", "paper", root, root / "r").read_text()
    row = _rows(text)["grbm-fig1-iso-langevin-wo-adjust-collapses"]
    assert "**not run**" in row and f"the run {name} failed: training diverged at step 16665" in row


def test_a_live_run_wins_over_its_record(root):
    run_dir = _finished_run(root, ISO, 3)
    archive_runs(root, EXP, "paper")
    res = json.loads((run_dir / "results.json").read_text())
    res["metrics"]["sample_modes_covered"] = 2
    (run_dir / "results.json").write_text(json.dumps(res))
    runs = collect_recorded(root, EXP, "paper")
    assert [r["metrics"]["sample_modes_covered"] for r in runs] == [2]


def test_a_benchmark_json_is_read_from_its_record_when_the_live_one_is_gone(root):
    (root / "bench").mkdir(parents=True)
    (root / "bench" / "ratio_matching.json").write_text(
        json.dumps({"rows": [{"method": "rm", "round": 0, "time_s": 1.0}]})
    )
    archive_bench(root, "ratio_matching")
    (root / "bench" / "ratio_matching.json").unlink()
    assert [r["metrics"]["time_s"] for r in bench_recorded(root, "ratio_matching")] == [1.0]


def test_a_claim_whose_runs_are_gone_is_not_run_and_names_its_sweep(root):
    """No verdict outlives its runs: a claim with runs neither here nor on record is 'not
    run' and says which sweep produces them (no carried-over rows, issue 41)."""
    name = "dataset=gmm_aniso,grbm_gmm_setting=gibbs,run.n_steps=5000"
    _finished_run(root, name, 1)
    text = write_report("grbm", "paper", root, root / "r").read_text()
    rows = _rows(text)
    assert "carried" not in text
    row = rows["grbm-fig1-iso-gibbs-in-modes"]
    assert "**not run**" in row and "no runs for" in row
    assert (
        "to run it: `python -m ebmlab.run -m experiment=grbm/fig1_gmm scale=paper "
        "dataset=gmm_iso grbm_gmm_setting=gibbs seed=0,1,2`" in row
    )
    assert "Verdicts: reproduced: " in text and ", inconclusive: " in text
    needs = rows["grbm-t1-gibbs-fid"]  # a claim that needs something offline says only that
    assert "**not run**" in needs and "to run it" not in needs


def test_records_only_ignores_live_runs_and_archives_nothing(root):
    """``--records-only`` judges what a clean checkout holds: a finished run that is only in
    the live sweep directory is not seen and not copied."""
    from ebmlab.report.reproduce import reproduce

    _finished_run(root, ISO, 3)
    reproduce("grbm", "paper", root, root / "a", False, [], [], records_only=True)
    assert not records_root(root).exists()
    assert "3 (n=1)" not in (root / "a" / "grbm.md").read_text()
    reproduce("grbm", "paper", root, root / "b", False, [], [])  # archives, then judges
    assert "3 (n=1)" in (root / "b" / "grbm.md").read_text()
    shutil.rmtree(sweep_dir(root, EXP, "paper"))
    reproduce("grbm", "paper", root, root / "c", False, [], [], records_only=True)
    assert "3 (n=1)" in (root / "c" / "grbm.md").read_text()


def test_a_not_reproduced_claim_without_a_finding_is_named(root, monkeypatch, capsys):
    import ebmlab.report.reproduce as reproduce

    name = "dataset=gmm_aniso,grbm_gmm_setting=gibbs_langevin_wo_adjust,run.n_steps=5000"
    _finished_run(root, name, 3)  # all 3 modes: "collapses to fewer modes" fails
    data = load_claims("grbm")
    claim = "grbm-fig1-aniso-gibbs-langevin-wo-adjust-collapses"
    assert any(c["id"] == claim for c in data["claims"])
    write_report("grbm", "paper", root, root / "a")
    assert "have no `finding:`" not in capsys.readouterr().out  # the real claim explains it
    bare = {
        **data,
        "claims": [{k: v for k, v in c.items() if k != "finding"} for c in data["claims"]],
    }
    monkeypatch.setattr(reproduce, "load_claims", lambda paper: bare)
    text = write_report("grbm", "paper", root, root / "b").read_text()
    out = capsys.readouterr().out
    assert "1 claims are not reproduced and have no `finding:`" in out
    assert claim in out.splitlines()[-1] and f"| `{claim}`" in text


def test_a_parked_run_resumes_on_a_new_machine_as_if_never_stopped(tmp_path):
    """Killed mid-run, parked, its live directory lost (a new machine), unparked and resumed:
    the same results and graphs as one uninterrupted run; once finished, its parked copy goes."""
    from ebmlab.runs.park import park_runs, parked_root, unpark_runs
    from tests.helpers import assert_same_results, run_cli
    from tests.tasks.test_graph_generation import FIXTURE, TINY_GWG

    args = [*TINY_GWG, f"dataset.data_dir={FIXTURE}", "dataset.n_test=1", "run.n_steps=4"]
    full = run_cli(args, tmp_path / "full")
    root = tmp_path / "outputs"
    run = root / "runs" / "gwg"
    killed = run_cli(args, run, env={"EBMLAB_FAULT_KILL_AT_STEP": "2"}, check=False)
    assert killed.returncode != 0 and not (run / "results.json").exists()
    assert park_runs(root) == [run.relative_to(root)]
    kept = parked_root(root) / "runs" / "gwg"
    assert (kept / "checkpoints" / "last.pt").exists() and not (kept / "figures").exists()
    shutil.rmtree(root / "runs")
    assert unpark_runs(root) == [run.relative_to(root)]
    assert unpark_runs(root) == []  # the live run is as far along: nothing to restore
    resumed = run_cli(args, run)
    assert_same_results(resumed.results, full.results)  # docs/gpu.md: exact on a CPU
    assert (run / "generated_graphs.txt").read_text() == (
        tmp_path / "full" / "generated_graphs.txt"
    ).read_text()
    assert park_runs(root) == [] and not kept.exists()


def _started(d, step, n_steps=5000):
    (d / "checkpoints").mkdir(parents=True)
    (d / "checkpoints" / "last.pt").write_bytes(f"step {step}".encode())
    digest = hashlib.sha256(f"step {step}".encode()).hexdigest()
    (d / "checkpoints" / "last.pt.sha256").write_text(digest)
    (d / "run_config.json").write_text(json.dumps({"hash": "x", "config": {}}))
    prog = {"step": step, "n_steps": n_steps, "updated": "2026-11-24 21:00 UTC"}
    (d / "progress.json").write_text(json.dumps(prog))
    return d


def test_unpark_never_rolls_a_run_back_and_skips_finished_runs(root):
    from ebmlab.runs.park import parked_root, unpark_runs

    base = sweep_dir(root, EXP, "paper")
    kept = sweep_dir(parked_root(root), EXP, "paper")
    _started(kept / "behind", 1000)
    _started(base / "behind", 3000)  # resumed elsewhere and further along than the parked copy
    _started(kept / "ahead", 3000)
    _started(base / "ahead", 1000)
    _started(kept / "lost", 2000)
    _started(kept / "done", 2000)
    (base / "done").mkdir(parents=True)
    (base / "done" / "results.json").write_text("{}")
    restored = {p.name for p in unpark_runs(root)}
    assert restored == {"ahead", "lost"}
    assert (base / "ahead" / "checkpoints" / "last.pt").read_bytes() == b"step 3000"
    assert (base / "behind" / "checkpoints" / "last.pt").read_bytes() == b"step 3000"
    assert not (base / "done" / "checkpoints").exists()


def test_a_parked_run_is_named_beside_its_claim(root):
    """A claim whose run is parked (not on this machine) says where it stopped and how to go
    on; once the run is back here, its live progress is named instead."""
    from ebmlab.runs.park import collect_parked, parked_root, unpark_runs

    name = "dataset=gmm_iso,grbm_gmm_setting=langevin_w_adjust"
    _started(sweep_dir(parked_root(root), EXP, "paper") / name, 3200)
    (rows,) = [r["unfinished"] for r in collect_parked(root, EXP, "paper")]
    assert rows.startswith("parked at step 3,200 of 5,000 (2026-11-24 21:00 UTC)")
    text = write_report("grbm", "paper", root, root / "rep").read_text()
    lines = {ln.split("`")[1]: ln for ln in text.splitlines() if ln.startswith("| `")}
    iso = lines["grbm-fig1-iso-langevin-w-adjust-in-modes"]
    assert f"the run {name} is unfinished (parked at step 3,200" in iso
    unpark_runs(root)
    assert collect_parked(root, EXP, "paper") == []


def test_parked_runs_are_not_git_ignored():
    """What `park` writes is meant to be committed: no ignore rule may swallow it."""
    import subprocess
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    if not (repo / ".git").exists() or shutil.which("git") is None:
        pytest.skip("not a git checkout")
    kept = "records/parked/{}/exp/paper/seed=0/checkpoints/last.pt"
    for sub in ("multirun", "runs"):
        p = subprocess.run(["git", "check-ignore", "-q", kept.format(sub)], cwd=repo)
        assert p.returncode == 1, f"{kept.format(sub)} is git-ignored"
