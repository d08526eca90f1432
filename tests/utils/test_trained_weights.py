"""Loading trained weights from a training run's checkpoint (old and run-loop formats)."""

from __future__ import annotations

import pytest
import torch

from ebmlab.errors import ConfigError
from ebmlab.utils.trained_weights import load_trained_weights, resolve_checkpoint


def _net(fill: float) -> torch.nn.Linear:
    net = torch.nn.Linear(3, 2)
    torch.nn.init.constant_(net.weight, fill)
    return net


@pytest.mark.parametrize("loop_format", [False, True], ids=["top_level", "run_loop"])
def test_loads_ema_or_raw_weights_from_a_run_directory(tmp_path, loop_format):
    state = {"model": _net(1.0).state_dict(), "learner": {"ema": _net(2.0).state_dict()}}
    ck = {"task": state, "history": [], "_run": {"step": 3}} if loop_format else state
    (tmp_path / "checkpoints").mkdir()
    torch.save(ck, tmp_path / "checkpoints" / "last.pt")
    torch.save(ck, tmp_path / "checkpoints" / "best.pt")
    path = resolve_checkpoint(str(tmp_path))
    assert path.name == "best.pt"  # best before last
    net = _net(0.0)
    assert load_trained_weights(net, path, use_ema=True) == "ema"
    assert float(net.weight[0, 0].detach()) == 2.0
    assert load_trained_weights(net, path, use_ema=False) == "raw"
    assert float(net.weight[0, 0].detach()) == 1.0


def test_bare_state_dict_missing_files_and_mismatch(tmp_path):
    torch.save(_net(3.0).state_dict(), tmp_path / "w.pt")
    net = _net(0.0)
    assert load_trained_weights(net, resolve_checkpoint(str(tmp_path / "w.pt")), True) == "raw"
    assert float(net.weight[0, 0].detach()) == 3.0
    with pytest.raises(FileNotFoundError):
        resolve_checkpoint(str(tmp_path / "none.pt"))
    with pytest.raises(FileNotFoundError, match="best.pt"):
        resolve_checkpoint(str(tmp_path))  # a directory without checkpoints
    with pytest.raises(ConfigError, match="does not fit"):
        load_trained_weights(torch.nn.Linear(4, 2), tmp_path / "w.pt", True)
