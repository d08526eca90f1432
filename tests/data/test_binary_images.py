"""Binary image loaders: every format on fixture files (tests/fixtures/images, written by
make_fixtures.py in the real formats), and on the real copies in ../shared/data when present."""

from __future__ import annotations

import gzip
import importlib.util
import math
import shutil
import struct
from pathlib import Path

import numpy as np
import pytest
import torch

from ebmlab.data.binary_images import BinaryImages, ImageSplit, binarize_batch
from ebmlab.data.idx import read_idx, write_idx
from ebmlab.errors import ConfigError
from tests.helpers import from_conf

FIX = Path(__file__).parents[1] / "fixtures" / "images"
_spec = importlib.util.spec_from_file_location("make_fixtures", FIX / "make_fixtures.py")
mf = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(mf)


def images(option: str, data_dir, **kw) -> BinaryImages:
    """conf/dataset/<option>.yaml reading ``data_dir`` (``kw`` overrides other keys)."""
    return from_conf(f"dataset/{option}", data_dir=str(data_dir), **kw)


def _flat(imgs) -> torch.Tensor:
    return torch.from_numpy(np.stack(imgs).reshape(len(imgs), 784).astype(np.float32))


# ------------------------------------------------------------------------------------ IDX


def test_idx_reader_hand_written_bytes(tmp_path):
    arr = np.arange(2 * 3 * 4, dtype=np.uint8).reshape(2, 3, 4)
    raw = bytes([0, 0, 8, 3]) + struct.pack(">3I", 2, 3, 4) + arr.tobytes()
    (tmp_path / "a-idx3-ubyte").write_bytes(raw)
    (tmp_path / "a.gz").write_bytes(gzip.compress(raw))
    np.testing.assert_array_equal(read_idx(tmp_path / "a-idx3-ubyte"), arr)
    np.testing.assert_array_equal(read_idx(tmp_path / "a.gz"), arr)
    # big-endian int32 payload
    ints = np.array([1, -2, 70000], dtype=">i4")
    (tmp_path / "i").write_bytes(bytes([0, 0, 0x0C, 1]) + struct.pack(">I", 3) + ints.tobytes())
    np.testing.assert_array_equal(read_idx(tmp_path / "i"), [1, -2, 70000])


def test_idx_roundtrip_and_errors(tmp_path):
    a = np.random.default_rng(0).normal(size=(3, 5)).astype(np.float32)
    write_idx(tmp_path / "f.gz", a)
    np.testing.assert_array_equal(read_idx(tmp_path / "f.gz"), a)
    (tmp_path / "bad").write_bytes(b"\x01\x02\x03\x04rest")
    with pytest.raises(ValueError, match="not an IDX"):
        read_idx(tmp_path / "bad")
    raw = bytes([0, 0, 8, 1]) + struct.pack(">I", 10) + b"\x00" * 4  # truncated
    (tmp_path / "short").write_bytes(raw)
    with pytest.raises(ValueError, match="header says"):
        read_idx(tmp_path / "short")


# ---------------------------------------------------------------------------- fixtures


def test_static_mnist_fixture_amat_and_mat():
    ds = images("static_mnist", FIX)
    for split, n in mf.SIZES["static"].items():
        sp = ds.split(split)
        want = _flat([mf.binary_image(i, 100 * len(split)) for i in range(n)])
        assert sp.x.shape == (n, 784) and sp.x.dtype == torch.float32
        assert torch.equal(sp.x, want), split  # .amat (train) and .mat (valid/test), upright
        assert sp.labels is None and sp.binarize == "static"


