"""Blocks of sampler steps captured once as CUDA graphs and replayed (issue 46).

On a GPU a sampler step is launch-bound (about 1 ms whatever the model); captured in a graph
it costs about one forward+backward. :class:`GraphedSteps` runs ``block(state, n)`` (n steps
of a fixed-parameter kernel, as :class:`~ebmlab.core.chain.ChainRunner` does them) so that:

- the first time a block of a given *key* runs it runs eagerly (on CUDA on a side stream):
  that is the warm-up a capture needs, and its result is the chains' real next block;
- the second time it is captured once into static input/output buffers, then replayed:
  copy the ChainState's tensors into the static inputs, replay, copy the outputs back out
  into a new ChainState (the static buffers are overwritten by the next replay, so nothing
  returned aliases them);
- the key is everything the captured work depends on besides tensor values: the block
  length, the state's structure (shapes, dtypes, devices, which caches ``aux``/``extra`` hold
  and their tags), the kernel's frozen parameters (``kernel.capture_key()`` where defined,
  else its attributes), the model's parameter storage, the generator. A change of any of
  them (AB/ACS adaptation freezing, a resized batch) is a new key and a new capture; a
  steady chain replays one graph. A single-flip cache's tag holds the parameter versions it
  was computed with; the key holds only whether it is the model's current one (parameters
  updated in place, as PCD's optimiser does, keep the graph: it reads the same storage),
  and a replay's output is tagged with the model's tag at the replay. A cache restored
  from a checkpoint is checked on the host first: that block runs eagerly. The model's
  memos (``clear_memos()``) are recomputed inside a captured block.
- draws come from the run's generator, registered with the graph
  (``CUDAGraph.register_generator_state``): a replay draws exactly what the eager steps
  would have drawn from the generator's current state, and advances it the same way, so a
  graphed and an eager run give the same chains.

A kernel whose Python-side state moves while it steps (ACS's cycle position) is captured
only when it says how: ``capture_key()`` (what its next steps depend on) and
``advance_captured(n)`` (apply the Python side of n steps after a replay). Others whose
attributes change during a block run eagerly, which is always correct.

:class:`CudaGraphBackend` does the CUDA calls; :class:`StandInBackend` captures by running
the block once under a tracer and replays by running it again eagerly, so the bookkeeping is
tested on a CPU: it fails on a host read inside a captured block (``float(t)``,
``bool(t.all())``, ``nonzero``: :class:`HostReadError`, what CUDA refuses during capture)
and on a replay that would not do what the capture did (:class:`ReplayMismatch`: other ops,
other Python constants, other input buffers). ``compile: graph | none`` in the config picks
the mode (:func:`configure`); nothing changes on a CPU.
"""

from __future__ import annotations

import contextlib
import math
import threading
import warnings
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

import torch
from torch import Tensor
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from ebmlab.core import state as state_module
from ebmlab.core.state import RESTORED, ChainState
from ebmlab.errors import ConfigError

MODES = ("graph", "none")
MAX_GRAPHS = 4  # graphs kept per runner (least recently used dropped)
MAX_CAPTURES = 16  # captures per runner before it stops capturing (a key that never repeats)
CURRENT = ("the model's current flip_tag",)  # a flip cache's tag in a key and a graph's output
STALE = ("another flip_tag",)  # in a key: a flip cache the block's first step rebuilds


class NotCapturable(Exception):
    """This block cannot be captured (unhashable state, unfreezable kernel): run it eagerly."""


class HostReadError(RuntimeError):
    """A captured block read a tensor value on the host (CUDA cannot capture that)."""


class ReplayMismatch(RuntimeError):
    """A replay would not do what the capture did: the block depends on something its key
    does not hold (a Python counter, a replaced tensor)."""


# ---- the run's mode ------------------------------------------------------------------------

_MODE = {"compile": "graph"}


def check_mode(value: Any) -> str:
    """The ``compile`` config value, validated (ConfigError otherwise)."""
    if value not in MODES:
        raise ConfigError("compile", f"must be one of {list(MODES)} (got {value!r})")
    return str(value)


def configure(value: Any) -> None:
    """Set the process's capture mode from the config's ``compile`` (graph | none)."""
    _MODE["compile"] = check_mode(value)


