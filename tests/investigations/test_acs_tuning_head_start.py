"""scripts/investigations/acs_tuning_head_start.py: the equal-budget mean drops the last
``tune_steps`` of ACS's trace and the first ``tune_steps`` of every other sampler's."""

import json
from pathlib import Path

from tests.investigations.script import load_script


def fake_run(root: Path, sampler: str, trace: dict[int, float], tune: int = 0) -> None:
    run = root / f"dataset=caltech,sampler={sampler},seed=0,task.init=mode"
    run.mkdir(parents=True)
    lines = [json.dumps({"step": s, "log_mmd": v}) for s, v in trace.items()]
    (run / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    metrics = {"log_mmd": trace[max(trace)], "log_mmd_mean": sum(trace.values()) / len(trace)}
    if tune:
        metrics["tune_steps"] = tune
    (run / "results.json").write_text(json.dumps({"metrics": metrics}))


def test_equal_budget_means(tmp_path, monkeypatch, capsys):
    script = load_script("acs_tuning_head_start")
    monkeypatch.setattr(script, "RUNS", tmp_path / "runs")
    monkeypatch.setattr(script, "OUT", tmp_path / "out")
    # ACS tuned for 20 steps: its trace at steps 0..40 covers moves 20..60
    fake_run(script.RUNS, "acs", {0: -1.0, 20: -2.0, 40: -3.0}, tune=20)
    fake_run(script.RUNS, "dmala", {0: 0.0, 20: -1.0, 40: -2.0})
    script.main(["--dataset", "caltech", "--seeds", "0"])
    rows = {
        r.split("|")[1].strip(): [c.strip() for c in r.split("|")[2:-1]]
        for r in capsys.readouterr().out.splitlines()
        if r.startswith("| acs") or r.startswith("| dmala")
    }
    # acs: steps 0, 20 (0 + 20 <= 40 and 20 + 20 <= 40) -> mean -1.5; dmala: steps 20, 40 -> -1.5
    assert rows["acs"][3] == "-1.500" and rows["dmala"][3] == "-1.500"
    assert rows["acs"][2] == "-2.000" and rows["dmala"][2] == "-1.000"  # whole-trace means
    assert (script.OUT / "caltech_mode.md").exists()
