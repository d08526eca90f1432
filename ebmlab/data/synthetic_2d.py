"""Synthetic 2-D toy densities encoded as binary vectors (RMwGGIS Sec. 5.1, after ALOE/GWG).

The seven continuous samplers follow the FFJORD toy-data definitions (the scikit-learn
``make_swiss_roll`` / ``make_circles`` / ``make_moons`` constructions are reimplemented
here with an explicit generator). A point ``(x, y)`` becomes ``d`` bits: each coordinate is
scaled by ``int_scale = 2^(d/2 - 1) / (f_scale + 1)`` and written as one sign bit (1 for
negative) followed by the ``(d/2 - 1)``-bit reflected Gray code (most significant bit first)
of ``int(|coordinate * int_scale|)``.

All integer arithmetic is done exactly in float64 (powers of two and floors), so any even
``d`` up to 2048 works without Python big integers; ``f_scale`` is the maximum absolute
coordinate over 5,000 samples drawn with seed 1, plus 1.
"""

from __future__ import annotations

import math
from typing import Literal

import torch
from torch import Tensor

from ebmlab.errors import ConfigError, check

DATASETS = ("2spirals", "8gaussians", "circles", "moons", "pinwheel", "swissroll", "checkerboard")
DatasetName = Literal[
    "2spirals", "8gaussians", "circles", "moons", "pinwheel", "swissroll", "checkerboard"
]
_F64 = torch.float64


def _rand(n: int, g: torch.Generator, *shape: int) -> Tensor:
    return torch.rand(n, *shape, generator=g, dtype=_F64)


def _randn(n: int, g: torch.Generator, *shape: int) -> Tensor:
    return torch.randn(n, *shape, generator=g, dtype=_F64)


def _split_halves(n: int) -> tuple[int, int]:
    """(outer, inner) counts as scikit-learn's make_circles/make_moons split them."""
    return n // 2, n - n // 2


def _shuffle(x: Tensor, g: torch.Generator) -> Tensor:
    return x[torch.randperm(x.shape[0], generator=g)]


def _swissroll(n: int, g: torch.Generator) -> Tensor:
    t = 1.5 * math.pi * (1.0 + 2.0 * _rand(n, g))
    xy = torch.stack([t * torch.cos(t), t * torch.sin(t)], dim=1) + _randn(n, g, 2)  # noise 1.0
    return xy / 5.0


def _circles(n: int, g: torch.Generator) -> Tensor:
    n_out, n_in = _split_halves(n)
    a_out = torch.arange(n_out, dtype=_F64) * (2 * math.pi / max(n_out, 1))
    a_in = torch.arange(n_in, dtype=_F64) * (2 * math.pi / max(n_in, 1))
    pts = torch.cat(
        [
            torch.stack([torch.cos(a_out), torch.sin(a_out)], 1),
            0.5 * torch.stack([torch.cos(a_in), torch.sin(a_in)], 1),
        ]
    )
    pts = _shuffle(pts, g) + 0.08 * _randn(n, g, 2)
    return 3.0 * pts


def _linspace_pi(k: int) -> Tensor:
    return torch.linspace(0.0, math.pi, k, dtype=_F64) if k > 0 else torch.zeros(0, dtype=_F64)


def _moons(n: int, g: torch.Generator) -> Tensor:
    n_out, n_in = _split_halves(n)
    a_out, a_in = _linspace_pi(n_out), _linspace_pi(n_in)
    pts = torch.cat(
        [
            torch.stack([torch.cos(a_out), torch.sin(a_out)], 1),
            torch.stack([1.0 - torch.cos(a_in), 1.0 - torch.sin(a_in) - 0.5], 1),
        ]
    )
    pts = _shuffle(pts, g) + 0.1 * _randn(n, g, 2)
    return 2.0 * pts + torch.tensor([-1.0, -0.2], dtype=_F64)


def _8gaussians(n: int, g: torch.Generator) -> Tensor:
    r = 1.0 / math.sqrt(2.0)
    centers = 4.0 * torch.tensor(
        [(1, 0), (-1, 0), (0, 1), (0, -1), (r, r), (r, -r), (-r, r), (-r, -r)], dtype=_F64
    )
    idx = torch.randint(0, 8, (n,), generator=g)
    return (0.5 * _randn(n, g, 2) + centers[idx]) / 1.414


def _pinwheel(n: int, g: torch.Generator) -> Tensor:
    n_classes, radial_std, tangential_std, rate = 5, 0.3, 0.1, 0.25
    feats = _randn(n, g, 2) * torch.tensor([radial_std, tangential_std], dtype=_F64)
    feats[:, 0] += 1.0
    labels = torch.arange(n) % n_classes
    angles = labels.to(_F64) * (2 * math.pi / n_classes) + rate * torch.exp(feats[:, 0])
    c, s = torch.cos(angles), torch.sin(angles)
    # row vector times the rotation [[c, -s], [s, c]]
    out = torch.stack([feats[:, 0] * c + feats[:, 1] * s, -feats[:, 0] * s + feats[:, 1] * c], 1)
    return 2.0 * _shuffle(out, g)


