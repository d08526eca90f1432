"""Checkpoints: atomic, checksummed, the previous one kept; normal file permissions."""

from __future__ import annotations

import os
import stat

import pytest
import torch

from ebmlab.errors import CheckpointError
from ebmlab.utils.workspace import Workspace, atomic_write_text


def _corrupt_same_size(path):
    b = bytearray(path.read_bytes())
    b[len(b) // 2] ^= 0xFF
    path.write_bytes(bytes(b))


def test_checkpoint_roundtrip_keeps_previous(tmp_path):
    ws = Workspace(tmp_path)
    ws.save({"a": torch.ones(3)})
    ws.save({"a": torch.zeros(3)})
    assert torch.equal(ws.load()["a"], torch.zeros(3))
    ckpts = ws.ckpt_dir
    gens = sorted(p.name for p in ckpts.glob("last.*.pt"))
    assert gens == ["last.00000001.pt", "last.00000002.pt"]  # the new one and the previous one
    assert ws.last.is_symlink() and ws.last.resolve().name == gens[-1]
    assert all(ws.verify(ckpts / g) is None for g in gens)
    ws.save({"a": torch.full((3,), 2.0)})  # older generations go
    assert sorted(p.name for p in ckpts.glob("last.*.pt")) == gens[1:] + ["last.00000003.pt"]


@pytest.mark.parametrize("damage", ["flip", "truncate"])
def test_damaged_checkpoint_falls_back_to_previous(tmp_path, capsys, damage):
    ws = Workspace(tmp_path)
    ws.save({"a": torch.ones(3)})
    ws.save({"a": torch.zeros(3)})
    if damage == "flip":
        _corrupt_same_size(ws.last)
    else:
        ws.last.write_bytes(ws.last.read_bytes()[:50])
    assert torch.equal(ws.load()["a"], torch.ones(3))
    err = capsys.readouterr().err
    assert str(ws.last) in err and "resuming from" in err


def test_no_good_checkpoint_is_a_clear_error(tmp_path):
    ws = Workspace(tmp_path)
    ws.save({"a": torch.ones(3)})
    _corrupt_same_size(ws.last)
    with pytest.raises(CheckpointError, match="fresh=true") as e:
        ws.load()
    assert str(ws.last) in str(e.value)


def test_files_get_normal_permissions_and_failed_write_leaves_nothing(tmp_path):
    old = os.umask(0o022)
    try:
        atomic_write_text(tmp_path / "x.txt", "hi")
        Workspace(tmp_path).save({"a": 1})
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "x.txt").stat().st_mode) == 0o644
    assert stat.S_IMODE(Workspace(tmp_path).last.stat().st_mode) == 0o644

    class Boom:
        def __reduce__(self):
            raise RuntimeError("cannot pickle")

    with pytest.raises(RuntimeError):
        Workspace(tmp_path).save({"a": Boom()}, name="other")
    leftovers = [p.name for p in (tmp_path / "checkpoints").iterdir() if p.name.endswith(".tmp")]
    assert leftovers == []
