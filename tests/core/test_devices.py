"""Device-correctness (issue 42 item 1): whatever a run restores (checkpoint, chains, buffers,
traces, generator state, another run's states) comes back on the run's device, and every
draw uses a generator on the device of the tensor it fills.

No GPU here: a "foreign" device is simulated with ``torch.device("meta")`` (tensors without
data that ``.to`` can target), and the load path is checked by recording ``map_location``.
``make gpu-check`` (scripts/gpu_check.py) runs the real GPU-to-CPU and CPU-to-GPU resumes.
"""

from __future__ import annotations

import ast
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from omegaconf import OmegaConf

from ebmlab.core.context import RunContext
from ebmlab.core.loop import Cadence, LoopTask
from ebmlab.core.state import RESTORED, ChainState
from ebmlab.utils.logging import MetricLogger
from ebmlab.utils.seeding import restore_generator
from ebmlab.utils.workspace import Workspace
from tests.helpers import run_toy

REPO = Path(__file__).resolve().parents[2]
META = torch.device("meta")


class Walk(LoopTask):
    """x += N(0, 1) per step from the run's generator; checkpoints every 5 steps."""

    def __init__(self, crash_at=None):
        self.cad, self.crash_at = Cadence(12, 4, 5), crash_at

    def build(self, ctx):
        return {"x": torch.zeros(3, device=ctx.device)}

    def step(self, parts, step, ctx):
        if step == self.crash_at:
            raise KeyboardInterrupt
        draw = torch.randn(3, generator=ctx.generator, device=ctx.device)
        parts["x"] = parts["x"] + draw
        return {}

    def evaluate(self, parts, step, ctx):
        return {}

    def state_dict(self, parts):
        return {"x": parts["x"]}

    def load_state_dict(self, parts, d):
        parts["x"] = d["x"].to(ctx_device(parts))

    def finish(self, parts, history, ctx):
        return {f"x{i}": float(v) for i, v in enumerate(parts["x"])}


def ctx_device(parts):
    return parts["x"].device


def make_ctx(run_dir: Path, device: torch.device | None = None) -> RunContext:
    return RunContext(
        cfg=OmegaConf.create({"seed": 0, "progress": False}),
        run_dir=run_dir,
        device=device or torch.device("cpu"),
        generator=torch.Generator().manual_seed(0),
        logger=MetricLogger(run_dir, None, {}, "t"),
        workspace=Workspace(run_dir),
        scale="smoke",
        choices={},
    )


# ---- the load path -------------------------------------------------------------------------


def test_a_resume_loads_the_checkpoint_onto_the_runs_device(tmp_path, monkeypatch):
    """The loop asks for the run's device (a GPU run loading to the CPU crashed at its first
    step after every resume, preemption and requeue)."""
    with pytest.raises(KeyboardInterrupt):
        run_toy(Walk(crash_at=7), make_ctx(tmp_path))
    seen = []

    class Stop(BaseException):  # not an Exception: the workspace would call it corruption
        pass

    def recording_load(*args, **kwargs):
        seen.append(kwargs.get("map_location"))
        raise Stop  # stop here: meta tensors hold no generator state to restore

    monkeypatch.setattr(torch, "load", recording_load)
    with pytest.raises(Stop):
        make_ctx(tmp_path, device=META).load_checkpoint()
    assert seen and all(torch.device(m) == META for m in seen), seen


def test_finish_time_checkpoints_are_loaded_onto_the_runs_device(tmp_path, monkeypatch):
    """best.pt / test_ais.pt read in ``finish`` go through the same device-aware load."""
    ctx = make_ctx(tmp_path, device=META)
    ctx.workspace.save({"ll": 1.0}, "test_ais")
    seen = []
    real = torch.load

    def recording_load(*args, **kwargs):
        seen.append(kwargs.get("map_location"))
        return real(*args, **{**kwargs, "map_location": "cpu"})

    monkeypatch.setattr(torch, "load", recording_load)
    assert ctx.load_file("test_ais") == {"ll": 1.0}
    assert [torch.device(m) for m in seen] == [META]


