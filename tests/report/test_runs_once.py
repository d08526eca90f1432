"""Tables count each run once: runs are keyed by their config hash wherever they live (a sweep's
``multirun/`` directory, a single run's ``runs/`` directory, this machine or the records).

The README's sequence: ``make table-ising-sampling SCALE=smoke`` (writes ``sampler=gwg/``, seed 0
by default), then more seeds the README's way (``seed=0,1``: writes ``sampler=gwg,seed=0/``, the
same run again, and ``sampler=gwg,seed=1/``); a single run (no ``-m``) lands in ``runs/``.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import yaml

from ebmlab.report.__main__ import main
from ebmlab.runs.records import collect_recorded, records_root
from ebmlab.runs.rundirs import collect

EXP = "dlp/fig3_ising_sampling"
# a seed's log-RMSE: the same config and seed give the same number wherever it ran
LOG_RMSE = {("gwg", 0): -4.0, ("gwg", 1): -5.0, ("gwg", 2): -6.0, ("dmala", 0): -7.0}


def fake_run(base: Path, name: str, sampler: str, seed: int, overrides: list[str]) -> Path:
    """A finished run as ``python -m ebmlab.run`` leaves it: its identity (run_config.json, the
    hash of the resolved config), its overrides and results."""
    config = {"seed": seed, "sampler": {"_target_": sampler}, "task": {"n_steps": 1000}}
    digest = hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()[:16]
    d = base / EXP / "smoke" / name
    (d / ".hydra").mkdir(parents=True)
    (d / ".hydra" / "overrides.yaml").write_text(
        yaml.safe_dump([f"experiment={EXP}", "scale=smoke", *overrides])
    )
    (d / "run_config.json").write_text(json.dumps({"hash": digest, "config": config}))
    results = {
        "scale": "smoke",
        "hardware": "CPU (test)",
        "seed": seed,
        "choices": {"sampler": sampler},
        "config_hash": digest,
        "metrics": {"log_rmse": LOG_RMSE[(sampler, seed)]},
    }
    (d / "results.json").write_text(json.dumps(results))
    return d


def readme_sequence(root: Path) -> None:
    sweeps = root / "multirun"
    fake_run(sweeps, "sampler=gwg", "gwg", 0, ["sampler=gwg"])  # make table-ising-sampling
    fake_run(sweeps, "sampler=gwg,seed=0", "gwg", 0, ["sampler=gwg", "seed=0"])  # seed=0,1
    fake_run(sweeps, "sampler=gwg,seed=1", "gwg", 1, ["sampler=gwg", "seed=1"])


def table_rows(root: Path) -> dict[str, list[str]]:
    main(["table", EXP, "--scale", "smoke", "--root", str(root)])
    md = (root / "tables" / EXP / "smoke" / "table.md").read_text()
    rows = [ln.strip("|").split("|") for ln in md.splitlines() if ln.startswith("| ")][1:]
    return {r[0].strip(): [c.strip() for c in r[1:]] for r in rows}


def test_a_run_repeated_under_another_directory_name_counts_once(root):
    readme_sequence(root)
    runs = collect(root / "multirun" / EXP / "smoke")
    assert sorted(r["seed"] for r in runs) == [0, 1]
    gwg = table_rows(root)["gwg"]
    assert gwg[0] == "2", "n counts seeds 0 and 1 once each"
    assert gwg[1] == "-4.5 ± 0.71", "the spread of two runs, not of three with one repeated"


def test_a_single_run_appears_in_its_table_and_counts_once(root):
    readme_sequence(root)
    single = root / "runs"
    fake_run(single, "sampler=dmala", "dmala", 0, ["sampler=dmala"])  # only run alone
    fake_run(single, "seed=2", "gwg", 2, ["seed=2"])  # a third seed of the sweep's sampler
    fake_run(single, "default", "gwg", 0, [])  # the sweep's seed 0 once more
    rows = table_rows(root)
    assert rows["dmala"][:2] == ["1", "-7"]
    assert rows["gwg"][:2] == ["3", "-5 ± 1"]


def test_a_record_of_a_run_also_here_counts_once(root):
    """A run both on this machine and in records/ (under another name) counts once;
    a recorded run that is not here still counts."""
    readme_sequence(root)
    kept = records_root(root) / "multirun"
    fake_run(kept, "sampler=gwg,seed=1,logger=none", "gwg", 1, ["sampler=gwg", "seed=1"])
    fake_run(kept, "sampler=gwg,seed=2", "gwg", 2, ["sampler=gwg", "seed=2"])
    runs = collect_recorded(root, EXP, "smoke")
    assert sorted(r["seed"] for r in runs) == [0, 1, 2]
    assert table_rows(root)["gwg"][:2] == ["3", "-5 ± 1"]


def test_an_ad_hoc_table_of_several_directories_counts_each_run_once(root):
    """``report runs DIR DIR ...``: the same run in two of the directories counts once."""
    readme_sequence(root)
    fake_run(root / "runs", "default", "gwg", 0, [])
    dirs = [str(root / sub / EXP / "smoke") for sub in ("multirun", "runs")]
    out = root / "adhoc"
    main(["runs", *dirs, "--group", "sampler", "--metrics", "log_rmse", "--out", str(out)])
    assert "| gwg | 2 | -4.5 ± 0.71 |" in out.with_suffix(".md").read_text()
