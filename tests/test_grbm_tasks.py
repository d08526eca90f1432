"""GRBM tasks: image loaders (real file formats), GMM metrics, end-to-end runs via the CLI."""

import json
import math

import numpy as np
import pytest
import torch

from ebmlab.data.gmm_toy import GMMToyDataset, gmm_toy
from ebmlab.data.grayscale_images import CELEBA_CROP, GrayscaleImages, parse_split
from ebmlab.data.idx import write_idx
from ebmlab.errors import ConfigError
from ebmlab.models.grbm import GRBM
from ebmlab.tasks.grbm_gmm import GRBMGmm, mode_stats
from tests.helpers import run_cli


# ------------------------------------------------------------------------------ loaders
def _fashion_fixture(root, n_train=30, n_test=20):
    d = root / "FashionMNIST" / "raw"
    d.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for p, n in (("train", n_train), ("t10k", n_test)):
        write_idx(d / f"{p}-images-idx3-ubyte.gz", rng.integers(0, 256, (n, 28, 28), np.uint8))
        write_idx(d / f"{p}-labels-idx1-ubyte.gz", rng.integers(0, 10, n).astype(np.uint8))
    return rng


def test_fashion_mnist_idx_splits_and_normalisation(tmp_path):
    _fashion_fixture(tmp_path)
    ds = GrayscaleImages("fashion_mnist", str(tmp_path))
    x, y = ds.load("train")
    assert x.shape == (30, 1, 28, 28) and x.dtype == torch.uint8 and y.shape == (30,)
    xs, ys = ds.load("train[5:12]")
    assert torch.equal(xs, x[5:12]) and torch.equal(ys, y[5:12])
    assert ds.load("test[-4:]")[0].shape[0] == 4
    v = ds.preprocess(x)
    assert v.shape == (30, 784)
    assert torch.allclose(ds.to_unit(v), x.float() / 255, atol=1e-6)
    # the paper's constants: a constant image at the mean pixel maps to 0, one std above to 1
    c = torch.full((1, 1, 28, 28), 0.2860 * 255)
    assert ds.preprocess(c).abs().max() < 1e-5
    assert ds.preprocess(torch.full((1, 1, 28, 28), (0.2860 + 0.3530) * 255)).mean() == (
        pytest.approx(1.0, abs=1e-5)
    )


def test_split_spec_errors_and_missing_files(tmp_path):
    assert parse_split("test[:5000]") == ("test", slice(None, 5000))
    assert parse_split("train") == ("train", slice(None))
    for bad in ("training", "test[1]", "test[a:b]"):
        with pytest.raises(ConfigError, match="task.train_split"):
            parse_split(bad, "task.train_split")
    ds = GrayscaleImages("fashion_mnist", str(tmp_path))
    with pytest.raises(FileNotFoundError, match="t10k-images-idx3-ubyte.*fashion"):
        ds.check_files(["test"])
    with pytest.raises(ConfigError, match="only train and test"):
        ds.load("valid")
    with pytest.raises(FileNotFoundError, match="list_eval_partition.txt"):
        GrayscaleImages("celeba32", str(tmp_path)).check_files(["train"])
    with pytest.raises(ConfigError, match="dim"):
        GrayscaleImages("mnist", str(tmp_path), dim=3072)


def _celeba_fixture(root, n=6):
    from PIL import Image

    img_dir = root / "celeba" / "img_align_celeba"
    img_dir.mkdir(parents=True)
    lines = []
    for i in range(n):
        a = np.zeros((218, 178, 3), np.uint8)
        a[..., 2] = 255  # blue border
        top, left = (218 - CELEBA_CROP) // 2, (178 - CELEBA_CROP) // 2
        a[top : top + CELEBA_CROP, left : left + CELEBA_CROP] = (255, 0, 0)  # red centre crop
        a[top : top + 10, left : left + 10] = (0, 255, 0)  # green top-left corner of the crop
        name = f"{i + 1:06d}.jpg"
        Image.fromarray(a).save(img_dir / name, quality=95)
        lines.append(f"{name} {0 if i < n - 2 else 2}")
    (root / "celeba" / "list_eval_partition.txt").write_text("\n".join(lines) + "\n")


