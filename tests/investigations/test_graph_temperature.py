"""scripts/investigations/graph_temperature.py and ebmlab.models.tempered: a trained graph
energy sampled at other temperatures, as the task generates its graphs."""

import json

import pytest
import torch

from ebmlab.models.tempered import Tempered
from tests.exactness import frustrated_ising
from tests.helpers import run_cli
from tests.investigations.script import load_script
from tests.tasks.test_graph_generation import FIXTURE, TINY

pytestmark = pytest.mark.usefixtures("one_thread")


def test_tempered_scales_log_prob_and_flip_deltas(gen):
    model = frustrated_ising(5)
    x = (torch.rand(7, 5, generator=gen) < 0.5).double()
    hot = Tempered(model, 0.25)
    torch.testing.assert_close(hot.log_prob(x), 0.25 * model.log_prob(x))
    torch.testing.assert_close(hot.flip_deltas(x), 0.25 * model.flip_deltas(x))
    assert hot.dim == 5 and hot.state_kind == "binary"
    with pytest.raises(ValueError, match="beta must be positive"):
        Tempered(model, 0.0)


def test_heating_a_trained_graph_energy_adds_edges(tmp_path, monkeypatch):
    """On a tiny trained run (its edge bias starts at the training density): each beta gets a
    row, and near-infinite temperature gives about half the edge bits on, far more than at
    beta 1."""
    run_dir = tmp_path / "run"
    run_cli(TINY + [f"dataset.data_dir={FIXTURE}", "dataset.n_test=1"], run_dir)
    script = load_script("graph_temperature")
    monkeypatch.setattr(script, "OUT", tmp_path / "out")
    script.main([str(run_dir), "--betas", "0.001", "1", "--samples", "64"])
    done = json.loads((tmp_path / "out" / "results.json").read_text())
    assert len(done) == 2
    rows = {float(k.split(" | ")[1].split()[1]): v for k, v in done.items()}
    assert rows[0.001]["bit_density"] == pytest.approx(0.5, abs=0.05)
    assert rows[0.001]["edges"] > 2 * rows[1.0]["edges"]
    assert all(r["avg"] >= 0 and r["edges"] >= 0 for r in rows.values())
    assert "| 0.001 (1000) |" in (tmp_path / "out" / "table.md").read_text()
    assert (tmp_path / "out" / "temperature.png").stat().st_size > 0
    assert not (tmp_path / "out" / "checkpoints.png").exists()  # no --checkpoints rows
    script.main([str(run_dir), "--betas", "1", "--samples", "64"])  # kept, not redrawn
    assert json.loads((tmp_path / "out" / "results.json").read_text()) == done


def test_checkpoints_of_one_run_are_rows_named_by_their_iteration(tmp_path, monkeypatch):
    """--checkpoints evaluates the given files of one run (e.g. snapshots of a running one),
    each row named by the iteration its checkpoint was written at; more than one run with
    --checkpoints is refused."""
    run_dir = tmp_path / "run"
    run_cli(TINY + [f"dataset.data_dir={FIXTURE}", "dataset.n_test=1"], run_dir)
    script = load_script("graph_temperature")
    monkeypatch.setattr(script, "OUT", tmp_path / "out")
    ck = run_dir / "checkpoints"
    previous = min(ck.glob("last.*.pt"))  # the generation before the last (docs/runs.md)
    script.main([str(run_dir), "--checkpoints", str(previous), str(ck / "last.pt")])
    keys = list(json.loads((tmp_path / "out" / "results.json").read_text()))
    assert [k.split(" | ")[0].split(", ")[-1] for k in keys][::3] == [
        "iteration 2 of 3",
        "3 iterations",
    ]
    assert (tmp_path / "out" / "checkpoints.png").stat().st_size > 0  # iteration 2 of 3
    with pytest.raises(SystemExit, match="exactly one run"):
        script.main([str(run_dir), str(run_dir), "--checkpoints", str(ck / "last.pt")])


def test_rows_name_the_buffer_reinit_of_a_pcd_run():
    """Runs that differ only in their buffer re-initialisation get different row names."""
    label = load_script("graph_temperature").label
    config = {"task": {}, "run": {"n_steps": 5000}}
    run = {"config": config, "choices": {"sampler": "gwg"}, "seed": 0}
    assert label(run, 5000) == "EBM(GWG), seed 0, 5,000 iterations"
    run["config"]["task"]["buffer_reinit"] = 0.2
    assert label(run, 4600) == "EBM(GWG, re-init 0.2), seed 0, iteration 4,600 of 5,000"


def test_rows_name_the_variant_of_sampled_ratio_matching_only():
    label = load_script("graph_temperature").label
    lr = {"objective": "hyvarinen", "variant": "advanced", "estimator": "full"}
    config = {"task": {}, "run": {"n_steps": 20}, "learner": lr}
    run = {"config": config, "choices": {"learner": "rm"}}
    run["seed"] = 0
    assert label(run, 20) == "rm hyvarinen (exact), seed 0, 20 iterations"
    run["choices"]["learner"], lr["estimator"], lr["variant"] = "rmwggis", "ggis", "basic"
    assert label(run, 20) == "rmwggis hyvarinen basic, seed 0, 20 iterations"
