"""GWG with distinct flips: the ordered draw without replacement and its probability."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from ebmlab.errors import ConfigError
from ebmlab.samplers.gwg import GWGDistinct


def test_ordered_sequence_probabilities_sum_to_one():
    logq = torch.log_softmax(torch.tensor([[0.3, -1.2, 2.0, 0.1, -0.4]]), -1)
    seqs = torch.tensor(list(itertools.permutations(range(5), 3)))  # every ordered triple
    lq = GWGDistinct._sequence_log_q(logq.expand(len(seqs), -1), seqs)
    assert math.isclose(float(lq.double().exp().sum()), 1.0, rel_tol=1e-6)


def test_draws_are_distinct_and_follow_the_sequential_law():
    torch.manual_seed(0)
    logq = torch.log_softmax(torch.tensor([1.5, 0.0, -1.0, 0.5]), -1).expand(200000, -1)
    s = GWGDistinct(2)
    idx = s._draw(logq, torch.Generator().manual_seed(1))
    assert idx.shape == (200000, 2) and bool((idx[:, 0] != idx[:, 1]).all())
    q = logq[0].exp()
    for a, b in [(0, 3), (3, 0), (1, 2)]:
        expect = float(q[a] * q[b] / (1 - q[a]))
        got = float(((idx[:, 0] == a) & (idx[:, 1] == b)).double().mean())
        assert abs(got - expect) < 4 * math.sqrt(expect / 200000), (a, b, got, expect)


def test_more_distinct_flips_than_coordinates_is_a_config_error():
    with pytest.raises(ConfigError, match="n_flips"):
        GWGDistinct(6)._draw(torch.zeros(2, 4), torch.Generator().manual_seed(0))
