"""Binary 28x28 image datasets: static/dynamic/thresholded MNIST, eMNIST, kMNIST, Omniglot,
Caltech-101 Silhouettes.

Every loader reads a standard public file format from ``data_dir`` with safe readers only
(``scipy.io.loadmat`` for MATLAB v5, ``numpy.load(allow_pickle=False)`` for npz, our own IDX
and ``.amat`` parsers); nothing is unpickled. Images come back as ``float32 [n, 784]``,
row-major and upright (row i of the 28x28 image is ``x[:, 28 i : 28 (i + 1)]``).

Splits and conventions follow the reference code lineage of GWG / DLP / ACS (Tomczak's VAE
data utilities for static/dynamic MNIST, Omniglot and Caltech; torchvision for the
thresholded MNIST family):

- ``static_mnist``: Larochelle & Murray binarised MNIST, the files' own split,
  50,000 / 10,000 / 10,000 (``binarized_mnist_{train,valid,test}.amat`` or the ``.mat``
  copies with key ``X``). Already binary: ``binarize="static"``.
- ``dynamic_mnist``: grayscale MNIST (IDX). train = first 50,000 of the official 60,000
  training images, valid = last 10,000, test = the official 10,000. The train split stays
  grayscale and is re-binarised per batch (``binarize="dynamic"``); valid and test are
  binarised ONCE with the fixed seed 777 as in the reference (the bits differ from the
  reference's numpy draw; the protocol is the same).
- ``mnist_threshold``: MNIST with pixel > 0.5 -> 1 (DLP / ACS RBM experiments). The reference
  trains on all 60,000 training images and tests on the official 10,000, so the default
  ``n_valid=0`` has no validation split; ``n_valid=k`` holds out the last k training images.
- ``emnist``: EMNIST split ``mnist`` (the split the ACS code passes to torchvision: 60,000 /
  10,000 digits), thresholded at 0.5. EMNIST IDX images are stored transposed; we transpose
  them upright (a fixed pixel permutation, which does not change RBM results). Files
  ``emnist-mnist-{train,test}-{images-idx3,labels-idx1}-ubyte[.gz]`` (torchvision layout
  ``EMNIST/raw/``).
- ``kmnist``: Kuzushiji-MNIST 60,000 / 10,000, thresholded at 0.5; the official npz files
  (``kmnist-{train,test}-{imgs,labels}.npz``, key ``arr_0``) or torchvision's IDX files in
  ``KMNIST/raw/``.
- ``omniglot``: ``chardata.mat`` (28x28 Omniglot of Burda et al.; keys ``data`` [784, 24345],
  ``testdata`` [784, 8070], one-hot alphabet ``target``/``testtarget`` [50, N]). Images are
  stored column-major and are transposed upright (the reference's Fortran-order reshape).
  The 24,345 training images are shuffled (seeded by ``split_seed``; the reference used the
  global numpy seed) and the last 1,345 become valid: 23,000 / 1,345 / 8,070. Default
  ``binarize="dynamic"`` (deep-EBM protocol: train re-binarised per batch, valid/test fixed
  with seed 777); ``binarize="threshold"`` for RBM experiments. Labels = alphabet index.
  (The ACS RBM code used torchvision's 105x105 Omniglot resized to 28x28 instead; the
  issue asks for chardata.mat, which is what the deep-EBM protocol uses.)
- ``caltech``: ``caltech101_silhouettes_28_split1.mat`` (keys ``{train,val,test}_data``,
  ``*_labels``): 4,100 / 2,264 / 2,307. Stored column-major with the object as 0; as in the
  reference we transpose upright and invert so the object is 1. Labels are 0-based (file: 1..101).

``data_dir`` layouts searched: the shared layout (``binarized_mnist/``, ``mnist/``,
``kmnist/``, ``omniglot/``, ``caltech101_silhouettes/``, ``emnist/``), torchvision's
(``MNIST/raw``, ``KMNIST/raw``, ``EMNIST/raw``) and the reference code's (``MNIST_static/``,
``OMNIGLOT/``, ``Caltech101Silhouettes/``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from ebmlab.data.files import reading
from ebmlab.data.idx import read_idx
from ebmlab.errors import ConfigError

log = logging.getLogger(__name__)

DATASETS = (
    "static_mnist",
    "dynamic_mnist",
    "mnist_threshold",
    "emnist",
    "kmnist",
    "omniglot",
    "caltech",
)
SPLITS = ("train", "valid", "test")
BINARIZE_MODES = ("static", "dynamic", "threshold")
EVAL_BINARIZE_SEED = 777  # fixed binarisation of valid/test for dynamic datasets (reference)
DIM = 784
IMAGE_SHAPE = (28, 28)

_URLS = {
    "static_mnist": "http://www.cs.toronto.edu/~larocheh/public/datasets/binarized_mnist/",
    "omniglot": "https://raw.githubusercontent.com/yburda/iwae/master/datasets/OMNIGLOT/",
    "caltech": "https://people.cs.umass.edu/~marlin/data/",
}


@dataclass(frozen=True)
class _Spec:
    source: str  # which files: static_mnist | mnist | emnist | kmnist | omniglot | caltech
    binarize: str  # default mode
    allowed: tuple[str, ...]
    n_valid: int  # default held-out count for train-file-only sources (0: no valid split)


_SPECS = {
    "static_mnist": _Spec("static_mnist", "static", ("static",), 0),
    "dynamic_mnist": _Spec("mnist", "dynamic", ("dynamic", "threshold"), 10_000),
    "mnist_threshold": _Spec("mnist", "threshold", ("threshold", "dynamic"), 0),
    "emnist": _Spec("emnist", "threshold", ("threshold", "dynamic"), 0),
    "kmnist": _Spec("kmnist", "threshold", ("threshold", "dynamic"), 0),
    "omniglot": _Spec("omniglot", "dynamic", ("dynamic", "threshold"), 1_345),
    "caltech": _Spec("caltech", "static", ("static",), 0),
}
_FILE_SPLITS = {"static_mnist", "caltech"}  # sources whose files define train/valid/test


@dataclass
class ImageSplit:
    """One split. ``x``: float32 [n, 784]; in {0,1} unless ``binarize == "dynamic"``, where it
    holds grayscale probabilities in [0,1] to be re-binarised per batch by
    :func:`binarize_batch`. ``labels``: int64 [n] or None."""

    x: Tensor
    labels: Tensor | None
    binarize: str
    name: str = ""
    split: str = ""

    def __len__(self) -> int:
        return self.x.shape[0]

    def binarized(self, generator: torch.Generator | None = None) -> Tensor:
        return binarize_batch(self.x, self.binarize, generator)

    def batches(
        self,
        batch_size: int,
        generator: torch.Generator,
        shuffle: bool = True,
        drop_last: bool = True,
    ) -> Iterator[Tensor]:
        """One pass over the split in binarised mini-batches (dynamic: fresh bits per batch)."""
        n = len(self)
        order = torch.randperm(n, generator=generator) if shuffle else torch.arange(n)
        stop = n - n % batch_size if drop_last and n >= batch_size else n
        for i in range(0, stop, batch_size):
            yield binarize_batch(self.x[order[i : i + batch_size]], self.binarize, generator)


def binarize_batch(x: Tensor, mode: str, generator: torch.Generator | None = None) -> Tensor:
    """Binarise a batch: ``static`` returns x, ``threshold`` is x > 0.5, ``dynamic`` draws
    Bernoulli(x) with ``generator`` (required)."""
    if mode == "static":
        return x
    if mode == "threshold":
        return (x > 0.5).to(x.dtype)
    if mode == "dynamic":
        if generator is None:
            raise ValueError("dynamic binarisation needs an explicit torch.Generator")
        u = torch.rand(x.shape, generator=generator, dtype=x.dtype, device=x.device)
        return (u < x).to(x.dtype)
    raise ConfigError("binarize", f"one of {list(BINARIZE_MODES)} (got {mode!r})")


# ---------------------------------------------------------------------------------------------
# file lookup


def _candidates(source: str, key: str) -> tuple[list[str], str]:
    """Relative candidate paths for one logical file, and how to obtain it."""
    if source == "static_mnist":
        stems = [f"binarized_mnist/binarized_mnist_{key}", f"MNIST_static/binarized_mnist_{key}"]
        stems.append(f"binarized_mnist_{key}")
        cands = [s + ext for s in stems for ext in (".mat", ".amat")]
        how = (
            f"get binarized_mnist_{key}.amat (Larochelle & Murray binarised MNIST, "
            f"{_URLS['static_mnist']}) or its .mat copy (key X) into <data_dir>/binarized_mnist/;"
            " with a network, download=true fetches the .amat"
        )
        return cands, how
    if source in ("mnist", "emnist"):
        folder, tv = ("mnist", "MNIST") if source == "mnist" else ("emnist", "EMNIST")
        base = key if source == "mnist" else f"emnist-mnist-{key}"
        cands = [
            p + gz
            for p in (f"{folder}/{base}", f"{tv}/raw/{base}", f"{folder}/gzip/{base}")
            for gz in (".gz", "")
        ]
        call = (
            "MNIST(root=<data_dir>"
            if source == "mnist"
            else "EMNIST(root=<data_dir>, split='mnist'"
        )
        how = (
            f"the official IDX file {base}[.gz]; with a network, download=true (or "
            f"torchvision.datasets.{call}, download=True)) puts it in <data_dir>/{tv}/raw/"
        )
        return cands, how
    if source == "kmnist":
        # key is e.g. "train-imgs" (npz naming); IDX fallback names in torchvision's layout
        part, kind = key.split("-")
        idx_name = f"{'train' if part == 'train' else 't10k'}-" + (
            "images-idx3-ubyte" if kind == "imgs" else "labels-idx1-ubyte"
        )
        cands = [f"kmnist/kmnist-{key}.npz", f"KMNIST/kmnist-{key}.npz"]
        cands += [f"KMNIST/raw/{idx_name}{gz}" for gz in (".gz", "")]
        cands += [f"kmnist/{idx_name}{gz}" for gz in (".gz", "")]
        how = (
            f"kmnist-{key}.npz (official Kuzushiji-MNIST release, key arr_0) in <data_dir>/kmnist/,"
            " or with a network download=true (torchvision.datasets.KMNIST) which puts IDX files"
            " in <data_dir>/KMNIST/raw/"
        )
        return cands, how
    if source == "omniglot":
        cands = ["omniglot/chardata.mat", "OMNIGLOT/chardata.mat", "chardata.mat"]
        how = (
            "chardata.mat (28x28 Omniglot of Burda et al., IWAE repository "
            f"{_URLS['omniglot']}chardata.mat) into <data_dir>/omniglot/; with a network,"
            " download=true fetches it"
        )
        return cands, how
    if source == "caltech":
        f = "caltech101_silhouettes_28_split1.mat"
        cands = [f"caltech101_silhouettes/{f}", f"Caltech101Silhouettes/{f}", f]
        how = (
            f"{f} (Caltech-101 Silhouettes, Marlin et al., {_URLS['caltech']}{f}) into "
            "<data_dir>/caltech101_silhouettes/; with a network, download=true fetches it"
        )
        return cands, how
    raise AssertionError(source)


def _file_keys(source: str, split: str) -> list[str]:
    """Logical files needed for one split of one source."""
    if source == "static_mnist":
        return [split]
    if source in ("omniglot", "caltech"):
        return ["main"]
    official = "test" if split == "test" else "train"
    if source == "mnist":
        p = "t10k" if official == "test" else "train"
        return [f"{p}-images-idx3-ubyte", f"{p}-labels-idx1-ubyte"]
    if source == "emnist":
        return [f"{official}-images-idx3-ubyte", f"{official}-labels-idx1-ubyte"]
    if source == "kmnist":
        return [f"{official}-imgs", f"{official}-labels"]
    raise AssertionError(source)


def _find(data_dir: Path, name: str, source: str, key: str) -> Path | None:
    cands, _ = _candidates(source, key)
    for c in cands:
        p = data_dir / c
        if p.is_file():
            return p
    return None


def _missing(data_dir: Path, name: str, source: str, key: str, extra: str = "") -> Exception:
    cands, how = _candidates(source, key)
    fname = Path(cands[0]).name
    msg = (
        f"dataset {name!r}: file {fname!r} not found. Expected at {data_dir / cands[0]} "
        f"(also looked for: {', '.join(str(data_dir / c) for c in cands[1:])}). "
        f"How to get it: {how}. Set the data folder with dataset.data_dir=... or the "
        f"EBMLAB_DATA_DIR environment variable.{extra}"
    )
    return FileNotFoundError(msg)


def _download(data_dir: Path, source: str, key: str) -> None:
    """Fetch a missing file (needs a network and a working torchvision)."""
    from torchvision import datasets  # lazy: optional, only when downloading
    from torchvision.datasets.utils import download_url

    data_dir.mkdir(parents=True, exist_ok=True)
    root = str(data_dir)
    if source == "mnist":
        datasets.MNIST(root=root, train="t10k" not in key, download=True)
    elif source == "emnist":
        datasets.EMNIST(root=root, split="mnist", train=key.startswith("train"), download=True)
    elif source == "kmnist":
        datasets.KMNIST(root=root, train=key.startswith("train"), download=True)
    elif source == "static_mnist":
        f = f"binarized_mnist_{key}.amat"
        download_url(_URLS["static_mnist"] + f, str(data_dir / "binarized_mnist"), filename=f)
    elif source == "omniglot":
        download_url(_URLS["omniglot"] + "chardata.mat", str(data_dir / "omniglot"))
    elif source == "caltech":
        f = "caltech101_silhouettes_28_split1.mat"
        download_url(_URLS["caltech"] + f, str(data_dir / "caltech101_silhouettes"))


def resolve_file(
    data_dir: str | Path, name: str, source: str, key: str, download: bool = False
) -> Path:
    data_dir = Path(data_dir)
    p = _find(data_dir, name, source, key)
    if p is not None:
        return p
    if download:
        try:
            _download(data_dir, source, key)
        except Exception as e:  # any failure becomes the clear message below
            raise _missing(data_dir, name, source, key, f" (download failed: {e!r})") from e
        p = _find(data_dir, name, source, key)
        if p is not None:
            return p
    raise _missing(data_dir, name, source, key)


# ---------------------------------------------------------------------------------------------
# readers (safe: no pickle)


def _loadmat(path: Path) -> dict:
    import scipy.io

    return scipy.io.loadmat(str(path))


def _read_amat(path: Path) -> np.ndarray:
    """Parse a whitespace-separated 0/1 text matrix (one image per line)."""
    raw = path.read_bytes()
    b = np.frombuffer(raw, dtype=np.uint8)
    is_digit = (b == ord("0")) | (b == ord("1"))
    is_space = (b == ord(" ")) | (b == ord("\n")) | (b == ord("\r")) | (b == ord("\t"))
    n_rows = len([ln for ln in raw.splitlines() if ln.strip()])
    digits = b[is_digit]
    if bool(np.all(is_digit | is_space)) and n_rows and digits.size == n_rows * DIM:
        return (digits - ord("0")).astype(np.uint8).reshape(n_rows, DIM)
    return np.loadtxt(path, dtype=np.float32, ndmin=2)  # general text matrix


def _images_from(path: Path) -> np.ndarray:
    if path.suffix == ".npz":
        with np.load(path, allow_pickle=False) as z:
            return np.asarray(z["arr_0"])
    return read_idx(path)


def _flat(img: np.ndarray, transpose: bool = False) -> np.ndarray:
    img = img.reshape(img.shape[0], *IMAGE_SHAPE)
    if transpose:
        img = img.transpose(0, 2, 1)
    return np.ascontiguousarray(img).reshape(img.shape[0], DIM)


def _check_shape(arr: np.ndarray, path: Path, name: str) -> None:
    if arr.ndim < 2 or int(np.prod(arr.shape[1:])) != DIM:
        raise ValueError(f"dataset {name!r}: {path} holds shape {arr.shape}, expected [n, 784]")


def _read_source(
    data_dir: Path, name: str, source: str, file_split: str, download: bool
) -> dict[str, tuple[np.ndarray, np.ndarray | None]]:
    """Read raw images in [0,1] (float32 or uint8 {0,1}) and labels for one file group.

    Returns {sub_split: (x [n,784], labels)}: sub_split is the split the file defines
    ('train'/'valid'/'test' for file-split sources, 'train'/'test' otherwise).
    """
    keys = _file_keys(source, file_split)
    paths = [resolve_file(data_dir, name, source, k, download) for k in keys]
    with reading(paths, _candidates(source, keys[0])[1]):
        return _parse_source(paths, name, source, file_split)


def _parse_source(
    paths: list[Path], name: str, source: str, file_split: str
) -> dict[str, tuple[np.ndarray, np.ndarray | None]]:
    if source == "static_mnist":
        p = paths[0]
        x = _loadmat(p)["X"] if p.suffix == ".mat" else _read_amat(p)
        _check_shape(x, p, name)
        return {file_split: (np.asarray(x).reshape(-1, DIM), None)}
    if source in ("mnist", "emnist", "kmnist"):
        img = _images_from(paths[0])
        lab = _images_from(paths[1]).astype(np.int64).reshape(-1)
        _check_shape(img, paths[0], name)
        if img.shape[0] != lab.shape[0]:
            raise ValueError(f"dataset {name!r}: {paths[0]} and {paths[1]} differ in length")
        x = _flat(img, transpose=source == "emnist").astype(np.float32) / 255.0
        return {"test" if file_split == "test" else "train": (x, lab)}
    if source == "omniglot":
        m = _loadmat(paths[0])
        out = {}
        for sub, xk, yk in (("train", "data", "target"), ("test", "testdata", "testtarget")):
            if xk not in m:
                raise ValueError(f"dataset {name!r}: {paths[0]} has no key {xk!r}")
            x = np.asarray(m[xk], dtype=np.float32).T  # [N, 784], column-major images
            _check_shape(x, paths[0], name)
            lab = np.asarray(m[yk]).argmax(axis=0).astype(np.int64) if yk in m else None
            out[sub] = (_flat(x, transpose=True), lab)
        return out
    if source == "caltech":
        m = _loadmat(paths[0])
        out = {}
        for sub, k in (("train", "train"), ("valid", "val"), ("test", "test")):
            if f"{k}_data" not in m:
                raise ValueError(f"dataset {name!r}: {paths[0]} has no key {k + '_data'!r}")
            x = np.asarray(m[f"{k}_data"])
            _check_shape(x, paths[0], name)
            x = 1 - _flat(x, transpose=True).astype(np.uint8)
            lab = m.get(f"{k}_labels")
            lab = None if lab is None else np.asarray(lab).astype(np.int64).reshape(-1) - 1
            out[sub] = (x, lab)
        return out
    raise AssertionError(source)


# ---------------------------------------------------------------------------------------------
# public API


class BinaryImages:
    """A binary image dataset (config target). See the module docstring for splits.

    Args:
        name: one of :data:`DATASETS`.
        data_dir: folder holding the files (layouts in the module docstring).
        binarize: "static" | "dynamic" | "threshold"; None = the dataset's default.
        n_valid: images held out of the official training file as the valid split
            (dynamic_mnist 10,000, omniglot 1,345, others 0 = no valid split); None = default.
            Not used by static_mnist / caltech, whose files define the splits.
        split_seed: seed of the train/valid shuffle (omniglot only).
        download: fetch missing files (needs a network and torchvision).
        dim, image_shape: must be 784 and [28, 28]; present so configs can interpolate them.
    """

    def __init__(
        self,
        name: str,
        data_dir: str,
        binarize: str | None,
        n_valid: int | None,
        split_seed: int,
        download: bool,
        dim: int,
        image_shape: Sequence[int],
    ):
        if name not in _SPECS:
            raise ConfigError("name", f"one of {list(DATASETS)} (got {name!r})")
        spec = _SPECS[name]
        binarize = spec.binarize if binarize is None else binarize
        if binarize not in spec.allowed:
            raise ConfigError("binarize", f"{name} allows {list(spec.allowed)} (got {binarize!r})")
        if int(dim) != DIM:
            raise ConfigError("dim", f"binary image datasets have dim 784 (got {dim})")
        if tuple(int(s) for s in image_shape) != IMAGE_SHAPE:
            raise ConfigError("image_shape", f"must be [28, 28] (got {list(image_shape)})")
        if n_valid is not None:
            if name in _FILE_SPLITS:
                raise ConfigError("n_valid", f"{name}'s files define its splits; use null")
            if int(n_valid) < 0:
                raise ConfigError("n_valid", f"an integer >= 0 (got {n_valid})")
        self.name = name
        self.data_dir = Path(str(data_dir)).expanduser()
        self.binarize = binarize
        self.n_valid = spec.n_valid if n_valid is None else int(n_valid)
        self.split_seed = int(split_seed)
        self.download = bool(download)
        self.dim = DIM
        self.image_shape = IMAGE_SHAPE
        self._spec = spec
        self._raw: dict[str, tuple[np.ndarray, np.ndarray | None]] = {}
        self._splits: dict[str, ImageSplit] = {}

    def __repr__(self) -> str:
        return (
            f"BinaryImages(name={self.name!r}, data_dir='{self.data_dir}', "
            f"binarize={self.binarize!r}, n_valid={self.n_valid})"
        )

    def check_files(self, splits: Sequence[str] = SPLITS) -> list[Path]:
        """Resolve every file the given splits need (downloading if allowed), without loading.

        Raises FileNotFoundError naming the file, where it is expected and how to get it."""
        out = []
        for s in splits:
            self._check_split_name(s)
            for k in _file_keys(self._spec.source, self._file_split(s)):
                out.append(
                    resolve_file(self.data_dir, self.name, self._spec.source, k, self.download)
                )
        return out

    def _check_split_name(self, split: str) -> None:
        if split not in SPLITS:
            raise ConfigError("split", f"one of {list(SPLITS)} (got {split!r})")
        if split == "valid" and self.name not in _FILE_SPLITS and self.n_valid == 0:
            raise ConfigError(
                "n_valid",
                f"{self.name} has no valid split with n_valid=0 (its reference protocol uses "
                "train/test only); set n_valid > 0 to hold out the last n_valid training images",
            )

    def _file_split(self, split: str) -> str:
        if self._spec.source == "static_mnist":
            return split
        return "test" if split == "test" else "train"

    def _raw_group(self, split: str) -> dict[str, tuple[np.ndarray, np.ndarray | None]]:
        fs = self._file_split(split)
        src = self._spec.source
        cache_key = fs if src in ("static_mnist", "mnist", "emnist", "kmnist") else "all"
        if cache_key not in self._raw:
            self._raw[cache_key] = _read_source(self.data_dir, self.name, src, fs, self.download)
        return self._raw[cache_key]

    def split(self, split: str) -> ImageSplit:
        """Load (once) and return one split."""
        self._check_split_name(split)
        if split in self._splits:
            return self._splits[split]
        group = self._raw_group(split)
        if self.name in _FILE_SPLITS or split == "test":
            x, y = group[split]
        else:
            x, y = group["train"]
            if self.name == "omniglot":
                g = torch.Generator().manual_seed(self.split_seed)
                perm = torch.randperm(x.shape[0], generator=g).numpy()
                x, y = x[perm], (None if y is None else y[perm])
            n_train = x.shape[0] - self.n_valid
            if n_train <= 0:
                raise ConfigError(
                    "n_valid",
                    f"n_valid={self.n_valid} leaves no training images "
                    f"({self.name} training file has {x.shape[0]})",
                )
            sl = slice(0, n_train) if split == "train" else slice(n_train, None)
            x, y = x[sl], (None if y is None else y[sl])
        xt = torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32))
        mode = self.binarize
        if mode == "threshold":
            xt = (xt > 0.5).float()
        elif mode == "dynamic" and split != "train":
            g = torch.Generator().manual_seed(EVAL_BINARIZE_SEED)
            xt = binarize_batch(xt, "dynamic", g)
            mode = "static"
        labels = None if y is None else torch.from_numpy(np.ascontiguousarray(y, dtype=np.int64))
        out = ImageSplit(x=xt, labels=labels, binarize=mode, name=self.name, split=split)
        self._splits[split] = out
        return out

    @property
    def train(self) -> ImageSplit:
        return self.split("train")

    @property
    def valid(self) -> ImageSplit:
        return self.split("valid")

    @property
    def test(self) -> ImageSplit:
        return self.split("test")

    def spread_rows(self, split: str, n: int, device: torch.device) -> Tensor:
        """``n`` evenly spaced binarised rows of ``split`` on ``device`` (all for n = 0): files
        can be ordered."""
        x = self.split(split).binarized().to(device)
        if n == 0 or n >= len(x):
            return x
        return x[torch.linspace(0, len(x) - 1, n, device=x.device).round().long()]

    def data_mean(self, split: str = "train") -> Tensor:
        """Per-pixel mean [784] (for dynamic data: the grayscale mean = expected binary mean)."""
        return self.split(split).x.mean(0)
