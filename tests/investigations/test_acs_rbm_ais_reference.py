"""scripts/investigations/acs_rbm_ais_reference.py: the AIS weights' effective sample size
(sum w)^2 / sum w^2 has its known values, in log space, at any scale of the weights."""

import math

import pytest
import torch

from tests.investigations.script import load_script


def test_weight_ess_known_answers():
    ess = load_script("acs_rbm_ais_reference").weight_ess
    assert ess(torch.full((400,), 1234.5, dtype=torch.float64)) == pytest.approx(400)
    one_heavy = torch.tensor([0.0, 0.0, 0.0, 800.0], dtype=torch.float64)  # exp overflows
    assert ess(one_heavy) == pytest.approx(1.0)
    two_of_four = torch.tensor([-math.inf, 5.0, 5.0, -math.inf], dtype=torch.float64)
    assert ess(two_of_four) == pytest.approx(2.0)
    w = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)  # (1+2+3)^2 / (1+4+9)
    assert ess(w.log()) == pytest.approx(36 / 14)