def mode() -> str:
    return _MODE["compile"]


@contextlib.contextmanager
def compile_mode(value: str):
    """``compile`` set to ``value`` inside the block (tests, benchmarks)."""
    before = _MODE["compile"]
    configure(value)
    try:
        yield
    finally:
        _MODE["compile"] = before


def for_device(device: torch.device) -> GraphedSteps | None:
    """The capture a chain on ``device`` gets: CUDA graphs on CUDA with ``compile: graph``,
    else None (eager)."""
    if torch.device(device).type == "cuda" and mode() == "graph":
        return GraphedSteps(CudaGraphBackend(torch.device(device)))
    return None


# ---- backends ------------------------------------------------------------------------------


class CaptureBackend:
    """How a block is warmed up, captured and replayed. ``warm(fn)`` runs ``fn`` eagerly and
    returns its outputs; ``capture(fn, generator)`` returns ``(graph, outputs)``, where
    ``graph.replay()`` recomputes ``outputs`` in place from the static inputs ``fn`` reads."""

    name = "abstract"

    def warm(self, fn: Callable[[], Any]) -> Any:
        raise NotImplementedError

    def capture(self, fn: Callable[[], Any], generator: torch.Generator) -> tuple[Any, Any]:
        raise NotImplementedError


class CudaGraphBackend(CaptureBackend):
    """``torch.cuda.CUDAGraph``: warm-up on a side stream, the run's generator registered."""

    name = "cuda"

    def __init__(self, device: torch.device):
        self.device = torch.device(device)
        self._side = None  # the warm-up stream, made on first use

    def warm(self, fn):
        main = torch.cuda.current_stream(self.device)
        if self._side is None:
            self._side = torch.cuda.Stream(self.device)
        side = self._side
        side.wait_stream(main)
        with torch.cuda.stream(side):
            out = fn()
        main.wait_stream(side)
        for t in _tensors(out):  # made on the side stream, used on the main one
            t.record_stream(main)
        return out

    def capture(self, fn, generator):
        graph = torch.cuda.CUDAGraph()
        default = torch.cuda.default_generators[self.device.index or 0]
        if generator is not default:  # the default generator is registered by the capture
            graph.register_generator_state(generator)
        with torch.cuda.graph(graph):
            out = fn()
        return graph, out


class StandInBackend(CaptureBackend):
    """A capture for CPU tests: ``capture`` runs the block once under a tracer (its draws
    undone: a CUDA capture draws nothing, and its outputs hold garbage until the first
    replay), ``replay`` runs it again eagerly under the tracer and writes the results into
    the captured output tensors. Both fail on a host read (:class:`HostReadError`); a replay
    whose op sequence, Python constants or input buffers differ from the capture's fails
    with :class:`ReplayMismatch`. Counts warms, captures and replays."""

    name = "stand-in"

    def __init__(self):
        self.warms = self.captures = self.replays = 0

    def warm(self, fn):
        self.warms += 1
        return fn()

    def capture(self, fn, generator):
        self.captures += 1
        saved = generator.get_state()
        with _Tracer() as tracer:
            out = fn()
        generator.set_state(saved)
        inputs = tracer.external_storages()
        for t in _tensors(out):
            if _storage(t) not in inputs:  # not a static input passed through
                _poison(t)
        return _StandInGraph(self, fn, out, tracer.trace), out


class _StandInGraph:
    def __init__(self, backend: StandInBackend, fn, out, trace: list):
        self.backend, self.fn, self.out, self.trace = backend, fn, out, trace

    def replay(self) -> None:
        self.backend.replays += 1
        with _Tracer() as tracer:
            new = self.fn()
        _compare(self.trace, tracer.trace)
        if _python_values(self.out) != _python_values(new):
            raise ReplayMismatch(
                "the replay's Python-side outputs (state structure, step costs) differ from "
                f"the capture's:\n  captured {_python_values(self.out)}\n  replayed "
                f"{_python_values(new)}"
            )
        ours, theirs = _tensors(self.out), _tensors(new)
        if len(ours) != len(theirs):
            raise ReplayMismatch("the replay returned other outputs than the capture")
        for o, n in zip(ours, theirs):
            if o is not n:
                o.copy_(n)