def test_dynamic_mnist_fixture_splits_and_fixed_eval_bits():
    ds = images("dynamic_mnist", FIX, n_valid=10)
    gray = _flat([mf.gray_image(i) for i in range(30)]) / 255.0
    assert ds.train.binarize == "dynamic"
    assert torch.allclose(ds.train.x, gray[:20]) and len(ds.valid) == 10 and len(ds.test) == 10
    assert torch.equal(ds.train.labels, torch.arange(20) % 10)
    assert torch.equal(ds.valid.labels, torch.arange(20, 30) % 10)
    # valid/test are binarised once with a fixed seed: binary, reproducible across loads
    for s in ("valid", "test"):
        a, b = ds.split(s), images("dynamic_mnist", FIX, n_valid=10).split(s)
        assert a.binarize == "static" and set(a.x.unique().tolist()) <= {0.0, 1.0}
        assert torch.equal(a.x, b.x)
    # fixed bits follow the grayscale: pixels with p = 0 are 0, p = 1 (255) are 1
    g_valid = gray[20:]
    assert torch.all(ds.valid.x[g_valid == 0] == 0) and torch.all(ds.valid.x[g_valid == 1] == 1)


def test_dynamic_mnist_default_n_valid_too_large_for_fixture():
    with pytest.raises(ConfigError, match="n_valid=10000 leaves no training"):
        images("dynamic_mnist", FIX).train


def test_mnist_threshold_fixture():
    ds = images("mnist_threshold", FIX)
    gray = _flat([mf.gray_image(i) for i in range(30)]) / 255.0
    assert torch.equal(ds.train.x, (gray > 0.5).float())
    test_gray = _flat([mf.gray_image(i, 50) for i in range(10)]) / 255.0
    assert torch.equal(ds.test.x, (test_gray > 0.5).float())
    with pytest.raises(ConfigError) as e:
        ds.valid
    assert e.value.key == "n_valid"
    ds2 = images("mnist_threshold", FIX, n_valid=5)
    assert len(ds2.train) == 25 and len(ds2.valid) == 5


def test_emnist_fixture_transposed_upright():
    ds = images("emnist", FIX, binarize="dynamic", n_valid=0)
    want = _flat([mf.gray_image(i, 10) for i in range(30)]) / 255.0
    assert torch.allclose(ds.train.x, want)  # stored transposed, returned upright
    assert torch.equal(ds.test.labels, (torch.arange(10) + 3) % 10)
    thr = images("emnist", FIX).test
    assert torch.equal(
        thr.x, (_flat([mf.gray_image(i, 60) for i in range(10)]) / 255 > 0.5).float()
    )


def test_kmnist_fixture_npz_and_idx_fallback(tmp_path):
    ds = images("kmnist", FIX, binarize="dynamic")
    want = _flat([mf.gray_image(i, 20) for i in range(30)]) / 255.0
    assert torch.allclose(ds.train.x, want)
    assert torch.equal(ds.train.labels, (torch.arange(30) + 5) % 10)
    # torchvision layout: KMNIST/raw IDX files, uncompressed
    raw = tmp_path / "KMNIST" / "raw"
    raw.mkdir(parents=True)
    imgs = np.stack([mf.gray_image(i, 70) for i in range(4)])
    (raw / "t10k-images-idx3-ubyte").write_bytes(mf.idx_bytes(imgs))
    (raw / "t10k-labels-idx1-ubyte").write_bytes(mf.idx_bytes(mf.labels(4, 10)))
    sp = images("kmnist", tmp_path).split("test")
    assert torch.equal(sp.x, (_flat(list(imgs)) / 255.0 > 0.5).float())
    assert torch.equal(sp.labels, torch.arange(4))


def test_omniglot_fixture_split_orientation_labels():
    ds = images("omniglot", FIX, n_valid=5, split_seed=3)
    gray = _flat([mf.gray_image(i, 30) for i in range(20)]) / 255.0
    lab = torch.from_numpy(mf.labels(20, 50, 7).astype(np.int64))
    tr, va = ds.train, ds.valid
    assert len(tr) == 15 and len(va) == 5 and len(ds.test) == 8
    assert tr.binarize == "dynamic" and va.binarize == "static"
    # train + valid is a permutation of the file's training images, labels follow images
    key = {tuple((gray[i] * 255).round().int().tolist()): i for i in range(20)}
    idx = [key[tuple((r * 255).round().int().tolist())] for r in tr.x]
    assert len(set(idx)) == 15 and idx != list(range(15))  # shuffled, upright (exact match)
    assert torch.equal(tr.labels, lab[idx])
    # same split_seed -> same split; threshold mode
    thr = images("omniglot", FIX, n_valid=5, split_seed=3, binarize="threshold")
    assert torch.equal(thr.train.x, (tr.x > 0.5).float())
    test_gray = _flat([mf.gray_image(i, 90) for i in range(8)]) / 255.0
    assert torch.equal(thr.test.x, (test_gray > 0.5).float())
    assert torch.equal(thr.test.labels, torch.from_numpy(mf.labels(8, 50, 7).astype(np.int64)))


