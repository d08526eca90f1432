"""Generated-data caches: a corrupt cache is detected, removed and rebuilt, never used."""

from __future__ import annotations

import torch

from ebmlab.data.ising_data import IsingLatticeData
from ebmlab.utils.cache import load_cached, save_cached


def test_cache_roundtrip_and_corruption(tmp_path, capsys):
    path = tmp_path / "c.pt"
    assert load_cached(path) is None
    save_cached({"x": torch.arange(5)}, path)
    assert torch.equal(load_cached(path)["x"], torch.arange(5))
    b = bytearray(path.read_bytes())
    b[len(b) // 2] ^= 0xFF
    path.write_bytes(bytes(b))
    assert load_cached(path) is None and not path.exists()
    assert "is corrupt" in capsys.readouterr().err


def test_corrupt_ising_sample_cache_is_rebuilt_identically(tmp_path, capsys):
    data = IsingLatticeData(
        n_side=3,
        sigma=0.25,
        bias=0.0,
        n_samples=16,
        gibbs_steps=50,
        seed=0,
        cache_dir=str(tmp_path),
        dim=None,
    )
    first = data.samples(progress=False)
    data.cache_path.write_bytes(data.cache_path.read_bytes()[:40])  # truncated
    again = data.samples(progress=False)
    assert torch.equal(first, again) and "rebuilding" in capsys.readouterr().err


def test_fresh_rebuilds_each_cache_once(tmp_path, monkeypatch, capsys):
    from ebmlab.utils import cache

    path = tmp_path / "c.pt"
    save_cached({"x": 1}, path)
    monkeypatch.setenv(cache.REBUILD_ENV, "1")
    monkeypatch.setattr(cache, "_rebuilt", set())
    assert load_cached(path) is None and "fresh=true" in capsys.readouterr().err
    save_cached({"x": 2}, path)
    assert load_cached(path) == {"x": 2}  # rebuilt once; later reads use the new cache
