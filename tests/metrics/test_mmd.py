import math

import pytest
import torch

from ebmlab.metrics.mmd import (
    hamming_distance,
    log_mmd_curve_summary,
    mmd2_exp_hamming,
    mmd2_linear_hamming_unbiased,
    mmd2_linear_hamming_unbiased_se,
)


def _bits(n, d, gen, p=0.5):
    return torch.bernoulli(torch.full((n, d), p), generator=gen)


def _brute_hamming(x, y):
    return torch.tensor([[float((xi != yj).sum()) for yj in y] for xi in x], dtype=torch.float64)


def _brute_mmd(x, y, k, unbiased):
    def mean_k(a, b, drop_diag):
        tot, cnt = 0.0, 0
        for i in range(len(a)):
            for j in range(len(b)):
                if drop_diag and i == j:
                    continue
                tot += k(a[i], b[j])
                cnt += 1
        return tot / cnt

    return mean_k(x, x, unbiased) + mean_k(y, y, unbiased) - 2 * mean_k(x, y, False)


def test_hamming_matches_brute_force_and_blocks(gen):
    x, y = _bits(13, 9, gen), _bits(7, 9, gen)
    ref = _brute_hamming(x, y)
    assert torch.equal(hamming_distance(x, y), ref)
    assert torch.equal(hamming_distance(x, y, block_rows=4), ref)
    assert torch.equal(hamming_distance(x.bool(), y.int()), ref)


def test_hamming_shape_errors(gen):
    with pytest.raises(ValueError, match="dimension mismatch"):
        hamming_distance(_bits(3, 4, gen), _bits(3, 5, gen))
    with pytest.raises(ValueError, match="2-D"):
        hamming_distance(_bits(3, 4, gen)[0], _bits(3, 4, gen))


def test_exp_hamming_mmd_matches_brute_force(gen):
    d = 10
    x, y = _bits(12, d, gen), _bits(9, d, gen, p=0.3)

    def k(a, b):
        return math.exp(-float((a != b).sum()) / d)

    ref = _brute_mmd(x, y, k, unbiased=False)
    assert mmd2_exp_hamming(x, y).item() == pytest.approx(ref, rel=1e-12, abs=1e-14)
    assert mmd2_exp_hamming(x, y, block_rows=5).item() == pytest.approx(ref, rel=1e-12)


def test_exp_hamming_mmd_known_answers(gen):
    x = _bits(20, 8, gen)
    # identical sets (and permutations of them) give exactly zero for the V-statistic
    assert mmd2_exp_hamming(x, x).item() == 0.0
    assert mmd2_exp_hamming(x, x[torch.randperm(20, generator=gen)]).item() == pytest.approx(
        0.0, abs=1e-15
    )
    # hand computation: x = {0000}, y = {1100}, d = 4: k(x,y) = exp(-1/2)
    a, b = torch.zeros(1, 4), torch.tensor([[1.0, 1.0, 0.0, 0.0]])
    assert mmd2_exp_hamming(a, b).item() == pytest.approx(2 - 2 * math.exp(-0.5), rel=1e-12)
    # two-point sets: x = {000, 111}, y = {000, 000}, d = 3
    a = torch.tensor([[0.0, 0, 0], [1, 1, 1]])
    b = torch.zeros(2, 3)
    e = math.exp(-1.0)
    kxx, kyy, kxy = (2 + 2 * e) / 4, 1.0, (2 + 2 * e) / 4
    assert mmd2_exp_hamming(a, b).item() == pytest.approx(kxx + kyy - 2 * kxy, rel=1e-12)


def test_exp_hamming_mmd_separates_distributions(gen):
    # same law -> small, different laws -> large (noise floor ~ 1/n for the V-statistic)
    d, n = 20, 400
    same = mmd2_exp_hamming(_bits(n, d, gen, 0.3), _bits(n, d, gen, 0.3)).item()
    diff = mmd2_exp_hamming(_bits(n, d, gen, 0.3), _bits(n, d, gen, 0.7)).item()
    assert same < 5.0 / n
    assert diff > 20 * same


def test_linear_unbiased_mmd_matches_brute_force(gen):
    d = 7
    x, y = _bits(11, d, gen), _bits(8, d, gen, p=0.8)

    def k(a, b):
        return d - float((a != b).sum())

    ref = _brute_mmd(x, y, k, unbiased=True)
    assert mmd2_linear_hamming_unbiased(x, y).item() == pytest.approx(ref, rel=1e-12, abs=1e-12)


def test_linear_unbiased_mmd_known_answer_and_unbiasedness(gen):
    # hand computation: x = {00, 11}, y = {00, 01}, d = 2, k = 2 - H
    x = torch.tensor([[0.0, 0.0], [1.0, 1.0]])
    y = torch.tensor([[0.0, 0.0], [0.0, 1.0]])
    kxx = 0.0  # k(00, 11) = 0, off-diagonal only
    kyy = 1.0  # k(00, 01) = 1
    kxy = (2 + 1 + 0 + 1) / 4
    assert mmd2_linear_hamming_unbiased(x, y).item() == pytest.approx(kxx + kyy - 2 * kxy)
    # MMD^2 for k = <phi, phi> equals ||E phi(X) - E phi(Y)||^2 = 2 sum_k (p_k - q_k)^2;
    # U-statistic is unbiased: average over replicates is within MC noise of it
    p, q, d, n, reps = 0.5, 0.6, 6, 50, 200
    est = torch.stack(
        [
            mmd2_linear_hamming_unbiased(_bits(n, d, gen, p), _bits(n, d, gen, q))
            for _ in range(reps)
        ]
    )
    truth = 2 * d * (p - q) ** 2
    se = est.std().item() / math.sqrt(reps)
    assert abs(est.mean().item() - truth) < 4 * se
    with pytest.raises(ValueError, match=">= 2 samples"):
        mmd2_linear_hamming_unbiased(x[:1], y)


def test_linear_unbiased_mmd_standard_error_matches_the_replicate_spread(gen):
    """The plug-in standard error agrees with the spread of the statistic over independent
    replicates, both at zero MMD (the trace terms; there it errs on the large side) and far
    from it (the delta terms)."""
    d, n, m, reps = 8, 60, 80, 1500
    for p, q in ((0.5, 0.5), (0.3, 0.7)):
        ests, ses = [], []
        for _ in range(reps):
            x, y = _bits(n, d, gen, p), _bits(m, d, gen, q)
            ests.append(mmd2_linear_hamming_unbiased(x, y).item())
            ses.append(mmd2_linear_hamming_unbiased_se(x, y))
        spread = float(torch.tensor(ests).std())
        assert 0.95 * spread < sum(ses) / reps < 1.2 * spread, (p, q)
    with pytest.raises(ValueError, match=">= 3 samples"):
        mmd2_linear_hamming_unbiased_se(x[:2], y)


def test_log_mmd_curve_summary_tail_and_mean_skip_step_0():
    """Tail mean: the last 10% of evaluations (at least one); mean: every one after step 0."""
    curve = [100.0, *[float(i) for i in range(1, 21)]]  # step 0, then 20 evaluations
    s = log_mmd_curve_summary(curve)
    assert s["log_mmd"] == 20.0
    assert s["log_mmd_tail_mean"] == pytest.approx((19 + 20) / 2)  # 21 values: the last 2
    assert s["log_mmd_mean"] == pytest.approx(10.5)
    assert log_mmd_curve_summary([3.0])["log_mmd_tail_mean"] == 3.0
