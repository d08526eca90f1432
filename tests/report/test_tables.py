"""python -m ebmlab.report: tables and inputs of an experiment from (fabricated) sweep runs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from ebmlab.report.__main__ import main
from ebmlab.report.grouping import cpu_share_note
from ebmlab.report.tables import series_label
from ebmlab.runs.records import archive_runs, records_root
from ebmlab.runs.rundirs import collect, key_value


def fake_run(root: Path, experiment: str, scale: str, overrides: dict, metrics: dict, **kw):
    """A finished run as ``python -m ebmlab.run -m`` leaves it (results, overrides, config)."""
    name = ",".join(f"{k}={v}" for k, v in overrides.items()) or "default"
    d = root / "multirun" / experiment / scale / name
    (d / ".hydra").mkdir(parents=True)
    (d / ".hydra" / "overrides.yaml").write_text(
        yaml.safe_dump([f"{k}={v}" for k, v in overrides.items()])
    )
    (d / "run_config.json").write_text(json.dumps({"hash": "x", "config": kw.get("config", {})}))
    results = {
        "scale": scale,
        "hardware": "CPU (test)",
        "seed": int(overrides.get("seed", 0)),
        "choices": kw.get("choices", {}),
        "metrics": metrics,
    }
    (d / "results.json").write_text(json.dumps(results))
    rows = kw.get("curve", [])
    (d / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return d


def test_table_of_an_experiment_with_seeds_curves_and_scale(root, capsys):
    exp = "dlp/fig3_ising_sampling"
    curve = [{"step": s, "seconds": 0.1 * s, "log_rmse": -s / 10} for s in (10, 20, 30)]
    for seed, v in ((0, -5.0), (1, -6.0)):
        fake_run(root, exp, "smoke", {"sampler": "dmala", "seed": seed}, {"log_rmse": v},
                 curve=curve)  # fmt: skip
    fake_run(root, exp, "smoke", {"sampler": "gwg"}, {"log_rmse": -4.5}, curve=curve)
    fake_run(root, exp, "paper", {"sampler": "gwg"}, {"log_rmse": -9.0})  # other scale
    main(["table", exp, "--scale", "smoke", "--root", str(root)])
    out = root / "tables" / exp / "smoke"
    md = (out / "table.md").read_text()
    assert "(smoke scale)" in md and "Scale: **smoke**. Hardware: CPU (test). Runs: 3" in md
    assert "| dmala | 2 | -5.5 ± 0.71 |" in md and "| gwg | 1 | -4.5 |" in md
    assert (out / "table.csv").read_text().startswith("sampler,seeds,log_rmse")
    assert (out / "table_log_rmse.png").stat().st_size > 1000
    assert "written:" in capsys.readouterr().out


def test_a_table_and_its_curves_are_rebuilt_from_the_records_of_a_fresh_clone(root, monkeypatch):
    from ebmlab.utils import plotting

    drawn, draw = [], plotting.side_by_side
    monkeypatch.setattr(plotting, "side_by_side", lambda p, **kw: drawn.append(p) or draw(p, **kw))
    exp = "dlp/fig3_ising_sampling"
    curve = [{"step": s, "seconds": 0.1 * s, "log_rmse": -s / 10} for s in (10, 20, 30)]
    fake_run(root, exp, "smoke", {"sampler": "dmala"}, {"log_rmse": -5.0}, curve=curve)
    old = fake_run(root, exp, "smoke", {"sampler": "gwg"}, {"log_rmse": -4.5})
    assert archive_runs(root, exp, "smoke") == 2
    record = records_root(root) / old.relative_to(root)
    (record / "metrics.jsonl").unlink()  # a record made before metric logs were kept
    shutil.rmtree(root / "multirun")  # the run directories are gone
    main(["table", exp, "--scale", "smoke", "--root", str(root)])
    out = root / "tables" / exp / "smoke"
    md = (out / "table.md").read_text()
    assert "| dmala | 1 | -5 |" in md and "| gwg | 1 | -4.5 |" in md
    assert (out / "table_log_rmse.png").stat().st_size > 1000
    assert [sorted(series) for _, series, _, _ in drawn[0]] == [["dmala"], ["dmala"]]


def test_paper_values_smoke_note_and_included_experiments(root):
    exp = "rmwggis/table3_ising_learning"  # its table includes dlp/fig5_ising_learning's runs
    fake_run(root, exp, "smoke", {"learner": "rm"}, {"log_rmse": -3.1},
             choices={"learner": "rm", "sampler": None})  # fmt: skip
    fake_run(root, "dlp/fig5_ising_learning", "smoke",
             {"sampler": "gwg", "learner.sampler_steps": 5}, {"log_rmse": -3.5},
             choices={"learner": "pcd", "sampler": "gwg"})  # fmt: skip
    main(["table", exp, "--scale", "smoke", "--root", str(root)])
    md = (root / "tables" / exp / "smoke" / "table.md").read_text()
    assert "| pcd | gwg | 5 | 1 | -3.5 |" in md and "| rm | - | - | 1 | -3.1 |" in md

    ebm = "dlp/table1_ebm_learning"
    fake_run(root, ebm, "smoke", {"dataset": "static_mnist", "sampler": "gwg"},
             {"test_ll": -90.0})  # fmt: skip
    main(["table", ebm, "--scale", "smoke", "--root", str(root)])
    md = (root / "tables" / ebm / "smoke" / "table.md").read_text()
    assert "smoke scale: narrow ResNet" in md  # the experiment's smoke note
    assert "paper test_ll" in md and "| gwg | static_mnist | 1 | -90 |" in md
    assert md.splitlines()[-1].split("|")[-3].strip() == "-80.01"  # DLP Table 1, GWG


def test_where_per_and_config_keys(root):
    exp = "ab/tables1to5_ess"
    for target in ("grid_J0.3000", "blr"):
        for sampler in ("gibbs", "ab_trace"):
            fake_run(root, exp, "smoke", {"ab_target": target, "sampler": sampler},
                     {"ess_n": 1.0}, config={"task": {"target": target}})  # fmt: skip
    main(["table", exp, "--scale", "smoke", "--root", str(root)])
    out = root / "tables" / exp / "smoke"
    assert sorted(p.name for p in out.glob("*.md")) == ["nonquadratic.md", "table2.md"]
    assert "blr" not in (out / "table2.md").read_text()
    nonq = (out / "nonquadratic.md").read_text()
    assert "paper sigma" in nonq and "| blr | ab_trace | 1 | 1 |" in nonq
    run = collect(root / "multirun" / exp / "smoke")[0]
    assert key_value(run, "task.target") == key_value(run, "ab_target")  # from run_config.json
    assert key_value(run, "task.nothing") == "-"
    none = {"overrides": {}, "choices": {"sampler": None}, "config": {"learner": {"s": None}}}
    assert key_value(none, "sampler") == "-" and key_value(none, "learner.s") == "-"  # not "None"


def test_inputs_name_the_trained_model_of_each_dataset(root, capsys):
    learn = "dlp/table1_ebm_learning"
    dirs = {
        ds: fake_run(root, learn, "smoke", {"dataset": ds, "sampler": "gwg"}, {"test_ll": 1})
        for ds in ("static_mnist", "caltech")
    }
    fake_run(root, learn, "smoke", {"dataset": "caltech", "sampler": "dmala"}, {"test_ll": 2})
    main(["inputs", "acs/fig5_ebm_mixing", "--scale", "smoke", "--root", str(root)])
    line = capsys.readouterr().out.strip()
    assert line == (
        f"++trained_ebm={{caltech:'{dirs['caltech']}',static_mnist:'{dirs['static_mnist']}'}}"
    )
    with pytest.raises(SystemExit, match="run that experiment first"):
        main(["inputs", "acs/fig5_ebm_mixing", "--scale", "paper", "--root", str(root)])


def test_no_runs_and_unknown_experiment_are_clear_errors(root):
    with pytest.raises(SystemExit, match="no results.json under"):
        main(["table", "acs/fig1_toy", "--scale", "smoke", "--root", str(root)])
    with pytest.raises(SystemExit, match="unknown experiment 'nope'; known: ab/"):
        main(["table", "nope", "--root", str(root)])


def test_adhoc_table_of_any_sweep_directory(root):
    sweep = fake_run(root, "x", "smoke", {"sampler": "gwg"}, {"m": 2.0}).parent
    out = root / "t" / "adhoc"
    main(["runs", str(sweep), "--group", "sampler", "--metrics", "m", "--out", str(out)])
    assert "| gwg | 1 | 2 |" in out.with_suffix(".md").read_text()


def test_runs_of_different_settings_never_share_a_row(root):
    """An override that differs between runs (learner.objective on some) becomes a column;
    one that every run shares (a declared run.n_steps) and display keys do not."""
    from ebmlab.report.grouping import row_keys
    from ebmlab.report.tables import markdown_table

    exp = "rmwggis/table3_ising_learning"
    cfg = {"learner": {"objective": "eq3"}}
    for seed in (0, 1):
        fake_run(
            root,
            exp,
            "paper",
            {"learner": "rm", "seed": seed, "run.n_steps": 50, "logger": "none"},
            {"log_rmse": -3.8 - seed},
            config=cfg,
        )
    fake_run(
        root,
        exp,
        "paper",
        {"learner": "rm", "learner.objective": "hyvarinen", "seed": 0, "run.n_steps": 50},
        {"log_rmse": -4.8},
        config={"learner": {"objective": "hyvarinen"}},
    )
    runs = collect(root / "multirun" / exp / "paper")
    assert row_keys(runs, ["learner"]) == ["learner", "learner.objective"]
    md, rows = markdown_table(runs, row_keys(runs, ["learner"]), ["log_rmse"])
    assert rows[1:] == [["rm", "eq3", "2", "-4.3 ± 0.71"], ["rm", "hyvarinen", "1", "-4.8"]]


def test_reproduction_report_keeps_variant_runs_apart(tmp_path, monkeypatch):
    """End to end through write_report: a Hyvarinen run does not count as the paper's
    RMwGGIS, a declared shorter run still does, and the report lists the declared setting."""
    from ebmlab.report import claims as C
    from ebmlab.report.reproduce import write_report

    exp = "rmwggis/table3_ising_learning"
    claims_dir = tmp_path / "claims"
    claims_dir.mkdir()
    paper_claims = {
        "paper": "Test paper",
        "claims": [
            {
                "id": "paper-value",
                "text": "the paper's RMwGGIS value",
                "experiment": exp,
                "metric": "log_rmse",
                "kind": "value",
                "where": {"learner": "rmwggis"},
                "paper": -4.0,
                "tolerance": 0.05,
            },
            {
                "id": "variant-order",
                "text": "Hyvarinen below Eq. 3",
                "experiment": exp,
                "metric": "log_rmse",
                "kind": "ordering",
                "direction": "lower",
                "order": [
                    {"learner": "rmwggis", "learner.objective": "hyvarinen"},
                    {"learner": "rmwggis"},
                ],
            },
        ],
    }
    (claims_dir / "t.yaml").write_text(yaml.safe_dump(paper_claims))
    monkeypatch.setattr(C, "CLAIMS_DIR", claims_dir)
    root = tmp_path / "outputs"
    fake_run(
        root,
        exp,
        "paper",
        {"learner": "rmwggis", "seed": 0, "run.n_steps": 500},
        {"log_rmse": -3.99},
        config={"learner": {"objective": "eq3"}},
    )
    fake_run(
        root,
        exp,
        "paper",
        {"learner": "rmwggis", "learner.objective": "hyvarinen", "seed": 0},
        {"log_rmse": -4.54},
        config={"learner": {"objective": "hyvarinen"}},
    )
    text = write_report("t", "paper", root, tmp_path / "reports").read_text()
    row = next(line for line in text.splitlines() if "`paper-value`" in line)
    assert "-3.99 (n=1)" in row and "**reproduced**" in row  # the Hyvarinen run is left out
    row = next(line for line in text.splitlines() if "`variant-order`" in line)
    assert "**reproduced**" in row
    assert "`run.n_steps=500` (1 runs)" in text


def test_a_curve_label_names_its_numbers_and_leaves_out_what_its_group_lacks():
    keys = ["learner", "sampler", "learner.sampler_steps", "learner.objective"]
    assert series_label(keys, ("pcd", "dmala", "5", "-")) == "pcd, dmala, sampler_steps=5"
    assert series_label(keys, ("rm", "-", "-", "eq3")) == "rm, eq3"


def test_the_cpu_share_note_flags_shared_cores_and_is_silent_without_data():
    assert cpu_share_note([{"cpu_share": None}, {}]) == ""
    alone = cpu_share_note([{"cpu_share": 0.98}, {"cpu_share": 1.0}])  # median of two: 0.99
    assert "median 0.99 over 2 runs (min 0.98)" in alone and "shared" not in alone
    shared = cpu_share_note([{"cpu_share": 0.66}, {"cpu_share": 0.97}, {"cpu_share": 0.7}])
    assert "median 0.70 over 3 runs (min 0.66)" in shared and "contended" in shared
