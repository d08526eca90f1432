"""grbm_images (GRBM Tables 1-3, Fig. 2-4): configuration errors before compute, end-to-end
runs on a tiny FashionMNIST in the official file format and on the real MNIST test set, and
kill/resume through the real entry point."""

import json
import math

import pytest

from tests.helpers import run_cli

TIMING = ("seconds", "total_seconds")


def tiny_fashion(root) -> list[str]:
    """fig4a at smoke scale on the 30 + 20 image fixture, with every option of the task on:
    Metropolis off in epoch 1, annealed alpha_0, a sample grid after epoch 1, both FID sets."""
    return [
        "experiment=grbm/fig4a_fashion_mnist",
        "scale=smoke",
        f"dataset.data_dir={root}",
        "model.n_hidden=8",
        "learner.cd_steps=3",
        "learner.batch_size=10",
        "run.n_steps=2",
        "learner.mh_off_epochs=1",
        "task.train_split=train",
        "task.fid_reference_split=test",
        "task.feature_net.train_split=train",
        "task.feature_net.epochs=1",
        "task.n_fid_samples=12",
        "task.anneal_step_size=true",
        "task.sample_every=1",
        "run.checkpoint_every=1",
        "task.n_show=4",
        "task.strip_chains=2",
        "task.strip_snapshots=2",
    ]


def _check_fashion(run, r: dict) -> None:
    name = "fid_fashion_mnist_features"
    assert math.isfinite(r[name]) and r[name] > 0 and math.isfinite(r[f"{name}_data"])
    assert "fid_inception" not in r and "fid" not in r  # never reported under the name FID
    assert 0.0 <= r["feature_net_accuracy"] <= 1.0 and 0.0 <= r["accept_rate"] <= 1.0
    assert r["n_updates"] == 6 and r["n_epochs"] == 2 and r["n_train_images"] == 30
    assert r["n_fid_samples"] == 12 and r["n_fid_real"] == 20 and r["sample_steps"] == 3
    for f in ("samples", "samples_epoch1", "intermediate_samples", "filters", "log_var"):
        assert (run / "figures" / f"{f}.png").is_file(), f
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    evals = [row for row in rows if "log_var_mean" in row]
    assert [row["step"] for row in evals] == [1, 2]
    # alpha_0 cosine-annealed by epoch: epoch 0 at 0.0390625, epoch 1 at half of it
    assert [row["step_size"] for row in evals] == [0.0390625, 0.0390625 / 2]
    assert all("recon_mse" in row and "grad_norm" in row for row in evals)


def test_fashion_run_with_every_option(fashion_mnist_root, tmp_path):
    run = tmp_path / "fashion"
    r = run_cli(tiny_fashion(fashion_mnist_root), run).results
    _check_fashion(run, r)
    assert r["feature_net_cached"] is False and r["feature_train_split"] == "train"


@pytest.mark.slow
def test_fashion_resume_after_kill_gives_the_same_numbers(fashion_mnist_root, tmp_path):
    """Killed after epoch 1 or after the last (the rerun goes straight to figures and FID)."""
    args = tiny_fashion(fashion_mnist_root)
    r = run_cli(args, tmp_path / "full").results
    for at in (1, 2):
        run = tmp_path / f"killed_{at}"
        env = {"EBMLAB_FAULT_KILL_AT_STEP": str(at)}
        killed = run_cli(args, run, env=env, check=False)
        assert killed.returncode != 0 and not (run / "results.json").exists()
        resumed = run_cli(args, run).results
        _check_fashion(run, resumed)
        assert resumed["feature_net_cached"] is True  # trained by the first run
        skip = (*TIMING, "feature_net_cached")
        assert {k: v for k, v in resumed.items() if k not in skip} == {
            k: v for k, v in r.items() if k not in skip
        }


def test_config_error_exits_2_before_compute(tmp_path):
    args = ["experiment=grbm/fig4b_celeba32", "scale=smoke", "task.feature_fid=true"]
    p = run_cli(args, tmp_path / "a", check=False)
    assert p.returncode == 2 and "task.feature_fid" in p.stderr and "no labels" in p.stderr
    args = ["experiment=grbm/table1_mnist_fid", "scale=smoke", "grbm_mnist_row=gibbs"]
    p = run_cli([*args, "task.anneal_step_size=true"], tmp_path / "b", check=False)
    assert p.returncode == 2 and "task.anneal_step_size" in p.stderr and "Gibbs" in p.stderr


@pytest.mark.slow
def test_missing_celeba_exits_2(tmp_path):
    args = ["experiment=grbm/fig4b_celeba32", "scale=smoke", f"dataset.data_dir={tmp_path}"]
    p = run_cli(args, tmp_path / "b", check=False)
    assert p.returncode == 2 and "list_eval_partition.txt" in p.stderr


@pytest.mark.slow
def test_mnist_images_run_with_both_fid_names(shared_data, tmp_path):
    run = tmp_path / "mnist"
    args = [
        "experiment=grbm/table1_mnist_fid",
        "scale=smoke",
        f"dataset.data_dir={shared_data}",
        "run.n_steps=1",
        "learner.batch_size=50",
        "learner.cd_steps=5",
        'task.train_split="test[:100]"',
        'task.feature_net.train_split="test[:1000]"',
        "task.feature_net.epochs=1",
        "task.n_fid_samples=100",
        "task.n_fid_real=300",
        "task.n_show=16",
        "task.strip_chains=2",
        "task.strip_snapshots=3",
        "model.n_hidden=16",
    ]
    r = run_cli(args, run).results
    assert math.isfinite(r["fid_mnist_features"]) and r["fid_mnist_features"] > 0
    assert r["fid_mnist_features_data"] < r["fid_mnist_features"]
    assert "fid_inception" not in r and "fid" not in r  # never reported under the name FID
    assert r["n_updates"] == 2 and r["feature_train_split"] == "test[:1000]"
    assert r["n_fid_real"] == 300 and r["fid_reference_split"] == "test[5000:]"
    for f in ("samples", "intermediate_samples", "filters", "log_var"):
        assert (run / "figures" / f"{f}.png").is_file(), f
