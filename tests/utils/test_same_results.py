"""docs/gpu.md's rule for "a resumed run gives the same results" (ebmlab.utils.same_results)."""

import math

import torch

from ebmlab.utils.same_results import CUDA_REL_TOL, differences


def test_cpu_results_must_be_bit_identical():
    a = {"ess": 21.153388143279415, "n": 3}
    assert differences(a, dict(a), "cpu") == []
    b = {"ess": math.nextafter(a["ess"], 0.0), "n": 3}  # one unit in the last place
    assert differences(a, b, "cpu") == [f"ess: {a['ess']!r} != {b['ess']!r}"]


def test_cuda_numbers_agree_to_the_stated_tolerance_and_tensors_exactly():
    a = {"ess": 21.153388143279415, "rows": [{"step": 5, "rmse": 0.03}]}
    b = {"ess": 21.15338814327941, "rows": [{"step": 5, "rmse": 0.03}]}  # the first GPU check
    assert differences(a, b, "cuda") == [] and differences(a, b, "cpu") != []
    far = {**b, "ess": a["ess"] * (1 + 10 * CUDA_REL_TOL)}
    assert differences(a, far, "cuda") != []
    x = torch.zeros(3)
    y = x.clone()
    y[1] = 1e-30
    assert differences({"x": x}, {"x": x.clone()}, "cuda") == []
    assert differences({"x": x}, {"x": y}, "cuda") == ["x: tensors differ"]  # chains: exact


def test_timings_and_cache_flags_are_not_compared_and_missing_keys_are():
    a = {"seconds": 1.0, "ess_per_second": 2.0, "time_per_iter": 0.1, "rbm_cached": False}
    b = {"seconds": 9.0, "ess_per_second": 7.0, "time_per_iter": 0.9, "rbm_cached": True}
    assert differences(a, b, "cpu") == []
    assert differences({"ess": 1.0}, {}, "cpu") == ["ess: only in the first"]
    assert differences({"nested": {"a": [1, 2]}}, {"nested": {"a": [1]}}, "cpu") == [
        "nested.a: lengths 2 and 1"
    ]
