"""CUDA-graph capture of blocks of sampler steps (issue 46), checked on the CPU stand-in.

The stand-in backend captures a block by running it once under a tracer and replays it by
running it again eagerly into the captured output buffers; it fails on a host read inside
the block and on a replay that would compute something else than the capture. So what is
tested here is the bookkeeping around the CUDA calls: static buffers, copy-in / copy-back,
the capture key, warm-up, generator handling, cadence boundaries and checkpoint/resume.
"""

from __future__ import annotations

import pytest
import torch
from omegaconf import OmegaConf

from ebmlab.core import graphs
from ebmlab.core.chain import ChainRunner
from ebmlab.core.state import ChainState, StepInfo
from ebmlab.errors import ConfigError
from ebmlab.models.rbm import BernoulliRBM
from ebmlab.samplers.ab.kernel import AB1stKernel
from tests.helpers import REPO, from_conf

D, CHAINS = 24, 16


def _rbm():
    m = BernoulliRBM(n_visible=D, n_hidden=10, init_std=0.5, init_seed=3)
    for p in m.parameters():
        p.requires_grad_(False)
    return m


def _ab_1st():
    node = OmegaConf.load(REPO / "conf" / "sampler" / "ab_1st.yaml")
    return AB1stKernel(sigma=node.sigma, alpha=node.alpha)


SAMPLERS = {
    "DMALA": lambda: from_conf("sampler/dmala"),
    "GWG-1": lambda: from_conf("sampler/gwg", n_flips=1),
    "ACS": lambda: from_conf("sampler/acs", tune=False),
    "AB-1st": _ab_1st,
}


def _runner(sampler, capture, seed=0, chains=CHAINS, dtype=torch.float32, model=None):
    model = model or _rbm()
    g = torch.Generator().manual_seed(seed)
    x0 = (torch.rand(chains, D, generator=g) < 0.5).to(dtype)
    kernel = sampler() if callable(sampler) else sampler
    init = kernel.init if hasattr(kernel, "init") else kernel.frozen().init
    return ChainRunner(model, kernel, init(model, x0), g, run_steps=100, capture=capture)


def _same(a, b):
    assert a.keys() == b.keys()
    for k in a:
        if isinstance(a[k], torch.Tensor):
            assert torch.equal(a[k], b[k]), k
        else:
            assert a[k] == b[k], k


def _blocks(runner, lengths):
    return [runner.run(n) for n in lengths]


@pytest.mark.parametrize("name", list(SAMPLERS))
def test_graphed_chains_equal_eager_chains(name):
    """DMALA, GWG-1, ACS and AB-1st: the same chains, caches and block sums graphed (stand-in:
    warm-up, capture, replays) as eager, and the replays really happen."""
    capture = graphs.GraphedSteps(graphs.StandInBackend())
    graphed, eager = _runner(SAMPLERS[name], capture), _runner(SAMPLERS[name], None)
    lengths = [20] * 6
    for a, b in zip(_blocks(graphed, lengths), _blocks(eager, lengths)):
        _same(a, b)
    assert torch.equal(graphed.state.x, eager.state.x)
    assert torch.equal(graphed.state.log_prob, eager.state.log_prob)
    assert torch.equal(graphed.state.grad, eager.state.grad)
    assert graphed.state.aux.keys() == eager.state.aux.keys()
    assert torch.equal(graphed.generator.get_state(), eager.generator.get_state())
    assert graphed.steps == eager.steps == 120
    assert capture.backend.captures == 1 and capture.backend.replays >= 3