# ---- what is restored goes where the run's tensors live ------------------------------------


def _chains(device) -> ChainState:
    z = torch.zeros(4, 3, device=device)
    return ChainState(x=z, log_prob=torch.zeros(4, device=device), grad=z.clone())


def test_restored_chain_state_is_on_the_states_device():
    """A checkpoint's chains (and the model's flip cache) loaded on another device go to the
    device of the state they replace (the CPU tensors met a CUDA model in ``flip_cache``)."""
    saved = {
        "x": torch.ones(4, 3),
        "log_prob": torch.ones(4),
        "grad": torch.ones(4, 3),
        "flip_cache": (torch.ones(4, 3), torch.ones(4)),
    }
    r = _chains(META).restored(saved)
    assert r.x.device == r.log_prob.device == r.grad.device == META
    tag, cache = r.aux["flip"]
    assert tag == RESTORED and all(t.device == META for t in cache)
    assert _chains(META).restored({**saved, "grad": None, "flip_cache": None}).grad is None
    back = _chains("cpu").restored(saved)  # same device: the values themselves
    assert torch.equal(back.x, saved["x"]) and back.aux["flip"][1][1].device.type == "cpu"


def _bare(cls):
    return object.__new__(cls)  # load_state_dict reads only the parts and the dict


def test_tasks_put_restored_traces_and_buffers_on_their_device():
    """Traces, running sums, histograms and ESS summaries restored from a checkpoint go to the
    device of the tensors the task built (not wherever the checkpoint was loaded)."""
    from ebmlab.core.chain import ChainRunner
    from ebmlab.tasks.chains import Chains
    from ebmlab.tasks.ising_sampling import IsingSampling
    from ebmlab.tasks.multimodal_2d import Multimodal2D
    from ebmlab.tasks.rbm_sampling import RBMSampling
    from ebmlab.tasks.sampler_ess import SamplerESS

    nothing = SimpleNamespace(load_state_dict=lambda d: None)
    chain = {"x": torch.ones(4, 3), "log_prob": torch.ones(4), "grad": torch.ones(4, 3)}

    def chains():  # a sampling task's chains: a kernel's runner with its chains on META
        runner = _bare(ChainRunner)  # (no META generator to build one with)
        runner.state, runner.adaptation, runner._kernel = _chains(META), None, nothing
        return Chains(runner)

    saved = {"runner": {"steps": 3, "chain": chain, "adaptation": None, "frozen": True,
                        "kernel": {}}, "tune": [0, 0.0]}  # fmt: skip
    p = SimpleNamespace(
        chains=chains(),
        running=torch.zeros(3, device=META),
        trace=torch.zeros(5, 4, 3, device=META),
    )
    d = {"chains": saved, "running": torch.ones(3), "trace": torch.ones(5, 4, 3)}
    _bare(IsingSampling).load_state_dict(p, d)
    assert {p.chains.x.device, p.running.device, p.trace.device} == {META}

    runner = _bare(ChainRunner)  # a kernel's runner: chains on META (no META generator)
    runner.state, runner.adaptation, runner._kernel, runner.steps = _chains(META), None, nothing, 0
    p = SimpleNamespace(runner=runner, sampler=nothing, tuner=None, burn_seconds=None,
                        summary=torch.zeros(5, 4, device=META))  # fmt: skip
    d = {**chain, "sampler": {}, "tuner": None, "summary": torch.ones(5, 4), "burn_seconds": 1.0}
    _bare(SamplerESS).load_state_dict(p, d)
    assert {p.runner.state.x.device, p.summary.device} == {META}

    p = SimpleNamespace(chains=chains(), trace=torch.zeros(2, device=META), info={})
    _bare(RBMSampling).load_state_dict(p, {"chains": saved, "trace": torch.ones(2), "info": {}})
    assert {p.chains.x.device, p.trace.device} == {META}

    p = SimpleNamespace(chains=chains(), visits=torch.zeros(9, device=META))
    _bare(Multimodal2D).load_state_dict(p, {"chains": saved, "visits": torch.ones(9)})
    assert {p.chains.x.device, p.visits.device} == {META}