def test_celeba_crop_resize_partition_and_cache(tmp_path):
    _celeba_fixture(tmp_path)
    ds = GrayscaleImages("celeba32", str(tmp_path / "data"), cache_dir=str(tmp_path / "cache"))
    ds.data_dir = tmp_path  # the fixture root
    x, y = ds.load("train")
    assert y is None and x.shape == (4, 3, 32, 32) and x.dtype == torch.uint8
    assert ds.load("test")[0].shape[0] == 2
    f = x.float()
    # the centre crop is all red except a green corner: no blue border survives (JPEG chroma
    # blur leaks a little into the outermost pixels)
    assert f[:, 2, 1:-1, 1:-1].max() < 30 and f[:, 2].mean() < 15
    assert f[:, 0, 10:, 10:].mean() > 230 and f[:, 1, :2, :2].mean() > 150
    assert len(list((tmp_path / "cache").glob("celeba-celeba32-train-*.pt"))) == 1
    for f in (tmp_path / "celeba" / "img_align_celeba").glob("00000[1-4].jpg"):
        f.rename(f.with_suffix(".bak"))  # the train images are gone: must come from the cache
    again = GrayscaleImages("celeba32", str(tmp_path), cache_dir=str(tmp_path / "cache"))
    assert torch.equal(again.load("train")[0], x)
    for f in (tmp_path / "celeba" / "img_align_celeba").glob("*.bak"):
        f.rename(f.with_suffix(".jpg"))
    ds64 = GrayscaleImages("celeba2k64", str(tmp_path), n_subset=3, subset_seed=5)
    a = ds64.load("train")[0]
    assert a.shape == (3, 3, 64, 64)
    assert torch.equal(
        GrayscaleImages("celeba2k64", str(tmp_path), n_subset=3, subset_seed=5).load("train")[0], a
    )
    u = ds64.to_unit(ds64.preprocess(a))
    assert u.shape == (3, 3, 64, 64) and torch.allclose(u, a.float() / 255, atol=1e-5)


# --------------------------------------------------------------------------- GMM metrics
def test_mode_stats_known_answers():
    means = torch.tensor([[-5.0, -5.0], [5.0, -5.0], [0.0, 5.0]])
    exact = torch.cat([means[0].expand(33, 2), means[1].expand(33, 2), means[2].expand(34, 2)])
    assert mode_stats(exact, "iso") == {"in_mode": 1.0, "modes_covered": 3, "mode_tv": 0.0}
    one = mode_stats(means[2].expand(50, 2), "iso")
    assert one["modes_covered"] == 1 and one["mode_tv"] == pytest.approx(0.66)
    far = mode_stats(torch.full((10, 2), 50.0), "aniso")
    assert far == {"in_mode": 0.0, "modes_covered": 0, "mode_tv": 1.0}
    # a point 2 std away along the narrow aniso axis of component 0 (std 0.5 in y) is inside
    assert mode_stats(torch.tensor([[-5.0, -4.0]]), "aniso")["in_mode"] == 1.0
    assert mode_stats(torch.tensor([[-5.0, -3.0]]), "aniso")["in_mode"] == 0.0


def test_grid_kl_matches_monte_carlo_for_a_gaussian_grbm():
    """With W = 0 the GRBM is N(mu, diag(var)); KL(p_true || model) from the grid must match a
    Monte Carlo estimate from 200,000 true samples within 4 standard errors."""
    task = GRBMGmm(plot_range=12.0, grid_points=241)
    task.data = GMMToyDataset("aniso")
    model = GRBM(2, 3)
    with torch.no_grad():
        model.W.zero_()
        model.b.fill_(0.3)
        model.mu.copy_(torch.tensor([0.5, -1.0]))
        model.log_var.copy_(torch.log(torch.tensor([20.0, 30.0])))
    task.model = model
    ev = task.evaluate("cpu")
    x = gmm_toy("aniso", 200_000, torch.Generator().manual_seed(0)).double()
    var = model.var.double()
    log_q = (
        -0.5 * ((x - model.mu.double()) ** 2 / var).sum(1)
        - 0.5 * torch.log(var).sum()
        - math.log(2 * math.pi)
    )
    diff = task.data.log_prob(x) - log_q
    se = float(diff.detach().std() / math.sqrt(x.shape[0]))
    assert ev["kl"] == pytest.approx(float(diff.detach().mean()), abs=4 * se + 1e-3)
    with torch.no_grad():
        assert ev["log_z"] == pytest.approx(float(model.log_partition()), abs=1e-3)