def test_static_buffers_are_reused_and_never_returned():
    """Every replay reads the same static input tensors (copied into) and writes the same
    outputs; the state a block returns is a copy, which the next replay leaves alone."""
    capture = graphs.GraphedSteps(graphs.StandInBackend())
    r = _runner(SAMPLERS["DMALA"], capture)
    _blocks(r, [5, 5, 5])  # warm-up (structure of init), warm-up (steady), capture + replay
    (cap,) = capture.graphs.values()
    inputs, outputs = list(cap.inputs), list(cap.out_leaves)
    kept = r.state
    kept_x = kept.x.clone()
    r.run(5)
    (cap2,) = capture.graphs.values()
    assert cap2 is cap and all(a is b for a, b in zip(cap.inputs, inputs))
    assert all(a is b for a, b in zip(cap.out_leaves, outputs))
    assert torch.equal(kept.x, kept_x)  # the earlier result was not overwritten
    assert torch.equal(cap.inputs[0], kept_x)  # copied in before the replay
    ptrs = {t.untyped_storage().data_ptr() for t in (*inputs, *outputs)}
    new = r.state
    for t in (new.x, new.log_prob, new.grad):
        assert t.untyped_storage().data_ptr() not in ptrs
    assert torch.equal(new.x, cap.out_leaves[0])


def test_copy_back_continues_the_chain_after_a_replay():
    """A replayed block's state goes on eagerly exactly as an all-eager chain."""
    capture = graphs.GraphedSteps(graphs.StandInBackend())
    graphed, eager = _runner(SAMPLERS["GWG-1"], capture), _runner(SAMPLERS["GWG-1"], None)
    _blocks(graphed, [4, 4, 4, 4])
    graphed.capture = None  # the rest eagerly
    _blocks(graphed, [3])
    _blocks(eager, [4, 4, 4, 4, 3])
    assert torch.equal(graphed.state.x, eager.state.x)
    assert torch.equal(graphed.state.aux["flip"][1][0], eager.state.aux["flip"][1][0])


def test_recapture_on_shape_dtype_and_parameter_change_only():
    capture = graphs.GraphedSteps(graphs.StandInBackend())
    r = _runner(SAMPLERS["DMALA"], capture)
    _blocks(r, [6] * 8)
    assert capture.backend.captures == 1 and capture.backend.replays == 6  # steady: no more
    r.kernel.step_size = 0.1  # frozen parameters changed (e.g. a new adaptation result)
    _blocks(r, [6] * 3)
    assert capture.backend.captures == 2
    _blocks(r, [7] * 3)  # another block length
    assert capture.backend.captures == 3
    more = _runner(SAMPLERS["DMALA"], capture, chains=CHAINS + 4, model=r.model)  # batch shape
    _blocks(more, [6] * 3)
    assert capture.backend.captures == 4
    wide = _runner(SAMPLERS["DMALA"], capture, dtype=torch.float64, model=_rbm().double())
    _blocks(wide, [6] * 3)
    assert capture.backend.captures == 5
    before = capture.backend.captures
    _blocks(r, [7] * 4)  # an earlier key again: replayed, or re-captured once if dropped
    assert capture.backend.captures <= before + 1


def test_model_updated_in_place_replays_replaced_recaptures():
    """A graph reads the parameters where they are: updated in place (a PCD optimiser step)
    the same graph is replayed with the new values; replaced by a new tensor, a new capture."""
    capture = graphs.GraphedSteps(graphs.StandInBackend())
    graphed, eager = _runner(SAMPLERS["DMALA"], capture), _runner(SAMPLERS["DMALA"], None)
    for r in (graphed, eager):
        _blocks(r, [5] * 3)
        with torch.no_grad():
            r.model.W.mul_(0.5)
        _blocks(r, [5] * 2)
    assert capture.backend.captures == 1 and torch.equal(graphed.state.x, eager.state.x)
    graphed.model.W = torch.nn.Parameter(graphed.model.W.detach().clone(), requires_grad=False)
    _blocks(graphed, [5] * 3)
    assert capture.backend.captures == 2