def _2spirals(n: int, g: torch.Generator) -> Tensor:
    t = torch.sqrt(_rand(n, g)) * (540.0 * 2 * math.pi / 360.0)
    dx = -torch.cos(t) * t + 0.5 * _rand(n, g)
    dy = torch.sin(t) * t + 0.5 * _rand(n, g)
    sign = torch.ones(n, dtype=_F64)
    sign[n // 2 :] = -1.0  # second arm is the point reflection of the first
    xy = torch.stack([dx, dy], 1) * sign[:, None] / 3.0
    return xy + 0.1 * _randn(n, g, 2)


def _checkerboard(n: int, g: torch.Generator) -> Tensor:
    x1 = 4.0 * _rand(n, g) - 2.0
    x2 = _rand(n, g) - 2.0 * torch.randint(0, 2, (n,), generator=g).to(_F64)
    x2 = x2 + torch.remainder(torch.floor(x1), 2.0)
    return 2.0 * torch.stack([x1, x2], 1)


_SAMPLERS = {
    "2spirals": _2spirals,
    "8gaussians": _8gaussians,
    "circles": _circles,
    "moons": _moons,
    "pinwheel": _pinwheel,
    "swissroll": _swissroll,
    "checkerboard": _checkerboard,
}


def sample_2d(name: str, n: int, generator: torch.Generator) -> Tensor:
    """Draw ``n`` fresh continuous points [n, 2] (float64) from the named toy density."""
    if name not in _SAMPLERS:
        raise ConfigError("name", f"must be one of {', '.join(DATASETS)} (got {name!r})")
    return _SAMPLERS[name](int(n), generator)


def compute_int_scale(name: str, dim: int, n: int = 5000, seed: int = 1) -> float:
    """int_scale = 2^(d/2 - 1) / (f_scale + 1) with f_scale = max|x| + 1 over n samples."""
    pts = sample_2d(name, n, torch.Generator().manual_seed(seed))
    f_scale = float(pts.abs().max()) + 1.0
    return math.ldexp(1.0, dim // 2 - 1) / (f_scale + 1.0)


def _pow2(m: int) -> Tensor:
    """[2^(m-1), ..., 2, 1] in float64 (MSB first)."""
    return torch.pow(2.0, torch.arange(m - 1, -1, -1, dtype=_F64))


def encode(xy: Tensor, int_scale: float, dim: int) -> Tensor:
    """Points [n, 2] -> bits [n, dim] (float32 in {0,1}): per coordinate sign + Gray code."""
    check(dim >= 4 and dim % 2 == 0, "dim", f"must be an even integer >= 4 (got {dim})")
    m = dim // 2 - 1
    v = xy.to(_F64) * int_scale
    sign = (v < 0).to(_F64)
    mag = torch.floor(v.abs())
    mag = torch.clamp(mag, max=math.ldexp(1.0, m) - 1.0)  # saturate points outside the range
    # binary digits, exact in float64: floor(mag / 2^k) mod 2
    b = torch.remainder(torch.floor(mag[..., None] / _pow2(m)), 2.0)
    gray = b.clone()
    gray[..., 1:] = torch.remainder(b[..., 1:] + b[..., :-1], 2.0)  # g_k = b_k xor b_{k+1}
    bits = torch.cat([sign[..., None], gray], dim=-1)  # [n, 2, dim/2]
    return bits.reshape(xy.shape[0], dim).to(torch.float32)


def decode(bits: Tensor, int_scale: float, centre: bool = True) -> Tensor:
    """Bits [n, dim] -> points [n, 2] (float64); inverse of ``encode`` up to 1/int_scale.

    ``centre=True`` returns the middle of the quantisation cell, (k + 1/2) / int_scale, so that
    ``encode(decode(b)) == b``; ``centre=False`` returns the cell's inner edge k / int_scale
    as the reference code's bin2float does.
    """
    n, dim = bits.shape
    m = dim // 2 - 1
    h = bits.to(_F64).reshape(n, 2, dim // 2)
    sign = 1.0 - 2.0 * h[..., 0]
    b = torch.remainder(torch.cumsum(h[..., 1:], dim=-1), 2.0)  # Gray -> binary (prefix xor)
    mag = (b * _pow2(m)).sum(-1) + (0.5 if centre else 0.0)
    return sign * mag / int_scale


class Synthetic2D:
    """A toy 2-D density as ``dim``-bit vectors (RMwGGIS Sec. 5.1); samples are fresh per call."""

    state_kind = "binary"

    def __init__(self, name: DatasetName, dim: int):
        check(
            name in _SAMPLERS,
            "name",
            f"must be one of {', '.join(DATASETS)} (got {name!r})",
        )
        check(
            isinstance(dim, int) and 4 <= dim <= 2048 and dim % 2 == 0,
            "dim",
            f"must be an even integer in [4, 2048] (got {dim})",
        )
        self.name, self.dim = name, dim
        self.int_scale = compute_int_scale(name, dim)
        self.f_scale = math.ldexp(1.0, dim // 2 - 1) / self.int_scale - 1.0

    def sample_continuous(self, n: int, generator: torch.Generator) -> Tensor:
        return sample_2d(self.name, n, generator)

    def sample(self, n: int, generator: torch.Generator) -> Tensor:
        """``n`` fresh samples as bits [n, dim] (float32, CPU)."""
        return self.encode(self.sample_continuous(n, generator))

    def encode(self, xy: Tensor) -> Tensor:
        return encode(xy, self.int_scale, self.dim)

    def decode(self, bits: Tensor, centre: bool = True) -> Tensor:
        return decode(bits, self.int_scale, centre)

    def grid_bits(self, resolution: int, bound: float) -> tuple[Tensor, Tensor]:
        """Regular grid on [-bound, bound]^2 for heat maps: (bits [r*r, dim], xy [r*r, 2]).

        Row-major with y varying slowest (``meshgrid(x, y)`` order), so
        ``values.reshape(r, r)`` is an image with y along rows.
        """
        check(resolution >= 2, "resolution", f"must be an integer >= 2 (got {resolution})")
        lin = torch.linspace(-bound, bound, resolution, dtype=_F64)
        yy, xx = torch.meshgrid(lin, lin, indexing="ij")
        xy = torch.stack([xx.reshape(-1), yy.reshape(-1)], dim=1)
        return self.encode(xy), xy