# ---------------------------------------------------------------------- end-to-end runs
TINY_GMM = [
    "experiment=grbm_gmm_smoke",
    "task.n_epochs=2",
    "task.eval_every=1",
    "task.checkpoint_every=1",
    "task.n_samples=200",
    "task.grid_points=41",
    "task.batch_size=250",
    "model.n_hidden=16",
    "learner.cd_steps=5",
    "task.label=gibbs_langevin_w_adjust",
]


def _gmm_run(run):
    r = run_cli(TINY_GMM, run).results
    for k in ("kl", "test_nll", "sample_in_mode", "sample_modes_covered", "sample_mode_tv"):
        assert math.isfinite(r[k]), k
    assert 0.0 <= r["accept_rate"] <= 1.0 and r["sample_steps"] == 5
    assert (run / "figures" / "gmm.png").is_file() and (run / "gmm_arrays.pt").is_file()
    return r


def test_gmm_run_and_figure(tmp_path):
    _gmm_run(tmp_path / "gmm")
    from ebmlab.tasks.grbm_gmm import figure

    assert figure([tmp_path], tmp_path / "fig1.png").is_file()


@pytest.mark.slow
def test_gmm_resume_after_kill_gives_the_same_numbers(tmp_path):
    r = _gmm_run(tmp_path / "gmm")
    run2 = tmp_path / "gmm_killed"
    killed = run_cli(TINY_GMM, run2, env={"EBMLAB_FAULT_KILL_AT_STEP": "1"}, check=False)
    assert killed.returncode != 0 and not (run2 / "results.json").exists()
    resumed = run_cli(TINY_GMM, run2)
    assert resumed.results["kl"] == pytest.approx(r["kl"], rel=1e-6)
    assert resumed.results["sample_mode_tv"] == r["sample_mode_tv"]


def test_config_error_exits_2_before_compute(tmp_path):
    p = run_cli(
        ["experiment=grbm_celeba32_smoke", "task.feature_fid=true"], tmp_path / "a", check=False
    )
    assert p.returncode == 2 and "task.feature_fid" in p.stderr and "no labels" in p.stderr


@pytest.mark.slow
def test_missing_celeba_exits_2(tmp_path):
    p = run_cli(
        ["experiment=grbm_celeba32_smoke", f"dataset.data_dir={tmp_path}"],
        tmp_path / "b",
        check=False,
    )
    assert p.returncode == 2 and "list_eval_partition.txt" in p.stderr


@pytest.mark.slow
def test_mnist_images_run_with_both_fid_names(shared_data, tmp_path):
    run = tmp_path / "mnist"
    args = [
        "experiment=grbm_mnist_smoke",
        f"dataset.data_dir={shared_data}",
        "task.n_epochs=1",
        "task.batch_size=50",
        'task.train_split="test[:100]"',
        'task.feature_train_split="test[:1000]"',
        "task.feature_epochs=1",
        "task.n_fid_samples=100",
        "task.n_fid_real=300",
        "task.n_show=16",
        "task.strip_chains=2",
        "task.strip_snapshots=3",
        "model.n_hidden=16",
        "learner.cd_steps=5",
    ]
    r = run_cli(args, run).results
    assert math.isfinite(r["fid_mnist_features"]) and r["fid_mnist_features"] > 0
    assert r["fid_mnist_features_data"] < r["fid_mnist_features"]
    assert "fid_inception" not in r and "fid" not in r  # never reported under the name FID
    assert r["n_updates"] == 2 and r["feature_train_split"] == "test[:1000]"
    for f in ("samples", "intermediate_samples", "filters", "log_var"):
        assert (run / "figures" / f"{f}.png").is_file(), f
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert any("log_var_mean" in row for row in rows)
