"""Eager and CUDA-graphed sampler steps side by side (issue 46), for the benchmarks and
``make gpu-check``.

A graphed step is timed as a block of :data:`BLOCK` steps replayed through the chain runner
(``ChainRunner.run`` with :class:`~ebmlab.core.graphs.GraphedSteps`), divided by BLOCK; a
graphed forward+backward is ``value_and_grad`` captured the same way. On a CPU there is no
graph to time: :func:`backend_for` returns None and the benchmarks print :func:`skip_line`.
``--graphs stand-in`` runs the machinery with the CPU stand-in (tests; its times mean nothing).

:func:`identity_check` is the eager-vs-graphed check: for each sampler and model, chains,
caches, block sums and the generator after several blocks, eager and graphed, must be equal.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from ebmlab.core import graphs
from ebmlab.core.chain import ChainRunner
from ebmlab.samplers.base import value_and_grad

BLOCK = 10  # steps per graphed call in the timings
GRAPH = " [graph]"  # suffix of a graphed op; its times are per step (a block / BLOCK)
FWD_BWD_GRAPH = "fwd+bwd" + GRAPH  # one captured forward+backward (not a block)
CHOICES = ("auto", "off", "stand-in")
RUN_STEPS = 10_000  # the run length an adaptation plans with (benchmarks run fixed kernels)


def backend_for(device: torch.device, choice: str) -> graphs.CaptureBackend | None:
    """The capture backend a benchmark uses: CUDA graphs on CUDA (``auto``), the CPU
    stand-in when asked (``stand-in``), else None (no graphed column)."""
    if choice not in CHOICES:
        raise ValueError(f"--graphs must be one of {CHOICES} (got {choice!r})")
    if choice == "stand-in":
        return graphs.StandInBackend()
    if choice == "auto" and torch.device(device).type == "cuda":
        return graphs.CudaGraphBackend(torch.device(device))
    return None


def skip_line(device: torch.device, choice: str) -> str:
    why = "--graphs off" if choice == "off" else f"CUDA graphs need a GPU, this run is on {device}"
    return f"Graphed steps: skipped ({why}); eager steps only."


def graphed_steps(model, sampler, x0, generator, backend) -> tuple[Callable[[], object], object]:
    """(op, runner): ``op()`` runs :data:`BLOCK` graphed steps of ``sampler`` (an adaptation
    is frozen first); warmed up, captured and replayed once before it is returned."""
    capture = graphs.GraphedSteps(backend)
    state = _init(sampler, model, x0)
    runner = ChainRunner(model, sampler, state, generator, run_steps=RUN_STEPS, capture=capture)
    runner.warm_up()
    for _ in range(3):  # eager (warm-up), eager (steady structure), capture + replay
        runner.run(BLOCK)
    return (lambda: runner.run(BLOCK)), runner


def graphed_fwd_bwd(model, x, backend, generator) -> Callable[[], object]:
    """One forward+backward at a fixed batch, captured (the reference a graphed step is
    compared with: the issue's goal is a step within 1.3x of it)."""
    static = x.clone()

    def fn():
        return value_and_grad(model, static)

    backend.warm(fn)
    graph, _ = backend.capture(fn, generator)
    graph.replay()
    return graph.replay


def _scaled(stats: dict, f: float) -> dict:
    return {k: (v * f if k in ("median", "p25", "p75", "min") else v) for k, v in stats.items()}


def _is_block(op: str) -> bool:
    return op.endswith(GRAPH) and op != FWD_BWD_GRAPH


def per_step(summary: dict) -> dict:
    """A graphed step op times a block of BLOCK steps: its times, and the ratios it enters,
    per step (each per-round ratio is scaled, so medians and quartiles stay exact)."""
    for op, s in summary["ops"].items():
        if _is_block(op):
            for c in ("wall", "cpu"):
                s[c] = _scaled(s[c], 1.0 / BLOCK)
    for r in summary["ratios"].values():
        num, den = r["of"]
        f = (1.0 / BLOCK if _is_block(num) else 1.0) * (BLOCK if _is_block(den) else 1.0)
        for c in ("wall", "cpu"):
            r[c] = _scaled(r[c], f)
    return summary


def stand_in_note(backend) -> str:
    if isinstance(backend, graphs.StandInBackend):
        return (
            " **Stand-in backend (CPU)**: the graphed times measure its tracer, not a graph; "
            "they only show that the machinery runs."
        )
    return ""


def _init(sampler, model, x0):
    return sampler.init(model, x0)


def identity_check(
    cases: dict[str, Callable[[], tuple]],
    backend_factory: Callable[[], graphs.CaptureBackend],
    blocks: int = 5,
    block: int = BLOCK,
) -> list[dict]:
    """For each case ``name -> () -> (model, sampler, x0, generator)`` (called twice: the
    same seed for the eager and the graphed chain), ``blocks`` blocks of ``block`` steps
    eager and graphed. One row per case: ``same`` when chains, log-probabilities, gradients,
    block sums and the generator's state are equal, with what differed otherwise."""
    rows = []
    for name, make in cases.items():
        runs = {}
        for label, capture in (
            ("eager", None),
            ("graphed", graphs.GraphedSteps(backend_factory())),
        ):
            model, sampler, x0, gen = make()
            state = _init(sampler, model, x0)
            runner = ChainRunner(model, sampler, state, gen, run_steps=RUN_STEPS, capture=capture)
            runner.warm_up()
            sums = [runner.run(block) for _ in range(blocks)]
            runs[label] = (runner, sums, capture)
        (a, sa, _), (b, sb, cap) = runs["eager"], runs["graphed"]
        diffs = []
        for what in ("x", "log_prob", "grad"):
            u, v = getattr(a.state, what), getattr(b.state, what)
            if (u is None) != (v is None) or (u is not None and not torch.equal(u, v)):
                diffs.append(what)
        for i, (s, t) in enumerate(zip(sa, sb)):
            for k in s:
                same = torch.equal(s[k], t[k]) if isinstance(s[k], torch.Tensor) else s[k] == t[k]
                if not same:
                    diffs.append(f"block {i + 1} {k}")
        if not torch.equal(a.generator.get_state(), b.generator.get_state()):
            diffs.append("generator state")
        replays = getattr(cap.backend, "replays", None)
        rows.append(
            {
                "case": name,
                "same": not diffs,
                "differs": diffs[:5],
                "captures": cap.captures,
                "replays": replays,
                "steps": blocks * block,
            }
        )
    return rows


def identity_markdown(rows: list[dict], backend: str) -> str:
    lines = [
        f"Eager vs graphed ({backend}): chains, log-probabilities, gradients, block sums and "
        "the generator after the same steps from the same seed.\n",
        "| case | steps | captures | outcome |",
        "|---|---|---|---|",
    ]
    for r in rows:
        out = "identical" if r["same"] else "DIFFERS: " + ", ".join(r["differs"])
        lines.append(f"| {r['case']} | {r['steps']} | {r['captures']} | {out} |")
    return "\n".join(lines) + "\n"