def test_caltech_fixture_inverted_transposed_labels():
    ds = images("caltech", FIX)
    for split, n in mf.SIZES["caltech"].items():
        off = {"train": 0, "valid": 40, "test": 80}[split]
        sp = ds.split(split)
        assert torch.equal(sp.x, _flat([mf.binary_image(i, off) for i in range(n)]))
        assert torch.equal(sp.labels, torch.from_numpy(mf.labels(n, 101, off).astype(np.int64)))


def test_missing_file_message(tmp_path):
    with pytest.raises(FileNotFoundError) as e:
        images("omniglot", tmp_path).train
    msg = str(e.value)
    assert "chardata.mat" in msg and str(tmp_path / "omniglot" / "chardata.mat") in msg
    assert "How to get it" in msg and "EBMLAB_DATA_DIR" in msg
    with pytest.raises(FileNotFoundError, match="binarized_mnist_valid"):
        images("static_mnist", tmp_path).check_files(["valid"])
    with pytest.raises(FileNotFoundError, match="emnist-mnist-train-images-idx3-ubyte"):
        images("emnist", tmp_path).split("train")


def test_check_files_resolves_without_loading():
    paths = images("kmnist", FIX).check_files(["train", "test"])
    assert [p.name for p in paths] == [
        "kmnist-train-imgs.npz",
        "kmnist-train-labels.npz",
        "kmnist-test-imgs.npz",
        "kmnist-test-labels.npz",
    ]


def test_config_validation():
    with pytest.raises(ConfigError) as e:
        images("kmnist", FIX, name="mnist")
    assert e.value.key == "dataset.name" and "static_mnist" in e.value.message
    with pytest.raises(ConfigError) as e:
        images("static_mnist", FIX, binarize="dynamic")
    assert e.value.key == "dataset.binarize"
    with pytest.raises(ConfigError) as e:
        images("kmnist", FIX, dim=100)
    assert e.value.key == "dataset.dim"
    with pytest.raises(ConfigError) as e:
        images("kmnist", FIX, image_shape=[32, 32])
    assert e.value.key == "dataset.image_shape"
    with pytest.raises(ConfigError) as e:
        images("caltech", FIX, n_valid=10)
    assert e.value.key == "dataset.n_valid"
    with pytest.raises(ConfigError) as e:
        images("kmnist", FIX).split("validation")
    assert e.value.key == "split"


def test_binarize_batch_modes(gen):
    p = torch.linspace(0, 1, 11).repeat(20000, 1)
    assert torch.equal(binarize_batch(p, "threshold"), (p > 0.5).float())
    assert binarize_batch(p, "static") is p
    b = binarize_batch(p, "dynamic", gen)
    assert set(b.unique().tolist()) <= {0.0, 1.0}
    # per-column frequency matches p within 5 standard errors
    se = torch.sqrt(p[0] * (1 - p[0]) / p.shape[0]).clamp_min(1e-12)
    assert torch.all((b.mean(0) - p[0]).abs() <= 5 * se + 1e-12)
    with pytest.raises(ValueError, match="Generator"):
        binarize_batch(p, "dynamic")
    with pytest.raises(ConfigError):
        binarize_batch(p, "otsu")


def test_batches_dynamic_fresh_bits_and_drop_last(gen):
    x = torch.full((10, 784), 0.5)
    sp = ImageSplit(x=x, labels=None, binarize="dynamic")
    b1 = list(sp.batches(4, gen))
    b2 = list(sp.batches(4, gen))
    assert [len(b) for b in b1] == [4, 4]  # drop_last
    assert not torch.equal(b1[0], b2[0])
    assert [len(b) for b in sp.batches(4, gen, drop_last=False)] == [4, 4, 2]


