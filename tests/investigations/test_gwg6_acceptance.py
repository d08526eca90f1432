"""scripts/investigations/gwg6_acceptance.py: its GWG at temperature 2 is ebmlab's GWG draw for
draw, and temperature 1 really changes the index proposal (a sharper softmax of d~(x))."""

import pytest
import torch

from ebmlab.models.ising import LatticeIsing
from ebmlab.samplers.gwg import GWG
from tests.investigations.script import load_script

pytestmark = pytest.mark.usefixtures("one_thread")


def test_temperature_two_is_ebmlab_gwg():
    script = load_script("gwg6_acceptance")
    model = LatticeIsing(n_side=3, sigma=0.1, bias=0.2)
    a = script.acceptance(script.TemperedGWG(6, 2.0), model, 16, 40, 10, seed=3)
    b = script.acceptance(GWG(6), model, 16, 40, 10, seed=3)
    assert a == b


def test_temperature_one_sharpens_the_index_proposal():
    script = load_script("gwg6_acceptance")
    g = torch.Generator().manual_seed(0)
    x = (torch.rand(4, 9, generator=g) < 0.5).float()
    grad = torch.randn(4, 9, generator=g)
    d = grad * (1 - 2 * x)
    lq1 = script.TemperedGWG(6, 1.0)._index_log_probs(x, grad)
    assert torch.allclose(lq1, torch.log_softmax(d.double(), -1))
    lq2 = script.TemperedGWG(6, 2.0)._index_log_probs(x, grad)
    assert torch.allclose(lq2.double(), torch.log_softmax(d.double() / 2, -1), atol=1e-6)
