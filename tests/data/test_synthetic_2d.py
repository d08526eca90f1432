import math

import pytest
import torch

from ebmlab.data.synthetic_2d import (
    DATASETS,
    Synthetic2D,
    compute_int_scale,
    decode,
    encode,
    sample_2d,
)
from ebmlab.errors import ConfigError


def _reference_bits(v: float, m: int) -> list[int]:
    """Independent string-based encoding: sign bit + m-bit Gray code of int(|v|)."""
    k = int(abs(v))
    g = k ^ (k >> 1)
    return [1 if v < 0 else 0] + [int(c) for c in format(g, f"0{m}b")]


def test_gray_code_known_values():
    # dim 8 -> 3 magnitude bits; 5 = 101b -> Gray 111, 6 = 110b -> Gray 101
    bits = encode(torch.tensor([[5.7, -6.2]], dtype=torch.float64), 1.0, 8)
    assert bits.tolist() == [[0, 1, 1, 1, 1, 1, 0, 1]]
    assert decode(bits, 1.0, centre=False).tolist() == [[5.0, -6.0]]
    assert decode(bits, 1.0).tolist() == [[5.5, -6.5]]


@pytest.mark.parametrize("dim", [8, 32, 64])
def test_encode_matches_integer_reference(dim, gen):
    m = dim // 2 - 1
    scale = (2.0**m - 1) / 5.0
    xy = (torch.rand(200, 2, generator=gen, dtype=torch.float64) * 10 - 5).clamp(-4.999, 4.999)
    bits = encode(xy, scale, dim)
    ref = [
        _reference_bits(float(a) * scale, m) + _reference_bits(float(b) * scale, m)
        for a, b in xy.tolist()
    ]
    assert bits.to(torch.int64).tolist() == ref


def test_gray_neighbours_differ_in_one_bit():
    vals = torch.arange(0, 64, dtype=torch.float64)
    xy = torch.stack([vals, torch.zeros_like(vals)], 1)
    bits = encode(xy, 1.0, 16)[:, :8]
    hamming = (bits[1:] != bits[:-1]).sum(-1)
    assert torch.all(hamming == 1)


@pytest.mark.parametrize("name", DATASETS)
def test_round_trip_within_quantisation(name, gen):
    ds = Synthetic2D(name, 32)
    xy = ds.sample_continuous(2000, gen)
    bits = ds.encode(xy)
    assert bits.shape == (2000, 32) and bits.dtype == torch.float32
    assert set(bits.unique().tolist()) <= {0.0, 1.0}
    assert (ds.decode(bits) - xy).abs().max() <= 0.5 / ds.int_scale
    assert (ds.decode(bits, centre=False) - xy).abs().max() < 1.0 / ds.int_scale
    assert torch.equal(ds.encode(ds.decode(bits)), bits)


@pytest.mark.parametrize("dim", [256, 2048])
def test_high_dim_round_trip(dim, gen):
    ds = Synthetic2D("2spirals", dim)
    assert ds.int_scale == pytest.approx(2.0 ** (dim // 2 - 1) / (ds.f_scale + 1))
    xy = ds.sample_continuous(300, gen)
    bits = ds.encode(xy)
    assert bits.shape == (300, dim)
    back = ds.decode(bits)
    # quantisation step 1/int_scale is below float64 resolution here
    tol = torch.clamp(xy.abs() * 4e-16, min=1.0 / ds.int_scale)
    assert torch.all((back - xy).abs() <= tol)
    assert torch.equal(ds.encode(back), bits)


def test_int_scale_definition():
    pts = sample_2d("moons", 5000, torch.Generator().manual_seed(1))
    f_scale = float(pts.abs().max()) + 1
    assert compute_int_scale("moons", 32) == pytest.approx(2**15 / (f_scale + 1), rel=1e-12)
    ds = Synthetic2D("moons", 32)
    assert ds.f_scale == pytest.approx(f_scale)


@pytest.mark.parametrize("name", DATASETS)
def test_samples_fresh_and_reproducible(name):
    ds = Synthetic2D(name, 32)
    g = torch.Generator().manual_seed(3)
    a, b = ds.sample(64, g), ds.sample(64, g)
    assert not torch.equal(a, b)
    assert torch.equal(a, ds.sample(64, torch.Generator().manual_seed(3)))
    # every point is representable: no magnitude saturation
    xy = sample_2d(name, 5000, torch.Generator().manual_seed(4))
    assert float(xy.abs().max()) < ds.f_scale + 1


def test_shapes_of_toy_sets(gen):
    n = 20000
    cb = sample_2d("checkerboard", n, gen)
    assert torch.all((torch.floor(cb[:, 0] / 2) + torch.floor(cb[:, 1] / 2)) % 2 == 0)
    assert cb.abs().max() <= 4.0
    g8 = sample_2d("8gaussians", n, gen) * 1.414
    r = 1 / math.sqrt(2)
    c = 4 * torch.tensor(
        [(1, 0), (-1, 0), (0, 1), (0, -1), (r, r), (r, -r), (-r, r), (-r, -r)], dtype=torch.float64
    )
    nearest = torch.cdist(g8, c).min(1)
    counts = torch.bincount(nearest.indices, minlength=8).double()
    assert torch.all((counts / n - 1 / 8).abs() < 5 * math.sqrt(1 / 8 * 7 / 8 / n))
    # residual std of each coordinate is 0.5 (clusters are well separated)
    resid = g8 - c[nearest.indices]
    assert resid.std(0).sub(0.5).abs().max() < 0.02
    rad = sample_2d("circles", n, gen).norm(dim=1)
    inner, outer = rad[rad < 2.25], rad[rad >= 2.25]
    assert abs(len(inner) - n / 2) < 50 and abs(float(inner.mean()) - 1.5) < 0.05
    assert abs(float(outer.mean()) - 3.0) < 0.05
    sp = sample_2d("2spirals", n, gen)
    assert sp.mean(0).abs().max() < 0.05  # point-symmetric arms
    sw = sample_2d("swissroll", n, gen).norm(dim=1)
    assert 0.7 < float(sw.quantile(0.01)) and float(sw.quantile(0.99)) < 3.2
    pw = sample_2d("pinwheel", n, gen)
    assert abs(float(pw.norm(dim=1).mean()) - 2.0) < 0.15


def test_grid_bits_decode_to_grid():
    ds = Synthetic2D("8gaussians", 32)
    bits, xy = ds.grid_bits(50, 4.1)
    assert bits.shape == (2500, 32) and xy.shape == (2500, 2)
    assert xy[0].tolist() == [-4.1, -4.1] and xy[1, 1] == -4.1 and xy[50, 0] == -4.1
    assert (ds.decode(bits) - xy).abs().max() < 1.0 / ds.int_scale


def test_config_errors():
    with pytest.raises(ConfigError) as e:
        Synthetic2D("spiral", 32)
    assert e.value.key == "name" and "2spirals" in str(e.value)
    with pytest.raises(ConfigError) as e:
        Synthetic2D("moons", 33)
    assert e.value.key == "dim"
