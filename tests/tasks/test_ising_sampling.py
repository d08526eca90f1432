"""ising_sampling's config checks: a learnable model or one too large to enumerate is refused
from the config, before the run directory is taken and before any compute."""

from __future__ import annotations

import pytest

from ebmlab.errors import ConfigError
from tests.helpers import check_before_compute

EXP = ["experiment=dlp/fig3_ising_sampling", "scale=smoke"]


def test_ising_sampling_refuses_a_learnable_or_too_large_model():
    check_before_compute([*EXP, "model.n_side=3"])  # the smoke config passes
    with pytest.raises(ConfigError, match="model: task ising_sampling needs a fixed target"):
        check_before_compute([*EXP, "model=ising"])
    with pytest.raises(ConfigError, match=r"model: the exact mean needs dim <= 25 \(got 36\)"):
        check_before_compute([*EXP, "model.n_side=6", "task.max_exact_dim=25"])
    with pytest.raises(ConfigError, match="needs dim <= 25 \\(got 400\\)"):
        check_before_compute([*EXP, "model=ising_ba", "task.max_exact_dim=25"])