def test_python_state_that_moves_is_replayed_with_its_advance():
    """ACS's cycle position moves every step: captured with capture_key / advance_captured,
    the schedule stays where an eager chain's would be; a kernel whose attributes move
    without saying how is run eagerly (never wrong)."""
    capture = graphs.GraphedSteps(graphs.StandInBackend())
    r = _runner(SAMPLERS["ACS"], capture)
    _blocks(r, [20] * 5)
    assert r.kernel.step_count == 100 and capture.backend.replays == 3

    class Counting:
        """DMALA that counts its steps in an attribute (no advance_captured)."""

        def __init__(self):
            self.inner, self.t = from_conf("sampler/dmala"), 0

        def init(self, model, x):
            return self.inner.init(model, x)

        def step(self, model, state, generator):
            self.t += 1
            return self.inner.step(model, state, generator)

    capture = graphs.GraphedSteps(graphs.StandInBackend())
    counting = Counting()
    r = _runner(counting, capture)
    eager = _runner(Counting(), None)
    _blocks(r, [5] * 6)
    _blocks(eager, [5] * 6)
    assert counting.t == 30 and capture.backend.replays == 0
    assert torch.equal(r.state.x, eager.state.x)


class _HostReading:
    """A kernel whose step reads a value on the host (``bool(...)``): not capturable."""

    state_spaces, exact = ("binary",), True

    def init(self, model, x):
        return ChainState(x=x, log_prob=x.sum(-1))

    def step(self, model, state, generator):
        flip = torch.rand(state.x.shape, generator=generator) < 0.1
        if bool(flip.any()):  # a host read
            state = ChainState(x=(state.x - flip.float()).abs(), log_prob=state.x.sum(-1))
        ones = torch.ones(state.x.shape[0])
        return state, StepInfo(ones, ones.bool(), ones, n_log_prob=0, n_grad=0)


def test_host_read_inside_a_captured_block_fails():
    capture = graphs.GraphedSteps(graphs.StandInBackend())
    r = _runner(_HostReading(), capture)
    r.run(3)  # warm-up: eager, host reads allowed
    with pytest.raises(graphs.HostReadError, match="host"):
        r.run(3)


@pytest.mark.parametrize("name", list(SAMPLERS))
def test_steady_state_step_has_no_host_read(name):
    """The captured step path of DMALA, GWG-1, ACS and AB-1st reads nothing on the host:
    the CPU shortcuts of ChainState.select / merge (``bool(accept.all())``) step aside."""
    capture = graphs.GraphedSteps(graphs.StandInBackend())
    r = _runner(SAMPLERS[name], capture)
    _blocks(r, [20] * 4)  # would raise HostReadError at the capture (20: ACS's cycle)
    assert capture.backend.captures == 1


def test_a_key_that_lies_is_caught_at_replay():
    """A kernel whose capture_key leaves out what its step computes with: the stand-in's
    replay sees other constants than the capture's (on a GPU: silently stale numbers)."""
    kernel = from_conf("sampler/dmala")
    kernel.capture_key = lambda: "always the same"
    capture = graphs.GraphedSteps(graphs.StandInBackend())
    r = _runner(kernel, capture)
    _blocks(r, [4] * 3)
    kernel.step_size = 0.05
    with pytest.raises(graphs.ReplayMismatch, match="differs from the capture"):
        r.run(4)


@pytest.mark.parametrize("name", ["ACS", "GWG-1"])
def test_checkpoint_and_resume_across_graphed_blocks(name):
    """A runner checkpointed after graphed blocks and restored into a fresh one (new graphs)
    continues exactly like an uninterrupted eager chain: ACS's cycle position, and GWG-1's
    single-flip cache, which comes back tagged RESTORED and is checked (a host read) in the
    first block, which therefore runs eagerly."""
    ref = _runner(SAMPLERS[name], None)
    ref_sums = _blocks(ref, [20] * 8)
    first = _runner(SAMPLERS[name], graphs.GraphedSteps(graphs.StandInBackend()))
    sums = _blocks(first, [20] * 5)
    saved = {"runner": first.state_dict(), "generator": first.generator.get_state()}
    second = _runner(SAMPLERS[name], graphs.GraphedSteps(graphs.StandInBackend()), seed=9)
    second.load_state_dict(saved["runner"])
    second.generator.set_state(saved["generator"])
    sums += _blocks(second, [20] * 3)
    for a, b in zip(sums, ref_sums):
        _same(a, b)
    assert torch.equal(second.state.x, ref.state.x) and second.steps == ref.steps == 160
    assert second.capture.backend.replays >= 1
    if name == "ACS":
        assert second.kernel.step_count == ref.kernel.step_count