def test_pcd_buffer_is_restored_on_the_learners_device():
    """The PCD buffer comes back where ``setup`` put it (graph generation's buffer
    re-initialisation drew on a CPU buffer with the run's CUDA generator after a resume)."""
    from tests.helpers import from_conf

    model = from_conf("model/ising", dim=4)
    sampler = from_conf("sampler/gibbs")
    learner = from_conf("learner/pcd", buffer_size=4, batch_size=4, sampler_steps=1)
    learner.setup(model, torch.zeros(6, 4), torch.Generator().manual_seed(0), sampler)
    saved = learner.state_dict()
    learner.buffer = torch.zeros(4, 4, device=META)  # as if set up on another device
    learner.load_state_dict(saved)
    assert learner.buffer.device == META


# ---- generator states ----------------------------------------------------------------------


def test_a_generator_state_comes_back_exactly_from_any_device_it_was_loaded_to():
    g = torch.Generator().manual_seed(3)
    state = g.get_state()
    want = torch.rand(5, generator=g)
    h = torch.Generator()
    assert restore_generator(h, state.clone())
    assert torch.equal(torch.rand(5, generator=h), want)


def test_another_kind_of_generator_state_reseeds_reproducibly():
    """A CUDA (Philox, 16 bytes) state cannot drive a CPU generator: the run continues from a
    generator seeded from that state, the same for every resume of the same checkpoint."""
    cuda_like = torch.arange(16, dtype=torch.uint8)
    a, b = torch.Generator(), torch.Generator()
    assert not restore_generator(a, cuda_like) and not restore_generator(b, cuda_like)
    assert torch.equal(torch.rand(5, generator=a), torch.rand(5, generator=b))
    c = torch.Generator()
    restore_generator(c, cuda_like + 1)
    assert not torch.equal(torch.rand(5, generator=c), torch.rand(5, generator=a))


def test_a_checkpoint_from_another_kind_of_device_resumes_with_one_line(tmp_path, capsys):
    """A checkpoint whose generator state is a GPU's resumes on this CPU: one line says the
    draws differ from the first device's, and two resumes of it give the same numbers."""
    d = tmp_path / "gpu_run"
    with pytest.raises(KeyboardInterrupt):
        run_toy(Walk(crash_at=7), make_ctx(d))
    ws = Workspace(d)
    state = ws.load()
    state["_run"]["generator"], state["_run"]["device"] = (
        torch.arange(16, dtype=torch.uint8),
        "cuda",
    )
    ws.save(state)
    shutil.copytree(d, tmp_path / "again")
    capsys.readouterr()
    first = run_toy(Walk(), make_ctx(d))
    assert "resuming on cpu a checkpoint written on cuda" in capsys.readouterr().err
    assert run_toy(Walk(), make_ctx(tmp_path / "again")) == first


# ---- static scans: every load names a device, every draw a device ---------------------------

