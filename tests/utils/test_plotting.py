"""Curve panels: a few series get a legend in each panel; many get one legend beside them."""

from __future__ import annotations

import numpy as np
import pytest

from ebmlab.utils.plotting import LEGEND_INSIDE, side_by_side


@pytest.mark.parametrize("n", [3, LEGEND_INSIDE + 4])
def test_many_series_share_one_legend_outside_the_panels(n):
    x = np.arange(5.0)
    series = {f"s{i}": (x, x * i) for i in range(n)}
    fig = side_by_side([("a", series, "step", "m"), ("b", series, "seconds", "m")])
    in_panels = [ax.get_legend() for ax in fig.axes]
    if n <= LEGEND_INSIDE:
        assert all(leg is not None for leg in in_panels) and not fig.legends
    else:
        assert all(leg is None for leg in in_panels) and len(fig.legends) == 1
        assert [t.get_text() for t in fig.legends[0].get_texts()] == list(series)