def test_compile_mode_is_validated_and_only_cuda_is_graphed():
    with pytest.raises(ConfigError, match="compile"):
        graphs.check_mode("yes")
    assert graphs.for_device(torch.device("cpu")) is None
    with graphs.compile_mode("none"):
        assert graphs.for_device(torch.device("cuda")) is None
    g = graphs.for_device(torch.device("cuda"))  # builds no CUDA object until it captures
    assert isinstance(g.backend, graphs.CudaGraphBackend)
    assert _runner(SAMPLERS["DMALA"], "auto").capture is None  # CPU: eager, nothing changes


def test_compile_is_in_the_config_but_not_in_the_run_identity():
    """``compile`` (graph | none) gives the same numbers, so it is not part of a run's hash
    (every recorded run keeps its hash: scripts/check_record_hashes.py)."""
    from omegaconf import open_dict

    from ebmlab.utils.config import compose_job
    from ebmlab.utils.rundir import identity

    _, cfg = compose_job(["task=ising_sampling", "model=ising", "sampler=dmala"])
    with open_dict(cfg):
        del cfg["hydra"]
    assert cfg.compile == "graph"
    before = identity(cfg)
    cfg.compile = "none"
    assert identity(cfg) == before and "compile" not in before["config"]


class _Tempered:
    """f_beta = beta f of an RBM, beta a Python float (as AIS's TemperedEBM keeps it)."""

    state_kind = "binary"

    def __init__(self, model, beta):
        self.model, self.beta, self.dim = model, beta, model.dim

    def log_prob(self, x):
        return self.beta * self.model.log_prob(x)

    def log_prob_and_grad(self, x):
        lp, g = self.model.log_prob_and_grad(x)
        return self.beta * lp, self.beta * g


def test_a_models_plain_attributes_are_in_the_key():
    """A temperature kept as a Python float is baked into a captured graph: changing it is a
    new capture, and the chains stay those of an eager run."""
    capture = graphs.GraphedSteps(graphs.StandInBackend())
    graphed = _runner(SAMPLERS["DMALA"], capture, model=_Tempered(_rbm(), 0.5))
    eager = _runner(SAMPLERS["DMALA"], None, model=_Tempered(_rbm(), 0.5))
    for r in (graphed, eager):
        _blocks(r, [5] * 3)
        r.model.beta = 0.9
        _blocks(r, [5] * 3)
    assert capture.backend.captures == 2 and capture.backend.replays == 3
    assert torch.equal(graphed.state.x, eager.state.x)


def test_a_key_that_never_repeats_stops_capturing_with_a_warning(monkeypatch):
    monkeypatch.setattr(graphs, "MAX_CAPTURES", 2)
    capture = graphs.GraphedSteps(graphs.StandInBackend())
    r = _runner(SAMPLERS["DMALA"], capture)
    for i in range(2):  # a new step size every three blocks: a capture each time
        r.kernel.step_size = 0.1 + 0.01 * i
        _blocks(r, [3] * 3)
    assert capture.backend.captures == 2
    r.kernel.step_size = 0.2
    with pytest.warns(UserWarning, match="run eagerly from now on"):
        _blocks(r, [3] * 3)
    assert capture.backend.captures == 2


def test_a_failed_capture_says_how_to_run_eagerly():
    class Refusing(graphs.StandInBackend):
        def capture(self, fn, generator):
            fn()
            raise RuntimeError("operation not permitted when stream is capturing")

    r = _runner(SAMPLERS["ACS"], graphs.GraphedSteps(Refusing()))
    _blocks(r, [20, 20])
    position = r.kernel.step_count
    with pytest.raises(RuntimeError, match="compile=none runs the same steps eagerly"):
        r.run(20)
    assert r.kernel.step_count == position  # the capture's Python side was undone
