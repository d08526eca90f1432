"""Real-valued image datasets for the Gaussian-Bernoulli RBM (Liao et al. 2022, Sec. 4.2, App. B).

``GrayscaleImages(name=...)`` (config target) loads one of

- ``mnist``: grayscale MNIST, the official IDX files (``train``: 60,000, ``test``: 10,000);
- ``fashion_mnist``: FashionMNIST, the official IDX files (60,000 / 10,000);
- ``celeba32``: CelebA ``img_align_celeba/*.jpg`` + ``list_eval_partition.txt`` (partition 0 /
  1 / 2 = ``train`` / ``valid`` / ``test``), centre crop 140 x 140, resized to 32 x 32;
- ``celeba2k64``: 2,000 images drawn at random (``subset_seed``) from CelebA's training
  partition, same crop, resized to 64 x 64.

Images are kept as ``uint8 [n, C, H, W]``; :meth:`GrayscaleImages.preprocess` turns a batch into
the model's input, the paper's standardisation (MNIST (0.1307, 0.3081), FashionMNIST
(0.2860, 0.3530), CelebA channel mean (0.5240, 0.4152, 0.3590) / std (0.2868, 0.2530,
0.2453)), flattened to [n, C*H*W]; :meth:`GrayscaleImages.to_unit` maps model-space vectors
back to images in [0, 1] (for figures and FID).

Splits are named ``train`` / ``valid`` (CelebA only) / ``test``, optionally sliced with Python
syntax, e.g. ``test[:5000]`` and ``test[5000:]`` (only the MNIST test set is available on the
offline machines; see docs/grbm.md). Decoded CelebA splits are cached as uint8 tensors under
``cache_dir`` (written atomically, read with ``torch.load(weights_only=True)``).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from ebmlab.data.files import reading
from ebmlab.data.idx import read_idx
from ebmlab.errors import ConfigError

NAMES = ("mnist", "fashion_mnist", "celeba32", "celeba2k64")
_NORM = {
    "mnist": ((0.1307,), (0.3081,)),
    "fashion_mnist": ((0.2860,), (0.3530,)),
    "celeba32": ((0.5240, 0.4152, 0.3590), (0.2868, 0.2530, 0.2453)),
    "celeba2k64": ((0.5240, 0.4152, 0.3590), (0.2868, 0.2530, 0.2453)),
}
_SHAPES = {
    "mnist": (1, 28, 28),
    "fashion_mnist": (1, 28, 28),
    "celeba32": (3, 32, 32),
    "celeba2k64": (3, 64, 64),
}
CELEBA_CROP = 140
CELEBA_PARTITIONS = {"train": 0, "valid": 1, "test": 2}
_SPLIT_RE = re.compile(r"^(train|valid|test)(?:\[(-?\d*):(-?\d*)\])?$")

_IDX_LAYOUTS = {
    "mnist": ("mnist", "MNIST/raw", "mnist/raw"),
    "fashion_mnist": ("fashion_mnist", "FashionMNIST/raw", "fashion-mnist", "fashion_mnist/raw"),
}


def parse_split(spec: str, key: str = "split") -> tuple[str, slice]:
    """``"test[:5000]"`` -> ("test", slice(None, 5000)); ``"train"`` -> ("train", slice(None))."""
    m = _SPLIT_RE.match(str(spec).replace(" ", ""))
    if m is None:
        raise ConfigError(
            key, f"train | valid | test, optionally sliced like test[:5000] (got {spec!r})"
        )
    a, b = m.group(2), m.group(3)
    sl = slice(int(a) if a else None, int(b) if b else None)
    return m.group(1), sl


def _atomic_save(obj, path: Path) -> None:
    from ebmlab.utils.workspace import atomic_torch_save

    atomic_torch_save(obj, path)


class GrayscaleImages:
    """Image dataset for GRBM training (see the module docstring).

    Args:
        name: mnist | fashion_mnist | celeba32 | celeba2k64.
        data_dir: folder with the files (layouts: ``mnist/``, ``MNIST/raw/``,
            ``fashion_mnist/``, ``FashionMNIST/raw/``, ``celeba/img_align_celeba/`` +
            ``celeba/list_eval_partition.txt``).
        cache_dir: where decoded CelebA splits are cached (null: no cache).
        normalize: standardise with the paper's constants (false: pixels in [0, 1]).
        n_subset: keep a random subset of this many images of every split (null: all);
            celeba2k64 needs one (the paper's 2,000 from the training partition).
        subset_seed: seed of that subset draw.
        download: fetch missing MNIST / FashionMNIST files with torchvision (needs a network).
        dim, image_shape: must match the dataset (C*H*W and [C, H, W]); here for interpolation.
    """

    def __init__(
        self,
        name: str,
        data_dir: str,
        cache_dir: str | None,
        normalize: bool,
        n_subset: int | None,
        subset_seed: int,
        download: bool,
        dim: int | None,
        image_shape: list[int] | None,
    ):
        if name not in NAMES:
            raise ConfigError("name", f"one of {list(NAMES)} (got {name!r})")
        shape = _SHAPES[name]
        if dim is not None and int(dim) != int(np.prod(shape)):
            raise ConfigError("dim", f"{name} has dim {int(np.prod(shape))} (got {dim})")
        if image_shape is not None and tuple(int(s) for s in image_shape) != shape:
            raise ConfigError("image_shape", f"{name} has shape {list(shape)} (got {image_shape})")
        if name == "celeba2k64" and n_subset is None:
            raise ConfigError("n_subset", "celeba2k64 is a subset of CelebA: set it (paper: 2000)")
        if n_subset is not None and (not isinstance(n_subset, int) or n_subset < 1):
            raise ConfigError("n_subset", f"null or an integer >= 1 (got {n_subset!r})")
        self.name = name
        self.data_dir = Path(str(data_dir)).expanduser()
        self.cache_dir = None if cache_dir is None else Path(str(cache_dir)).expanduser()
        self.normalize = bool(normalize)
        self.n_subset = n_subset
        self.subset_seed = int(subset_seed)
        self.download = bool(download)
        self.image_shape = shape
        self.dim = int(np.prod(shape))
        self.channels = shape[0]
        mean, std = _NORM[name]
        self.mean = torch.tensor(mean).view(1, -1, 1, 1)
        self.std = torch.tensor(std).view(1, -1, 1, 1)
        self.has_labels = name in ("mnist", "fashion_mnist")
        self._loaded: dict[str, tuple[Tensor, Tensor | None]] = {}

    def __repr__(self) -> str:
        return f"GrayscaleImages(name={self.name!r}, data_dir='{self.data_dir}')"

    # ------------------------------------------------------------------ loading
    def load(self, spec: str, key: str = "split") -> tuple[Tensor, Tensor | None]:
        """Images uint8 [n, C, H, W] and labels int64 [n] (None for CelebA) of a split spec."""
        split, sl = parse_split(spec, key)
        if split == "valid" and self.has_labels:
            raise ConfigError(key, f"{self.name} has only train and test splits (got {spec!r})")
        if split not in self._loaded:
            x, y = self._read(split)
            if self.n_subset is not None and self.n_subset < x.shape[0]:
                g = torch.Generator().manual_seed(self.subset_seed)
                idx = torch.randperm(x.shape[0], generator=g)[: self.n_subset].sort().values
                x, y = x[idx], (None if y is None else y[idx])
            self._loaded[split] = (x, y)
        x, y = self._loaded[split]
        x, y = x[sl], (None if y is None else y[sl])
        if x.shape[0] == 0:
            raise ConfigError(key, f"{spec!r} selects no images ({self.name} {split} split)")
        return x, y

    def check_files(self, specs: Sequence[str]) -> None:
        """Raise FileNotFoundError (with where and how) when a file of these splits is missing."""
        for spec in specs:
            split, _ = parse_split(spec)
            if self.name in _IDX_LAYOUTS:
                for f in _idx_files(split):
                    self._idx_path(f)
            else:
                self._celeba_root()

    def _read(self, split: str) -> tuple[Tensor, Tensor | None]:
        if self.name in _IDX_LAYOUTS:
            img_f, lab_f = _idx_files(split)
            img_p, lab_p = self._idx_path(img_f), self._idx_path(lab_f)
            with reading([img_p, lab_p], "the official IDX files: " + self._missing("").args[0]):
                img = read_idx(img_p)
                lab = read_idx(lab_p).astype(np.int64).reshape(-1)
            if img.ndim != 3 or img.shape[1:] != self.image_shape[1:]:
                raise ValueError(
                    f"{self.name}: {img_f} holds shape {img.shape}, expected [n,28,28]"
                )
            if img.shape[0] != lab.shape[0]:
                raise ValueError(f"{self.name}: {img_f} and {lab_f} differ in length")
            x = torch.from_numpy(np.ascontiguousarray(img, dtype=np.uint8)).unsqueeze(1)
            return x, torch.from_numpy(lab)
        return self._read_celeba(split), None

    def _idx_path(self, fname: str) -> Path:
        for folder in _IDX_LAYOUTS[self.name]:
            for ext in (".gz", ""):
                p = self.data_dir / folder / (fname + ext)
                if p.is_file():
                    return p
        if self.download:
            self._download()
            return self._idx_path_no_download(fname)
        raise self._missing(fname)

    def _idx_path_no_download(self, fname: str) -> Path:
        saved, self.download = self.download, False
        try:
            return self._idx_path(fname)
        finally:
            self.download = saved

    def _download(self) -> None:
        try:
            from torchvision import datasets

            cls = datasets.MNIST if self.name == "mnist" else datasets.FashionMNIST
            for train in (True, False):
                cls(root=str(self.data_dir), train=train, download=True)
        except Exception as e:  # any failure becomes the missing-file message
            raise self._missing("*", f" (download failed: {e!r})") from e

    def _missing(self, fname: str, extra: str = "") -> FileNotFoundError:
        where = ", ".join(str(self.data_dir / f / (fname + ".gz")) for f in _IDX_LAYOUTS[self.name])
        official = {
            "mnist": "http://yann.lecun.com/exdb/mnist/",
            "fashion_mnist": "https://github.com/zalandoresearch/fashion-mnist (data/fashion/)",
        }[self.name]
        return FileNotFoundError(
            f"dataset {self.name!r}: {fname}[.gz] not found; looked for {where}. Get the official "
            f"IDX files from {official}, or set dataset.download=true where a network exists. "
            f"Set the folder with dataset.data_dir=... or EBMLAB_DATA_DIR.{extra}"
        )

    # ------------------------------------------------------------------- CelebA
    def _celeba_root(self) -> Path:
        for sub in ("celeba", "CelebA", "."):
            root = self.data_dir / sub
            if (root / "img_align_celeba").is_dir() and (
                root / "list_eval_partition.txt"
            ).is_file():
                return root
        raise FileNotFoundError(
            f"dataset {self.name!r}: CelebA not found; expected {self.data_dir}/celeba/"
            "img_align_celeba/ (the aligned JPEGs, 000001.jpg ...) and "
            f"{self.data_dir}/celeba/list_eval_partition.txt (from the official CelebA release, "
            "https://mmlab.ie.cuhk.edu.hk/projects/CelebA.html; nothing is downloaded). Set the "
            "folder with dataset.data_dir=... or EBMLAB_DATA_DIR."
        )

    def _read_celeba(self, split: str) -> Tensor:
        root = self._celeba_root()
        files = []
        for line in (root / "list_eval_partition.txt").read_text().splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[1].lstrip("-").isdigit():
                if int(parts[1]) == CELEBA_PARTITIONS[split]:
                    files.append(parts[0])
        if not files:
            raise ValueError(f"{root / 'list_eval_partition.txt'} lists no {split} images")
        if self.n_subset is not None and self.n_subset < len(files):
            # draw the subset before decoding (CelebA-2K-64 decodes only 2,000 files)
            g = torch.Generator().manual_seed(self.subset_seed)
            idx = torch.randperm(len(files), generator=g)[: self.n_subset].sort().values
            files = [files[i] for i in idx.tolist()]
        size = self.image_shape[1]
        cache = None
        if self.cache_dir is not None:
            key = json.dumps([self.name, split, size, files[:3], len(files)], sort_keys=True)
            h = hashlib.sha256(key.encode()).hexdigest()[:16]
            cache = self.cache_dir / f"celeba-{self.name}-{split}-{h}.pt"
            if cache.is_file():
                return torch.load(cache, map_location="cpu", weights_only=True)["images"]
        out = np.empty((len(files), 3, size, size), dtype=np.uint8)
        for i, f in enumerate(files):
            p = root / "img_align_celeba" / f
            if not p.is_file():
                raise FileNotFoundError(f"dataset {self.name!r}: image {p} is listed but missing")
            out[i] = celeba_preprocess(p, size)
        x = torch.from_numpy(out)
        if cache is not None:
            _atomic_save({"images": x}, cache)
        return x

    # ------------------------------------------------------------- transforms
    def preprocess(self, x: Tensor) -> Tensor:
        """uint8 [n, C, H, W] (any device) -> float32 model input [n, C*H*W] (standardised)."""
        u = x.to(torch.float32) / 255.0
        if self.normalize:
            u = (u - self.mean.to(u.device)) / self.std.to(u.device)
        return u.reshape(u.shape[0], -1)

    def to_unit(self, v: Tensor) -> Tensor:
        """Model-space vectors [n, C*H*W] -> images [n, C, H, W] in [0, 1] (clamped)."""
        u = v.reshape(v.shape[0], *self.image_shape).to(torch.float32)
        if self.normalize:
            u = u * self.std.to(u.device) + self.mean.to(u.device)
        return u.clamp(0.0, 1.0)


def _idx_files(split: str) -> tuple[str, str]:
    p = "t10k" if split == "test" else "train"
    return f"{p}-images-idx3-ubyte", f"{p}-labels-idx1-ubyte"


def celeba_preprocess(path: Path, size: int) -> np.ndarray:
    """Centre crop 140 x 140, resize to size x size (bilinear, antialiased) -> uint8 [3, s, s]."""
    from PIL import Image

    with Image.open(path) as im:
        im = im.convert("RGB")
        w, h = im.size
        left, top = int(round((w - CELEBA_CROP) / 2.0)), int(round((h - CELEBA_CROP) / 2.0))
        im = im.crop((left, top, left + CELEBA_CROP, top + CELEBA_CROP))
        im = im.resize((size, size), Image.BILINEAR)
        return np.asarray(im, dtype=np.uint8).transpose(2, 0, 1).copy()