def test_data_mean_dynamic_is_gray_mean():
    ds = images("kmnist", FIX, binarize="dynamic")
    assert torch.allclose(ds.data_mean(), ds.train.x.mean(0))


def test_make_fixtures_reproducible(tmp_path):
    mf.write(tmp_path)
    for f in FIX.rglob("*"):
        if f.is_file() and f.suffix not in (".py", ".pyc") and "__pycache__" not in f.parts:
            g = tmp_path / f.relative_to(FIX)
            if f.suffix == ".mat" or f.suffix == ".npz":  # containers carry timestamps
                continue
            assert g.read_bytes() == f.read_bytes(), f


def test_hydra_config_instantiates(monkeypatch):
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    conf = Path(__file__).resolve().parents[2] / "conf"
    monkeypatch.setenv("EBMLAB_DATA_DIR", str(FIX))
    for name in (
        "static_mnist",
        "dynamic_mnist",
        "mnist_threshold",
        "emnist",
        "kmnist",
        "omniglot",
        "caltech",
    ):
        cfg = OmegaConf.create({"dataset": OmegaConf.load(conf / "dataset" / f"{name}.yaml")})
        ds = instantiate(cfg.dataset)
        assert ds.name == name and ds.data_dir == FIX and cfg.dataset.dim == 784
        assert len(ds.test) > 0


def test_copy_to_torchvision_layout(tmp_path):
    """MNIST IDX files in torchvision's MNIST/raw layout (uncompressed) are found too."""
    raw = tmp_path / "MNIST" / "raw"
    raw.mkdir(parents=True)
    for f in ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"):
        raw.joinpath(f).write_bytes(gzip.decompress((FIX / "mnist" / f"{f}.gz").read_bytes()))
    a = images("mnist_threshold", tmp_path).split("test")
    b = images("mnist_threshold", FIX).split("test")
    assert torch.equal(a.x, b.x) and torch.equal(a.labels, b.labels)
    shutil.rmtree(raw)


# ---------------------------------------------------------------------------- real data


def test_real_caltech(shared_data):
    ds = images("caltech", shared_data)
    sizes = {s: len(ds.split(s)) for s in ("train", "valid", "test")}
    assert sizes == {"train": 4100, "valid": 2264, "test": 2307}
    x = ds.train.x
    assert set(x.unique().tolist()) == {0.0, 1.0}
    # object = 1 after inversion: the border is background in almost every image
    border = torch.cat([x.view(-1, 28, 28)[:, 0], x.view(-1, 28, 28)[:, -1]], 1)
    assert border.mean() < 0.2 < x.mean()
    assert ds.train.labels.min() == 0 and ds.train.labels.max() == 100


def test_real_static_mnist_eval_splits(shared_data):
    ds = images("static_mnist", shared_data)
    for s in ("valid", "test"):
        x = ds.split(s).x
        assert x.shape == (10000, 784) and set(x.unique().tolist()) == {0.0, 1.0}
        assert 0.10 < x.mean() < 0.16
        # upright digits: ink is centred, the outer frame is empty
        img = x.view(-1, 28, 28)
        assert img[:, :2].mean() < 1e-3 and img[:, 10:18, 10:18].mean() > 0.3


@pytest.mark.slow
def test_real_static_mnist_train(shared_data):
    assert images("static_mnist", shared_data).train.x.shape == (50000, 784)


def test_real_mnist_kmnist_test(shared_data):
    for name in ("mnist_threshold", "kmnist"):
        sp = images(name, shared_data).test
        assert sp.x.shape == (10000, 784) and set(sp.x.unique().tolist()) == {0.0, 1.0}
        counts = torch.bincount(sp.labels, minlength=10)
        assert counts.sum() == 10000 and counts.min() > 800  # ~balanced 10 classes
    dyn = images("dynamic_mnist", shared_data).test
    thr = images("mnist_threshold", shared_data).test
    # fixed Bernoulli bits agree with thresholding on most pixels of the same images
    agree = (dyn.x == thr.x).float().mean()
    assert agree > 0.95 and abs(dyn.x.mean() - thr.x.mean()) < 0.02
    assert math.isclose(float(dyn.x.mean()), 0.133, abs_tol=0.01)
