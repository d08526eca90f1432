"""ChainState.select takes rows exactly as torch.where does (also with non-finite values), and
merge (in place, into a proposal the step owns) gives the same state;
aux caches are combined row by row only under the same tag and dropped when x, log_prob or
grad change."""

from __future__ import annotations

import pytest
import torch

from ebmlab.core.state import ChainState


def _state(seed: int, n: int = 10, d: int = 6, aux_tag=("t",), dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(0, 2, (n, d), generator=g).to(dtype)
    aux = {} if aux_tag is None else {"c": (aux_tag, (torch.randn(n, 3, generator=g),))}
    lp, grad = torch.randn(n, generator=g).to(dtype), torch.randn(n, d, generator=g).to(dtype)
    return ChainState(x=x, log_prob=lp, grad=grad, aux=aux)


def _where(accept, new, old):
    return torch.where(accept.view(-1, *([1] * (new.dim() - 1))), new, old)


def _bits(t):
    return t.view(torch.int32 if t.dtype == torch.float32 else torch.int64)


@pytest.mark.parametrize("rate", [0.0, 0.2, 0.8, 1.0])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_select_is_where_bit_for_bit(rate, dtype):
    cur, prop = _state(0, dtype=dtype), _state(2, dtype=dtype)
    before = [t.clone() for t in (cur.x, cur.grad, prop.x, prop.grad)]
    accept = torch.rand(10, generator=torch.Generator().manual_seed(1)) < rate
    out = cur.select(accept, prop)
    for name in ("x", "log_prob", "grad"):
        ref = _where(accept, getattr(prop, name), getattr(cur, name))
        assert torch.equal(_bits(getattr(out, name)), _bits(ref)), name
    ref = _where(accept, prop.aux["c"][1][0], cur.aux["c"][1][0])
    assert torch.equal(out.aux["c"][1][0], ref)
    after = [t for t in (cur.x, cur.grad, prop.x, prop.grad)]
    assert all(torch.equal(a, b) for a, b in zip(before, after))  # inputs untouched


def test_select_with_non_finite_values_is_where():
    cur, prop = _state(0), _state(2)
    accept = torch.tensor([True, False] * 5)
    prop.grad[1, 2] = float("inf")  # rejected row: must not leak into the kept row
    prop.grad[3, 0] = float("nan")
    cur.grad[0, 1] = -float("inf")  # accepted row: replaced
    cur.grad[5, 4] = float("inf")  # kept row: kept as it is
    out = cur.select(accept, prop)
    ref = _where(accept, prop.grad, cur.grad)
    assert torch.equal(out.grad.isnan(), ref.isnan())
    assert torch.equal(out.grad.nan_to_num(), ref.nan_to_num())
    assert out.grad[5, 4] == float("inf") and torch.isfinite(out.grad[1]).all()


def test_aux_needs_the_same_tag_on_both_sides():
    cur, prop = _state(0, aux_tag=("a",)), _state(2, aux_tag=("b",))
    accept = torch.ones(10, dtype=torch.bool)
    assert cur.select(accept, prop).aux == {}
    assert "c" in _state(0).select(accept, _state(2)).aux
    assert _state(0, aux_tag=None).select(accept, _state(2)).aux == {}


def test_new_x_log_prob_or_grad_drop_aux():
    st = _state(0)
    assert "c" in st.replace(extra={"k": 1}).aux
    for field in ("x", "log_prob", "grad"):
        assert st.replace(**{field: getattr(st, field).clone()}).aux == {}
    assert st.restored(st.state_dict()).aux == {}
    assert "aux" not in st.state_dict()


@pytest.mark.parametrize("rate", [0.0, 0.3, 0.8, 1.0])
def test_merge_equals_select_and_leaves_the_current_state(rate):
    cur = _state(0)
    accept = torch.rand(10, generator=torch.Generator().manual_seed(1)) < rate
    ref = cur.select(accept, _state(2))
    before = [t.clone() for t in (cur.x, cur.log_prob, cur.grad, cur.aux["c"][1][0])]
    out = cur.merge(accept, _state(2))
    for name in ("x", "log_prob", "grad"):
        assert torch.equal(getattr(out, name), getattr(ref, name)), name
    assert torch.equal(out.aux["c"][1][0], ref.aux["c"][1][0])
    after = (cur.x, cur.log_prob, cur.grad, cur.aux["c"][1][0])
    assert all(torch.equal(a, b) for a, b in zip(before, after))


def test_merge_falls_back_where_rows_cannot_be_written():
    cur, prop = _state(0), _state(2)
    prop = prop.replace(grad=torch.randn(1, 6).expand(10, 6), aux=prop.aux)  # shared rows
    accept = torch.rand(10, generator=torch.Generator().manual_seed(1)) < 0.8
    ref = cur.select(accept, prop)
    out = cur.merge(accept, prop)
    assert torch.equal(out.grad, ref.grad) and torch.equal(out.x, ref.x)
