"""scripts/investigations/gwg6_distinct_acceptance.py: it tells the 6-flip moves from the 1-flip
moves, and its pre-fix comparison chain really is the reducible one (no parity changes)."""

import pytest

from ebmlab.models.ising import LatticeIsing
from ebmlab.samplers.gwg import GWGDistinct
from tests.investigations.script import load_script

pytestmark = pytest.mark.usefixtures("one_thread")


def test_moves_are_split_by_size_and_the_prefix_chain_keeps_parity():
    script = load_script("gwg6_distinct_acceptance")
    model = LatticeIsing(n_side=3, sigma=0.1, bias=0.2)
    mixed = script.acceptance_by_move(GWGDistinct(4, 0.3), model, 64, 60, 10, seed=1)
    assert 0.6 < mixed["share_k"] < 0.8 and mixed["parity_changes"] > 0
    assert 0 < mixed["accept_k"] < 1 and 0 < mixed["accept_1"] <= 1
    share = mixed["share_k"]
    whole = share * mixed["accept_k"] + (1 - share) * mixed["accept_1"]
    assert abs(whole - mixed["accept"]) < 1e-9
    assert abs(mixed["flips"] - (4 * share + (1 - share))) < 1e-9
    old = script.acceptance_by_move(script.reducible_distinct(4), model, 64, 60, 10, seed=1)
    assert old["share_k"] == 1.0 and old["parity_changes"] == 0.0 and old["flips"] == 4.0
