"""Image loaders of the GRBM benchmark (GrayscaleImages): the real file formats (IDX, CelebA
JPEGs and partition file), split specs, normalisation, the decoded-split cache."""

import numpy as np
import pytest
import torch

from ebmlab.data.grayscale_images import CELEBA_CROP, GrayscaleImages, parse_split
from ebmlab.errors import ConfigError
from tests.helpers import from_conf


def gray(option: str, data_dir, **kw) -> GrayscaleImages:
    """conf/dataset/<option>.yaml reading ``data_dir``, with no cache unless ``kw`` names one."""
    return from_conf(f"dataset/{option}", data_dir=str(data_dir), **{"cache_dir": None, **kw})


def test_fashion_mnist_idx_splits_and_normalisation(fashion_mnist_root):
    ds = gray("fashion_mnist", fashion_mnist_root)
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
    ds = gray("fashion_mnist", tmp_path)
    with pytest.raises(FileNotFoundError, match="t10k-images-idx3-ubyte.*fashion"):
        ds.check_files(["test"])
    with pytest.raises(ConfigError, match="only train and test"):
        ds.load("valid")
    with pytest.raises(FileNotFoundError, match="list_eval_partition.txt"):
        gray("celeba32", tmp_path).check_files(["train"])
    with pytest.raises(ConfigError, match="dim"):
        gray("mnist_gray", tmp_path, dim=3072)


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
    ds = gray("celeba32", tmp_path / "data", cache_dir=str(tmp_path / "cache"))
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
    again = gray("celeba32", tmp_path, cache_dir=str(tmp_path / "cache"))
    assert torch.equal(again.load("train")[0], x)
    for f in (tmp_path / "celeba" / "img_align_celeba").glob("*.bak"):
        f.rename(f.with_suffix(".jpg"))
    ds64 = gray("celeba2k64", tmp_path, n_subset=3, subset_seed=5)
    a = ds64.load("train")[0]
    assert a.shape == (3, 3, 64, 64)
    assert torch.equal(gray("celeba2k64", tmp_path, n_subset=3, subset_seed=5).load("train")[0], a)
    u = ds64.to_unit(ds64.preprocess(a))
    assert u.shape == (3, 3, 64, 64) and torch.allclose(u, a.float() / 255, atol=1e-5)