def _poison(t: Tensor) -> None:
    """Garbage in an output nobody should read before the first replay."""
    if t.is_floating_point() or t.is_complex():
        t.fill_(math.nan)
    elif t.dtype == torch.bool:
        t.fill_(True)
    else:
        t.fill_(-7)


# host reads: a value copied to the host, or an output shape that depends on values
_HOST_READ_OPS = {
    "_local_scalar_dense",
    "is_nonzero",
    "nonzero",
    "equal",
    "allclose",
    "masked_select",
    "_unique",
    "_unique2",
    "unique_dim",
    "unique_consecutive",
    "repeat_interleave",
}
_HOST_READ_METHODS = {"tolist", "numpy", "item", "__bool__", "__float__", "__int__", "__index__"}


class _Tracer(TorchDispatchMode):
    """Records every op of a block (name, Python constants, tensor shapes/dtypes, and which
    input buffers it reads) and raises :class:`HostReadError` on a host read."""

    def __init__(self):
        super().__init__()
        self.trace: list[tuple] = []
        self.made: set[int] = set()
        self._external: set[int] = set()
        self._fn_mode = _NoHostReads()

    def __enter__(self):
        self._fn_mode.__enter__()
        state_module.CAPTURING.depth += 1
        return super().__enter__()

    def __exit__(self, *exc):
        state_module.CAPTURING.depth -= 1
        try:
            return super().__exit__(*exc)
        finally:
            self._fn_mode.__exit__(*exc)

    def external_storages(self) -> set[int]:
        return set(self._external)

    def _describe(self, a):
        if isinstance(a, Tensor):
            ptr = _storage(a)
            meta = (tuple(a.shape), a.dtype, a.device.type)
            if ptr in self.made or a.numel() == 0:
                return ("tensor", *meta)
            self._external.add(ptr)
            return ("input", ptr, a.storage_offset(), tuple(a.stride()), *meta)
        if isinstance(a, torch.Generator):
            return ("generator", a.device.type)
        if isinstance(a, (int, float, bool, str, type(None), torch.dtype, torch.device)):
            return a
        return repr(a)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = func.overloadpacket.__name__
        if name in _HOST_READ_OPS:
            raise HostReadError(
                f"a captured block read a tensor value on the host (aten.{name}); CUDA graphs "
                "cannot capture that: keep the value on the device (torch.where, sums)"
            )
        flat, _ = tree_flatten((args, kwargs))
        self.trace.append((str(func), tuple(self._describe(a) for a in flat)))
        out = func(*args, **kwargs)
        for t in tree_flatten(out)[0]:
            if isinstance(t, Tensor) and t.numel():
                self.made.add(_storage(t))
        return out