# A tensor factory with a generator but no device= draws on the CPU: allowed only where the
# generator is a CPU one by contract (data generation and fixed initialisations seeded from
# the config, drawn on the CPU so that they are the same on every machine).
CPU_GENERATOR_DRAWS = {
    ("ebmlab/data/binary_images.py", "batches"),  # dataset splits live on the CPU
    ("ebmlab/data/binary_images.py", "split"),
    ("ebmlab/data/gmm_toy.py", "gmm_toy"),
    ("ebmlab/data/grayscale_images.py", "load"),
    ("ebmlab/data/grayscale_images.py", "_read_celeba"),
    ("ebmlab/data/ising_data.py", "gibbs_ising_chains"),
    ("ebmlab/data/synthetic_2d.py", "_rand"),
    ("ebmlab/data/synthetic_2d.py", "_randn"),
    ("ebmlab/data/synthetic_2d.py", "_shuffle"),
    ("ebmlab/data/synthetic_2d.py", "_8gaussians"),
    ("ebmlab/data/synthetic_2d.py", "_checkerboard"),
    ("ebmlab/metrics/feature_net.py", "reset_parameters"),  # FID classifier: CPU generator
    ("ebmlab/metrics/feature_net.py", "train_feature_net"),
    ("ebmlab/metrics/image_fid.py", "image_fid"),
    ("ebmlab/models/ab_targets.py", "_orthogonal"),  # targets built from their own seed
    ("ebmlab/models/ab_targets.py", "__init__"),
    ("ebmlab/models/grbm.py", "reset_parameters"),
    ("ebmlab/models/rbm.py", "__init__"),
    ("ebmlab/samplers/ab/sdp.py", "_trace_bm"),
}
CPU_MODULES = {"ebmlab/testing.py"}  # exactness-test helpers: enumerations on the CPU
FACTORIES = {"rand", "randn", "randint", "randperm", "empty", "zeros", "ones", "full"}


def _calls(tree):
    """(enclosing function, call) for every call in ``tree``."""

    def walk(node, func):
        for child in ast.iter_child_nodes(node):
            inner = child.name if isinstance(child, ast.FunctionDef) else func
            if isinstance(child, ast.Call):
                yield func, child
            yield from walk(child, inner)

    yield from walk(tree, "<module>")


def _sources():
    for f in sorted((REPO / "ebmlab").rglob("*.py")):
        yield f.relative_to(REPO).as_posix(), ast.parse(f.read_text())


def test_every_torch_load_in_ebmlab_names_where_tensors_go():
    """A file written on a GPU and read without ``map_location`` fails on a CPU-only machine."""
    missing = [
        f"{path}:{call.lineno}"
        for path, tree in _sources()
        for _, call in _calls(tree)
        if ast.unparse(call.func) == "torch.load"
        and "map_location" not in {k.arg for k in call.keywords}
    ]
    assert missing == []


def test_every_draw_from_a_generator_names_its_device():
    """``torch.rand(..., generator=g)`` without ``device=`` draws on the CPU, which fails for
    the run's CUDA generator; only the CPU-generator sites listed above may leave it out."""
    found = set()
    for path, tree in _sources():
        for func, call in _calls(tree):
            name = ast.unparse(call.func)
            kws = {k.arg for k in call.keywords}
            factory = name.split(".")[-1] in FACTORIES
            if factory and "generator" in kws and "device" not in kws and path not in CPU_MODULES:
                found.add((path, func))
    assert found - CPU_GENERATOR_DRAWS == set(), "draws that need device="
    assert CPU_GENERATOR_DRAWS - found == set(), "stale entries: remove them from the list"


# Tensors a task or learner creates without device= live on the CPU: allowed only for
# host-side bookkeeping (the list below); everything a step touches is made on the device.
HOST_TENSORS = {
    ("ebmlab/learning/acs_schedule.py", "retune"),  # mean / std of a list of floats
    ("ebmlab/learning/ratio_matching_exact.py", "inclusion_probabilities"),  # CPU analysis tool
    ("ebmlab/learning/ratio_matching_exact.py", "expected_surrogate"),
    ("ebmlab/learning/ratio_matching_exact.py", "grad"),
}
CREATORS = {"zeros", "ones", "full", "empty", "arange", "eye", "linspace", "tensor", "as_tensor"}


def test_tasks_and_learners_create_tensors_on_the_device():
    found = set()
    for path, tree in _sources():
        if not path.startswith(("ebmlab/tasks/", "ebmlab/learning/")):
            continue
        for func, call in _calls(tree):
            name = ast.unparse(call.func)
            if name.startswith("torch.") and name.split(".")[-1] in CREATORS:
                if "device" not in {k.arg for k in call.keywords}:
                    found.add((path, func))
    assert found - HOST_TENSORS == set(), "tensors that need device="
    assert HOST_TENSORS - found == set(), "stale entries: remove them from the list"
