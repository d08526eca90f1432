"""scripts/investigations/gwg6_acceptance.py: its GWG at temperature 2 is ebmlab's GWG draw for
draw, and temperature 1 really changes the index proposal (a sharper softmax of d~(x))."""

import importlib.util
from pathlib import Path

import pytest
import torch

from ebmlab.models.ising import LatticeIsing
from ebmlab.samplers.gwg import GWG

pytestmark = pytest.mark.usefixtures("one_thread")
SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "investigations" / "gwg6_acceptance.py"


def load():
    spec = importlib.util.spec_from_file_location("gwg6_acceptance", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_temperature_two_is_ebmlab_gwg():
    script = load()
    model = LatticeIsing(n_side=3, sigma=0.1, bias=0.2)
    a = script.acceptance(script.TemperedGWG(6, 2.0), model, 16, 40, 10, seed=3)
    b = script.acceptance(GWG(6), model, 16, 40, 10, seed=3)
    assert a == b


def test_temperature_one_sharpens_the_index_proposal():
    script = load()
    g = torch.Generator().manual_seed(0)
    x = (torch.rand(4, 9, generator=g) < 0.5).float()
    grad = torch.randn(4, 9, generator=g)
    d = grad * (1 - 2 * x)
    lq1 = script.TemperedGWG(6, 1.0)._index_log_probs(x, grad)
    assert torch.allclose(lq1, torch.log_softmax(d.double(), -1))
    lq2 = script.TemperedGWG(6, 2.0)._index_log_probs(x, grad)
    assert torch.allclose(lq2.double(), torch.log_softmax(d.double() / 2, -1), atol=1e-6)
