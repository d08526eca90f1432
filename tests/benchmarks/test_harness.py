"""benchmarks/harness.py: statistics, rotation and per-round ratios on a mocked clock."""

import json
import math

import numpy as np
import pytest

from benchmarks.harness import (
    fmt_iqr,
    interleave,
    percentile,
    rotation,
    summarize,
    write_report,
)


class FakeMachine:
    """Ops advance a fake wall clock and CPU clock by known costs. The load factor (wall /
    CPU) changes every round, as on a busy machine, and never within one."""

    def __init__(self, cpu_cost: dict[str, float], calls_per_round: int, loads):
        self.wall = self.cpu = 0.0
        self.cpu_cost, self.calls_per_round, self.loads = cpu_cost, calls_per_round, loads
        self.calls: list[str] = []

    def op(self, name):
        def run():
            load = self.loads[(len(self.calls) // self.calls_per_round) % len(self.loads)]
            self.calls.append(name)
            self.cpu += self.cpu_cost[name]
            self.wall += self.cpu_cost[name] * load

        return run


def test_percentile_and_summary_match_numpy():
    rng = np.random.default_rng(0)
    for n in (1, 2, 7, 50):
        xs = rng.exponential(size=n).tolist()
        for q in (0, 25, 50, 75, 100):
            assert percentile(xs, q) == pytest.approx(np.percentile(xs, q))
    s = summarize([4.0, 1.0, 3.0, 2.0])
    assert (s["median"], s["p25"], s["p75"], s["min"], s["n"]) == (2.5, 1.75, 3.25, 1.0, 4)
    assert math.isnan(percentile([], 50))
    assert fmt_iqr(s, scale=10, digits=1) == "25.0 [17.5, 32.5]"


def test_rotation_puts_every_op_in_every_position():
    names = ["a", "b", "c", "d"]
    orders = [rotation(names, r) for r in range(4)]
    assert orders[0] == names and orders[1] == ["b", "c", "d", "a"]
    for pos in range(4):
        assert sorted(o[pos] for o in orders) == names
    assert rotation(names, 5) == orders[1]


def test_interleave_runs_ops_in_rotated_order_and_records_it():
    m = FakeMachine({"a": 1.0, "b": 1.0, "c": 1.0}, 3, [1.0])
    res = interleave(
        {n: m.op(n) for n in "abc"}, {}, rounds=6, warmup=2, reps=1,
        wall_clock=lambda: m.wall, cpu_clock=lambda: m.cpu,
    )  # fmt: skip
    assert res.order == [rotation(list("abc"), r + 2) for r in range(6)]
    timed_calls = m.calls[2 * 3 :]
    assert timed_calls == [n for seq in res.order for n in seq]
    firsts = [seq[0] for seq in res.order]
    assert {n: firsts.count(n) for n in "abc"} == {"a": 2, "b": 2, "c": 2}


def test_ratios_are_per_round_and_cancel_a_changing_load():
    # CPU costs 3 : 1 : 0.5; wall = CPU x a load that changes from round to round
    loads = [1.0, 4.0, 1.5, 2.0, 7.0]
    m = FakeMachine({"step": 3.0, "ref": 1.0, "fwd": 0.5}, 3, loads)
    res = interleave(
        {n: m.op(n) for n in ("step", "ref", "fwd")},
        {"step / ref": ("step", "ref"), "fwd / ref": ("fwd", "ref")},
        rounds=40, warmup=1, reps=1, wall_clock=lambda: m.wall, cpu_clock=lambda: m.cpu,
    )  # fmt: skip
    s = res.summary()
    for clock in ("wall", "cpu"):
        r = s["ratios"]["step / ref"][clock]
        assert r["median"] == pytest.approx(3.0) and r["p25"] == pytest.approx(3.0)
        assert r["p75"] == pytest.approx(3.0)
        assert s["ratios"]["fwd / ref"][clock]["median"] == pytest.approx(0.5)
    assert s["ratios"]["step / ref"]["of"] == ["step", "ref"]
    # the op times themselves spread with the load (wall), not the CPU time
    assert s["ops"]["step"]["cpu"]["p25"] == s["ops"]["step"]["cpu"]["p75"] == 3.0
    assert s["ops"]["step"]["wall"]["p75"] > s["ops"]["step"]["wall"]["p25"]
    assert len(res.raw()["ratios"]["step / ref"]["wall"]) == 40


def test_reps_calibrated_from_warmup_and_times_are_per_call():
    m = FakeMachine({"fast": 0.001, "slow": 0.02}, 2, [1.0])
    syncs = []
    res = interleave(
        {"fast": m.op("fast"), "slow": m.op("slow")}, {"r": ("slow", "fast")},
        rounds=3, warmup=2, target_s=0.005, sync=lambda: syncs.append(1),
        wall_clock=lambda: m.wall, cpu_clock=lambda: m.cpu,
    )  # fmt: skip
    assert res.reps == {"fast": 5, "slow": 1}
    assert m.calls.count("fast") == 2 + 3 * 5 and m.calls.count("slow") == 2 + 3
    assert res.times["fast"]["cpu"] == pytest.approx([0.001] * 3)
    assert res.summary()["ratios"]["r"]["cpu"]["median"] == pytest.approx(20.0)
    assert len(syncs) == 2 * 2 + 2 * 3  # once per timed op call group, warm-up included


def test_interleave_rejects_bad_arguments():
    ops = {"a": lambda: None}
    with pytest.raises(ValueError, match="must name two"):
        interleave(ops, {"r": ("a", "missing")}, rounds=1)
    with pytest.raises(ValueError, match="no ops"):
        interleave({}, {}, rounds=1)
    with pytest.raises(ValueError, match="rounds"):
        interleave(ops, {}, rounds=0)


def test_write_report(tmp_path):
    md, js = write_report(tmp_path / "sub" / "x_run1", "# t\n", {"a": [1.5]})
    assert md.read_text() == "# t\n" and json.loads(js.read_text()) == {"a": [1.5]}
    assert js.name == "x_run1.json"