class _NoHostReads(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        if getattr(func, "__name__", "") in _HOST_READ_METHODS:
            raise HostReadError(
                f"a captured block read a tensor value on the host (Tensor.{func.__name__}); "
                "CUDA graphs cannot capture that"
            )
        return func(*args, **(kwargs or {}))


def _compare(captured: list, replayed: list) -> None:
    if captured == replayed:
        return
    for i, (a, b) in enumerate(zip(captured, replayed)):
        if a != b:
            raise ReplayMismatch(
                f"op {i} of the replay differs from the capture:\n  captured {a}\n  "
                f"replayed {b}\nthe block depends on something its capture key does not hold"
            )
    raise ReplayMismatch(
        f"the replay ran {len(replayed)} ops, the capture {len(captured)}: the block depends "
        "on something its capture key does not hold"
    )


def _storage(t: Tensor) -> int:
    return t.untyped_storage().data_ptr()


def _python_values(obj) -> list:
    return [v for v in tree_flatten(obj)[0] if not isinstance(v, Tensor)]


def _tensors(obj) -> list[Tensor]:
    """The tensors in ``obj`` (nested containers, chain states)."""
    out = []
    for v in tree_flatten(obj)[0]:
        if isinstance(v, ChainState):
            out += flatten_state(v)[0]
        elif isinstance(v, Tensor):
            out.append(v)
    return out


# ---- the state as buffers and structure -----------------------------------------------------


def flatten_state(state: ChainState) -> tuple[list[Tensor], tuple]:
    """(tensor leaves, hashable structure) of a chain state; a tensor held twice (``extra``
    keeping the x it belongs to) is one leaf, so the structure keeps the aliasing."""
    leaves: list[Tensor] = []
    index: dict[int, int] = {}

    def ref(v):
        if isinstance(v, Tensor):
            i = index.get(id(v))
            if i is None:
                i = index[id(v)] = len(leaves)
                leaves.append(v)
            return ("leaf", i)
        try:
            hash(v)
        except TypeError:
            raise NotCapturable(f"a chain state holds an unhashable {type(v).__name__}") from None
        return ("value", v)

    x, lp, g = ref(state.x), ref(state.log_prob), ref(state.grad)
    extra = tuple((k, ref(state.extra[k])) for k in sorted(state.extra))
    aux = tuple(
        (name, tag, tuple(ref(t) for t in ts))
        for name, (tag, ts) in sorted(state.aux.items(), key=lambda kv: kv[0])
    )
    return leaves, (x, lp, g, extra, aux)


def unflatten_state(leaves: list[Tensor], spec: tuple) -> ChainState:
    def val(r):
        return leaves[r[1]] if r[0] == "leaf" else r[1]

    x, lp, g, extra, aux = spec
    return ChainState(
        x=val(x),
        log_prob=val(lp),
        grad=val(g),
        extra={k: val(r) for k, r in extra},
        aux={name: (tag, tuple(val(r) for r in rs)) for name, tag, rs in aux},
    )


def leaf_meta(leaves: list[Tensor]) -> tuple:
    return tuple(
        (tuple(t.shape), tuple(t.stride()), t.dtype, str(t.device), t.requires_grad) for t in leaves
    )


def freeze(v: Any) -> Hashable:
    """A hashable picture of ``v`` (attributes, state dicts): tensors by identity, version and
    shape (an in-place change shows), containers element-wise, other objects by identity."""
    if isinstance(v, Tensor):
        return ("tensor", id(v), v._version, tuple(v.shape), v.dtype, str(v.device))
    if isinstance(v, dict):
        return ("dict", tuple((k, freeze(v[k])) for k in sorted(v, key=repr)))
    if isinstance(v, (list, tuple)):
        return (type(v).__name__, tuple(freeze(e) for e in v))
    if isinstance(v, (int, float, bool, str, type(None), torch.dtype, torch.device)):
        return v
    return ("object", type(v).__qualname__, id(v))


def kernel_key(kernel) -> Hashable:
    """What a kernel's steps depend on besides the state: ``capture_key()`` if it has one,
    else its attributes."""
    f = getattr(kernel, "capture_key", None)
    if callable(f):
        return ("capture_key", type(kernel).__qualname__, freeze(f()))
    return ("attributes", type(kernel).__qualname__, freeze(vars(kernel)))


def model_key(model) -> Hashable:
    """What a model's computation depends on besides the chains. Its parameters, buffers and
    other tensor attributes by storage (a graph reads them where they are: updated in place
    between replays, e.g. by a PCD optimiser step, is fine; replaced is a new key); its plain
    attributes by value (a temperature, ``training``), those of its submodules and wrapped
    models too. Underscored attributes (module internals, memos) are not read: a captured
    block recomputes the memos (:func:`clear_memos`)."""
    parts: list = [id(model)]
    _model_parts(model, parts, set())
    return tuple(parts)


def flip_tag(model) -> Hashable:
    """The model's ``flip_tag()`` (the parameter versions a single-flip cache is valid for),
    None for a model without one."""
    tag = getattr(model, "flip_tag", None)
    return tag() if callable(tag) else None


def relative_spec(spec: tuple, current: Hashable, stale: bool = False) -> tuple:
    """``spec`` (:func:`flatten_state`) with a flip cache's tag that equals ``current`` (the
    model's flip_tag now) written as :data:`CURRENT` (with ``stale``, any other as
    :data:`STALE`): a kernel uses that cache or rebuilds it, a choice made in Python on
    exactly this, not on the version numbers."""

    def tag(name, t):
        if name != "flip":
            return t
        return CURRENT if t == current else STALE if stale else t

    x, lp, g, extra, aux = spec
    return x, lp, g, extra, tuple((n, tag(n, t), r) for n, t, r in aux)


def absolute_spec(spec: tuple, current: Hashable) -> tuple:
    """:func:`relative_spec` undone with the model's flip_tag at a replay."""
    x, lp, g, extra, aux = spec
    aux = tuple((n, current if t == CURRENT else t, r) for n, t, r in aux)
    return x, lp, g, extra, aux


def clear_memos(model) -> None:
    """Drop the memos of ``model`` and its submodules (``clear_memos()``, e.g. the RBM's
    W^T copy keyed on W's version): a captured block then recomputes them inside the graph,
    which replays read from the parameters where they are, whatever their version."""
    mods = model.modules() if isinstance(model, torch.nn.Module) else (model,)
    for m in mods:
        f = getattr(m, "clear_memos", None)
        if callable(f):
            f()


def _model_parts(obj, parts: list, seen: set) -> None:
    if id(obj) in seen:
        return
    seen.add(id(obj))
    if isinstance(obj, torch.nn.Module):
        for name, t in (*obj.named_parameters(), *obj.named_buffers()):
            parts.append((name, _where(t)))
        for m in obj.modules():
            _plain_attributes(m, parts, seen)
    else:
        _plain_attributes(obj, parts, seen)


def _plain_attributes(obj, parts: list, seen: set) -> None:
    for k, v in sorted(getattr(obj, "__dict__", {}).items()):
        if k.startswith("_"):
            continue
        if isinstance(v, torch.nn.Module):
            _model_parts(v, parts, seen)
        else:
            parts.append((k, _in_place(v)))


def _where(t: Tensor) -> tuple:
    return ("tensor", _storage(t), t.storage_offset(), tuple(t.shape), t.dtype, str(t.device))


def _in_place(v: Any) -> Hashable:
    """:func:`freeze` with tensors by storage, not version (read in place by a graph)."""
    if isinstance(v, Tensor):
        return _where(v)
    if isinstance(v, dict):
        return ("dict", tuple((k, _in_place(v[k])) for k in sorted(v, key=repr)))
    if isinstance(v, (list, tuple)):
        return (type(v).__name__, tuple(_in_place(e) for e in v))
    return freeze(v)


class _Captured:
    """One captured block: static inputs, the graph, its outputs and their structure."""

    def __init__(self, n, graph, inputs, out_leaves, out_spec, sums, kernel, model, box):
        self.n, self.graph, self.inputs = n, graph, inputs
        self.out_leaves, self.out_spec = out_leaves, out_spec  # out_spec: relative_spec
        self.sums = sums  # name -> an output tensor or a Python int, in the block's order
        self.kernel, self.model = kernel, model
        self.box = box  # box["state"]: the state the block reads (static inputs, its tags)
        self.advance = getattr(kernel, "advance_captured", None)


def _attributes(obj) -> dict:
    return dict(getattr(obj, "__dict__", {}))


def _restore(obj, attrs: dict) -> None:
    if hasattr(obj, "__dict__"):
        vars(obj).clear()
        vars(obj).update(attrs)


class GraphedSteps:
    """Runs ``block(state, n) -> (state, sums)`` (n steps of ``kernel``) through a capture
    backend: eager the first time a key is seen (the warm-up), captured the second time,
    replayed after. ``sums`` maps names to float64 device tensors or Python ints."""

    def __init__(self, backend: CaptureBackend, max_graphs: int = MAX_GRAPHS):
        self.backend = backend
        self.max_graphs = max_graphs
        self.graphs: OrderedDict[Hashable, _Captured] = OrderedDict()
        self.seen: OrderedDict[Hashable, None] = OrderedDict()
        self.eager_keys: set[Hashable] = set()
        self.captures = 0
        self._warned = False
        self._lock = threading.Lock()

    def key(self, kernel, model, state: ChainState, n: int, generator, tag=None) -> tuple:
        leaves, spec = flatten_state(state)
        flip = state.aux.get("flip")
        if flip is not None and flip[0] == RESTORED:
            raise NotCapturable("a flip cache from a checkpoint is checked on the host first")
        spec = relative_spec(spec, flip_tag(model), stale=True)
        key = (n, spec, leaf_meta(leaves), kernel_key(kernel), model_key(model), id(generator))
        key += (tag,)  # what else the block does (a ChainRunner's per-step record function)
        try:
            hash(key)
        except TypeError as e:
            raise NotCapturable(str(e)) from None
        return key

    def run(self, block, kernel, model, state: ChainState, n: int, generator, tag=None):
        """(new state, sums) of ``n`` steps, graphed where it can be; ``tag`` (hashable) tells
        apart blocks that do different work besides the steps (a per-step record)."""
        try:
            key = self.key(kernel, model, state, n, generator, tag)
        except NotCapturable:
            return block(state, n)
        with self._lock:
            cap = self.graphs.get(key)
            if cap is not None:
                self.graphs.move_to_end(key)
                return self._replay(cap, state)
            if self.captures >= MAX_CAPTURES and not self._warned:
                self._warned = True
                warnings.warn(
                    f"ebmlab: {MAX_CAPTURES} CUDA-graph captures for one chain runner: its "
                    "blocks keep changing shape, parameters or state structure, so they run "
                    "eagerly from now on (same numbers, without the graph speed-up)",
                    stacklevel=2,
                )
            if key in self.eager_keys or key not in self.seen or self.captures >= MAX_CAPTURES:
                self.seen[key] = None
                while len(self.seen) > 4 * self.max_graphs:
                    self.seen.popitem(last=False)
                return self.backend.warm(lambda: block(state, n))
            cap = self._capture(block, kernel, model, state, n, generator)
            if cap is None:  # its Python side moves and it cannot say how: eager from now on
                self.eager_keys.add(key)
                return block(state, n)
            self.graphs[key] = cap
            while len(self.graphs) > self.max_graphs:
                self.graphs.popitem(last=False)
            return self._replay(cap, state)

    def _capture(
        self, block, kernel, model, state: ChainState, n: int, generator
    ) -> _Captured | None:
        leaves, spec = flatten_state(state)
        inputs = [torch.empty_like(t) for t in leaves]
        for dst, src in zip(inputs, leaves):
            dst.copy_(src)
        attrs = _attributes(kernel)
        before = freeze(attrs)
        box: dict = {"state": unflatten_state(inputs, spec)}

        def fn():
            clear_memos(model)  # derived tensors computed in the graph, from the parameters
            new, sums = block(box["state"], n)
            out_leaves, out_spec = flatten_state(new)
            out_spec = relative_spec(out_spec, flip_tag(model))
            box["spec"], box["sums"] = out_spec, dict(sums)
            python = (out_spec, tuple((k, v) for k, v in sums.items() if not isinstance(v, Tensor)))
            return out_leaves, [v for v in sums.values() if isinstance(v, Tensor)], python

        try:
            graph, (out_leaves, sums_tensors, _) = self.backend.capture(fn, generator)
        except (HostReadError, ReplayMismatch):
            raise
        except Exception as e:
            raise RuntimeError(
                f"capturing {n} steps of {type(kernel).__name__} as a CUDA graph failed: {e}\n"
                "compile=none runs the same steps eagerly (the same numbers, slower)"
            ) from e
        finally:
            moved = freeze(_attributes(kernel)) != before
            _restore(kernel, attrs)  # the capture's Python side is undone
        self.captures += 1
        if moved and not callable(getattr(kernel, "advance_captured", None)):
            return None
        outs = iter(sums_tensors)  # the graph's output tensors in place of the capture's values
        sums = {k: next(outs) if isinstance(v, Tensor) else v for k, v in box["sums"].items()}
        return _Captured(n, graph, inputs, out_leaves, box["spec"], sums, kernel, model, box)

    def _replay(self, cap: _Captured, state: ChainState):
        leaves, spec = flatten_state(state)
        for dst, src in zip(cap.inputs, leaves):
            dst.copy_(src)
        cap.box["state"] = unflatten_state(cap.inputs, spec)  # this state's tags (stand-in)
        attrs = _attributes(cap.kernel)
        cap.graph.replay()
        _restore(cap.kernel, attrs)  # a replay runs no Python (the stand-in's does: undone)
        if cap.advance is not None:
            cap.advance(cap.n)
        out_spec = absolute_spec(cap.out_spec, flip_tag(cap.model))
        new = unflatten_state([t.clone() for t in cap.out_leaves], out_spec)
        sums = {k: v.clone() if isinstance(v, Tensor) else v for k, v in cap.sums.items()}
        return new, sums
