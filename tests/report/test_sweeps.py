"""`reproduce --run` / `--dry-run` launch only the claims' runs that have not finished (issue 41
follow-up): runs finished here or in the committed records are subtracted, matched by the hash
of the config the job would run, and the rest are grouped into as few exact sweeps as possible."""

import copy
import functools
import json
import subprocess
from itertools import product
from pathlib import Path

import pytest
from omegaconf import open_dict

import ebmlab.run  # noqa: F401 - registers the config resolvers
from ebmlab.report.reproduce import points, reproduce
from ebmlab.runs import sweeps
from ebmlab.runs.layout import sweep_dir
from ebmlab.runs.records import records_root
from ebmlab.runs.sweeps import grids, missing_jobs
from ebmlab.utils.config import compose_job
from ebmlab.utils.rundir import identity

EXP = "acs/fig1_toy"  # its claims want sampler=acs,rwm,dmala,ab_1st x seeds 0,1,2 (12 runs)
REPO = Path(__file__).resolve().parents[2]


def _launched(sweep_grids: list[dict]) -> list[str]:
    return sorted(str(dict(zip(g, vs))) for g in sweep_grids for vs in product(*g.values()))


@functools.cache
def _composed(overrides: tuple[str, ...]):
    return compose_job([f"experiment={EXP}", "scale=paper", *overrides])[1]


def _finished(base: Path, name: str, overrides: list[str], seed: int, parked=False) -> None:
    """A finished run of ``EXP`` (paper scale) below ``base`` with the config that
    ``python -m ebmlab.run experiment=EXP scale=paper <overrides> seed=<seed>`` runs."""
    cfg = copy.deepcopy(_composed(tuple(overrides)))
    with open_dict(cfg):
        del cfg["hydra"]
        cfg.seed = seed
    ident = identity(cfg)
    d = base / name
    d.mkdir(parents=True)
    (d / "run_config.json").write_text(json.dumps(ident))
    if parked:  # unfinished, with its progress (records/parked/, `python -m ebmlab.report park`)
        progress = {"step": 5, "n_steps": 10, "updated": "2026-11-27 23:00 UTC"}
        (d / "progress.json").write_text(json.dumps(progress))
    else:
        (d / "results.json").write_text(json.dumps({"metrics": {"x": 1.0}, "seed": seed}))


def test_grids_cover_exactly_the_jobs_with_as_few_sweeps_as_share_their_values():
    jobs = [{"s": s, "seed": k} for s in ("a", "b") for k in (0, 1, 2)] + [{"s": "c", "seed": 2}]
    found = grids(["s", "seed"], jobs)
    assert _launched(found) == sorted(map(str, jobs))
    assert len(found) == 2  # {a,b} x {0,1} and {a,b,c} x {2} (not one sweep per seed)
    full = [{"s": s, "seed": k} for s in ("a", "b") for k in (0, 1)]
    assert grids(["s", "seed"], full) == [{"s": ["a", "b"], "seed": [0, 1]}]


def test_dry_run_lists_only_the_runs_not_yet_finished_or_recorded(root, capsys):
    """Seeds 0-2 of ACS recorded (one under a directory name no sweep gives), RWM seed 0
    finished here: 4 of 12 done; the 8 others and nothing else are printed."""
    recorded = sweep_dir(records_root(root), EXP, "paper")
    for seed in range(3):
        _finished(recorded, f"renamed_{seed}", ["sampler=acs"], seed)
    _finished(sweep_dir(root, EXP, "paper"), "sampler=rwm,seed=0", ["sampler=rwm"], 0)
    # a run at other settings (a shorter run) is not the wanted one
    _finished(recorded, "short", ["sampler=dmala", "run.n_steps=10"], 0)
    parked = sweep_dir(records_root(root) / "parked", EXP, "paper")
    _finished(parked, "sampler=dmala,seed=1", ["sampler=dmala"], 1, parked=True)

    plan = missing_jobs(root, EXP, "paper", points_of_fig1(), 3, [])
    assert (plan.wanted, plan.done, plan.missing) == (12, 4, 8)
    assert (plan.parked, plan.others) == (1, 1)  # named, so a user can unpark or pass --args
    wanted = [{"sampler": s, "seed": k} for s in ("rwm", "dmala", "ab_1st") for k in range(3)]
    wanted.remove({"sampler": "rwm", "seed": 0})
    assert _launched(plan.sweeps) == sorted(map(str, wanted))
    assert len(plan.sweeps) == 2

    code = reproduce("acs", "paper", root, root / "rep", True, [EXP], [], True)
    out = capsys.readouterr().out
    assert code == 0
    assert f"{EXP} (paper): 12 runs wanted, 4 finished or recorded, 8 to run in 2 sweep(s)" in out
    assert "1 of them parked: `python -m ebmlab.report unpark` first resumes them" in out
    commands = [ln for ln in out.splitlines() if ln.startswith("+ ") and f"={EXP} " in ln]
    assert len(commands) == 2 and all("sampler=acs" not in c for c in commands)
    assert not (root / "rep").exists()


def test_run_launches_only_the_missing_sweeps_and_nothing_when_all_are_recorded(
    root, monkeypatch, capsys
):
    launched = []
    monkeypatch.setattr(
        sweeps.subprocess,
        "run",
        lambda cmd, **kw: launched.append(cmd) or subprocess.CompletedProcess(cmd, 0),
    )
    recorded = sweep_dir(records_root(root), EXP, "paper")
    for sampler, seed in product(("acs", "rwm", "dmala"), range(3)):
        _finished(recorded, f"sampler={sampler},seed={seed}", [f"sampler={sampler}"], seed)
    assert reproduce("acs", "paper", root, root / "rep", True, [EXP], [], False) == 0
    (cmd,) = launched
    assert "sampler=ab_1st" in cmd and "seed=0,1,2" in cmd and f"experiment={EXP}" in cmd
    for seed in range(3):
        _finished(recorded, f"sampler=ab_1st,seed={seed}", ["sampler=ab_1st"], seed)
    launched.clear()
    reproduce("acs", "paper", root, root / "rep", True, [EXP], [], True)
    assert launched == []
    assert "12 runs wanted, 12 finished or recorded, 0 to run" in capsys.readouterr().out


def test_the_committed_records_of_fig1_count_as_its_runs():
    """The hash a job is matched by is the one `python -m ebmlab.run` recorded: every ACS
    Fig. 1 run on record (paper scale) is found, so none is launched again."""
    recorded = sweep_dir(REPO / "records", EXP, "paper")
    if len(list(recorded.rglob("results.json"))) < 12:
        pytest.skip("the records of ACS Fig. 1 are not in this checkout")
    plan = missing_jobs(REPO / "outputs", EXP, "paper", points_of_fig1(), 3, [])
    assert (plan.wanted, plan.done, plan.sweeps) == (12, 12, [])


def points_of_fig1() -> list[dict]:
    from ebmlab.report.claims import load_claims

    return points(load_claims("acs")["claims"], EXP)
