"""Interleaved timing for benchmarks that report cost RATIOS (issue 15).

Timing each operation once, one after the other, lets a change of machine load between them
show up as a ratio (on a busy 2-core machine a sampler step came out at 0.04 forward+backward
passes). Here every round runs each compared operation once (``reps`` calls), in an order
rotated by one position per round so that no operation always runs first, and records per
call both the wall time (``time.perf_counter``) and the CPU time of the timing thread
(``time.thread_time``; pass ``time.process_time`` when torch uses several threads, whose
work the timing thread's clock does not see). A ratio A / B is computed within each round
and summarised over rounds by its median and quartiles, so load that changes slowly compared
with a round cancels and bursts only move the tails. CPU time does not count the time the
thread waits for a core, which makes it the stable measure on a loaded machine at one thread;
on a GPU only wall time (after ``torch.cuda.synchronize``) means anything.

    from benchmarks.harness import interleave, machine_info
    res = interleave({"fwd": f, "step": g}, {"step / fwd": ("step", "fwd")}, rounds=100)
    res.summary()  # {"ops": {...}, "ratios": {"step / fwd": {"wall": {...}, "cpu": {...}}}}
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

CLOCKS = ("wall", "cpu")


def percentile(xs: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) of ``xs`` by linear interpolation between order
    statistics (numpy's default); nan for an empty sequence."""
    s = sorted(float(x) for x in xs)
    if not s:
        return math.nan
    pos = (len(s) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def summarize(xs: Sequence[float]) -> dict:
    """Median, 25th / 75th percentiles, min and count of ``xs``."""
    return {
        "median": percentile(xs, 50),
        "p25": percentile(xs, 25),
        "p75": percentile(xs, 75),
        "min": min(xs) if len(xs) else math.nan,
        "n": len(xs),
    }


def rotation(names: Sequence[str], round_index: int) -> list[str]:
    """The order of round ``round_index``: ``names`` rotated left by ``round_index`` places,
    so over any len(names) consecutive rounds each name runs once in every position."""
    k = round_index % len(names)
    return list(names[k:]) + list(names[:k])


def cuda_sync(device) -> Callable[[], None] | None:
    """A function that waits for ``device``'s queued kernels (None off CUDA)."""
    import torch

    device = torch.device(device)
    if device.type != "cuda":
        return None
    return lambda: torch.cuda.synchronize(device)


def clocks_for(device) -> tuple[str, Callable[[], float]]:
    """(primary clock, CPU clock) for a run on ``device`` with torch's current threads.

    At one thread all of torch's CPU work runs on the timing thread, so its CPU time
    (``time.thread_time``) is the primary measure (immune to waiting for a core on a loaded
    machine). With several threads the CPU clock is the whole process's
    (``time.process_time``, which also counts idle threads spinning), and on a GPU the CPU
    clock says nothing about kernel time: wall time is primary there.
    """
    import torch

    one = torch.get_num_threads() == 1
    cpu = time.thread_time if one else time.process_time
    return ("cpu" if one and torch.device(device).type == "cpu" else "wall"), cpu


@dataclass
class Interleaved:
    """Per-round, per-call times of each op (seconds) and the per-round ratios."""

    order: list[list[str]]
    reps: dict[str, int]
    times: dict[str, dict[str, list[float]]]  # op -> clock -> [round]
    ratio_pairs: dict[str, tuple[str, str]]
    ratios: dict[str, dict[str, list[float]]] = field(default_factory=dict)

    def __post_init__(self):
        for name, (num, den) in self.ratio_pairs.items():
            a, b = self.times[num], self.times[den]
            self.ratios[name] = {
                c: [x / y if y > 0 else math.nan for x, y in zip(a[c], b[c])] for c in CLOCKS
            }

    def summary(self) -> dict:
        """Median / quartiles of each op's per-call time and of each per-round ratio."""
        return {
            "ops": {
                op: {"reps": self.reps[op], **{c: summarize(t[c]) for c in CLOCKS}}
                for op, t in self.times.items()
            },
            "ratios": {
                name: {"of": list(self.ratio_pairs[name]), **{c: summarize(r[c]) for c in CLOCKS}}
                for name, r in self.ratios.items()
            },
        }

    def raw(self) -> dict:
        """Every per-round number (for the JSON record)."""
        return {"order": self.order, "times": self.times, "ratios": self.ratios}


def _timed(fn, reps, sync, wall_clock, cpu_clock) -> tuple[float, float]:
    w0, c0 = wall_clock(), cpu_clock()
    for _ in range(reps):
        fn()
    if sync is not None:
        sync()
    return (wall_clock() - w0) / reps, (cpu_clock() - c0) / reps


def interleave(
    ops: dict[str, Callable[[], object]],
    ratios: dict[str, tuple[str, str]],
    rounds: int = 100,
    warmup: int = 3,
    reps: int | dict[str, int] | None = None,
    target_s: float = 0.005,
    max_reps: int = 50,
    sync: Callable[[], None] | None = None,
    wall_clock: Callable[[], float] = time.perf_counter,
    cpu_clock: Callable[[], float] = time.thread_time,
) -> Interleaved:
    """Time ``ops`` interleaved over ``rounds`` rotated rounds; ``ratios`` names -> (A, B).

    ``warmup`` unrecorded rotated rounds come first (one call per op each, which also
    compiles / allocates / fills caches). ``reps`` calls per op per round: an int for all,
    a dict per op, or None to choose per op the fewest calls whose warm-up wall time reaches
    ``target_s`` (at most ``max_reps``), so that short ops are not below the clocks'
    resolution. ``sync`` runs after each op's calls inside its timed window (CUDA).
    """
    names = list(ops)
    if not names:
        raise ValueError("no ops to time")
    for name, pair in ratios.items():
        if len(pair) != 2 or any(p not in ops for p in pair):
            raise ValueError(f"ratio {name!r}: {pair!r} must name two of the ops {names}")
    if rounds < 1 or warmup < 0:
        raise ValueError(f"rounds must be >= 1 and warmup >= 0 (got {rounds}, {warmup})")
    warm: dict[str, float] = {n: math.inf for n in names}
    for r in range(warmup):
        for n in rotation(names, r):
            w, _ = _timed(ops[n], 1, sync, wall_clock, cpu_clock)
            warm[n] = min(warm[n], w)
    if isinstance(reps, int):
        n_reps = dict.fromkeys(names, reps)
    elif isinstance(reps, dict):
        n_reps = {n: int(reps[n]) for n in names}
    else:
        n_reps = {
            n: 1 if not warm[n] > 0 else max(1, min(max_reps, math.ceil(target_s / warm[n])))
            for n in names
        }
    times = {n: {c: [] for c in CLOCKS} for n in names}
    order = []
    for r in range(rounds):
        seq = rotation(names, r + warmup)
        order.append(seq)
        for n in seq:
            w, c = _timed(ops[n], n_reps[n], sync, wall_clock, cpu_clock)
            times[n]["wall"].append(w)
            times[n]["cpu"].append(c)
    return Interleaved(order=order, reps=n_reps, times=times, ratio_pairs=dict(ratios))


def fmt_iqr(s: dict, scale: float = 1.0, digits: int = 2) -> str:
    """'median [p25, p75]' of a :func:`summarize` dict, times ``scale``."""
    f = f"{{:.{digits}f}}"
    return (
        f"{f.format(s['median'] * scale)} "
        f"[{f.format(s['p25'] * scale)}, {f.format(s['p75'] * scale)}]"
    )


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _git(cwd: str | None, *args: str) -> str | None:
    if cwd is None:
        return None
    try:
        out = subprocess.run(
            ["git", *args], capture_output=True, text=True, timeout=10, check=True, cwd=cwd
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip()


def source_digest(path: str | Path | None) -> str | None:
    """SHA-256 (first 12 hex digits) of every .py file under ``path``, to tell code versions
    apart in the records (the working tree may differ from any commit)."""
    if path is None:
        return None
    h = hashlib.sha256()
    for f in sorted(Path(path).rglob("*.py")):
        h.update(str(f.relative_to(path)).encode())
        h.update(f.read_bytes())
    return h.hexdigest()[:12]


def machine_info(device=None) -> dict:
    """Where and with what a benchmark ran: CPU / GPU, cores, threads, load, versions."""
    import torch

    dev = torch.device(device if device is not None else "cpu")
    try:
        affinity = len(os.sched_getaffinity(0))
    except AttributeError:
        affinity = os.cpu_count()
    try:
        import ebmlab

        ebmlab_path = str(Path(ebmlab.__file__).resolve().parent)
    except ImportError:
        ebmlab_path = None
    status = _git(ebmlab_path, "status", "--porcelain", "--", ".")
    return {
        "device": str(dev),
        "gpu": torch.cuda.get_device_name(dev) if dev.type == "cuda" else None,
        "cpu_model": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "cpu_affinity": affinity,
        "torch_threads": torch.get_num_threads(),
        "torch_interop_threads": torch.get_num_interop_threads(),
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS"),
        "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        "torch": torch.__version__,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "ebmlab_path": ebmlab_path,
        "git_commit": _git(ebmlab_path, "rev-parse", "HEAD"),
        "ebmlab_modified": None if status is None else bool(status),
        "ebmlab_source_sha": source_digest(ebmlab_path),
        # the code a sampler step runs: tells a sampler change from edits elsewhere
        "ebmlab_step_code_sha": {
            sub: source_digest(Path(ebmlab_path) / sub) if ebmlab_path else None
            for sub in ("core", "models", "samplers")
        },
        "time": time.strftime("%Y-%m-%d %H:%M:%S"),
    }


def describe(info: dict) -> str:
    """One markdown line of :func:`machine_info`."""
    hw = info["gpu"] or info["cpu_model"]
    load = info.get("load_average")
    load_s = "/".join(f"{x:.2f}" for x in load) if load else "n/a"
    return (
        f"device {info['device']} ({hw}), {info['cpu_count']} cores "
        f"({info['cpu_affinity']} usable), torch {info['torch']} with "
        f"{info['torch_threads']} threads, load average {load_s} (1/5/15 min) at start"
    )


def write_report(stem: str | Path, markdown: str, data: dict) -> tuple[Path, Path]:
    """Write ``<stem>.md`` and ``<stem>.json``; returns both paths."""
    stem = Path(stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    md, js = Path(f"{stem}.md"), Path(f"{stem}.json")
    md.write_text(markdown)
    js.write_text(json.dumps(data, indent=1, default=float) + "\n")
    return md, js
