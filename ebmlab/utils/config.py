"""Typed validation and instantiation of config groups.

Every group node (``task``, ``model``, ``dataset``, ``sampler``, ``learner``,
``logger``) names a ``_target_`` whose typed constructor signature is its
schema: unknown keys, missing keys and wrong types are reported here, range
checks are raised by the constructors as :class:`~ebmlab.errors.ConfigError`.
All of it happens before any compute.
"""

from __future__ import annotations

import inspect
import math
import types
import typing
from typing import Any, Literal, Union, get_args, get_origin

from hydra.utils import get_object, instantiate
from omegaconf import DictConfig, ListConfig, OmegaConf

from ebmlab.errors import ConfigError
from ebmlab.utils.rundir import short_name

# the config's own resolvers: run-directory names and products of sizes (``${mul:a,b}``)
OmegaConf.register_new_resolver("run_name", short_name, replace=True)
OmegaConf.register_new_resolver("mul", lambda a, b: a * b, replace=True)

_RESERVED = {"_target_", "_recursive_", "_convert_", "_partial_", "_args_"}


def _target(node: DictConfig, key: str):
    if not isinstance(node, DictConfig) or "_target_" not in node:
        raise ConfigError(key, "must be a config node with a `_target_`")
    try:
        return get_object(node._target_)
    except Exception as e:  # noqa: BLE001 - any import failure is a config error
        raise ConfigError(f"{key}._target_", f"cannot import {node._target_!r} ({e})") from None


def _signature(obj):
    fn = obj.__init__ if inspect.isclass(obj) else obj
    sig = inspect.signature(fn)
    try:
        hints = typing.get_type_hints(fn)
    except Exception:  # noqa: BLE001 - unresolved forward refs: skip type checks
        hints = {}
    params = {
        n: p
        for n, p in sig.parameters.items()
        if n != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    }
    var_kw = any(p.kind == p.VAR_KEYWORD for p in sig.parameters.values())
    return params, hints, var_kw


def _type_name(tp) -> str:
    if get_origin(tp) is Literal:
        return "one of " + ", ".join(repr(a) for a in get_args(tp))
    return getattr(tp, "__name__", str(tp)).replace("typing.", "")


def _matches(value: Any, tp) -> bool:
    if tp is Any or tp is inspect.Parameter.empty:
        return True
    origin = get_origin(tp)
    if origin in (Union, types.UnionType):
        return any(_matches(value, a) for a in get_args(tp))
    if origin is Literal:
        return value in get_args(tp)
    if tp is type(None):
        return value is None
    if tp is bool:
        return isinstance(value, bool)
    if tp is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if tp is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if tp is str:
        return isinstance(value, str)
    if origin in (list, tuple, typing.Sequence) or tp in (list, tuple):
        if not isinstance(value, (list, tuple, ListConfig)):
            return False
        args = get_args(tp)
        return not args or all(_matches(v, args[0]) for v in value)
    if origin is dict or tp is dict:
        return isinstance(value, (dict, DictConfig))
    if inspect.isclass(tp):
        return isinstance(value, (tp, DictConfig))
    return True


FLOAT32_MAX = 3.4028234663852886e38  # a larger value is inf once it becomes a float32 tensor


def _check_finite_number(value, key: str) -> None:
    """Refuse NaN, +-inf and numbers a float32 tensor cannot hold (a target that means them
    lists the key in ``allows_nonfinite``)."""
    if isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            _check_finite_number(v, f"{key}[{i}]")
    elif isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(key, f"must be a finite number (got {value})")
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        if abs(value) > FLOAT32_MAX:
            raise ConfigError(key, f"must be at most {FLOAT32_MAX:.4g} in size (got {value:.4g})")


def validate_node(node: DictConfig, key: str, provided: tuple = ()) -> None:
    """Check ``node`` against the typed signature of its ``_target_``.

    ``provided`` names constructor arguments the caller supplies in code; a target declares
    the ones code always passes (plumbing) in a class attribute ``provided_by_code``.
    """
    obj = _target(node, key)
    provided = (*provided, *getattr(obj, "provided_by_code", ()))
    params, hints, var_kw = _signature(obj)
    try:
        values = OmegaConf.to_container(node, resolve=True)
    except Exception as e:  # noqa: BLE001 - interpolation errors
        raise ConfigError(key, f"cannot resolve: {e}") from None
    for k, v in values.items():
        if k in _RESERVED:
            continue
        if k not in params:
            if var_kw:
                continue
            allowed = ", ".join(sorted(params)) or "(none)"
            raise ConfigError(f"{key}.{k}", f"unknown key; allowed keys: {allowed}")
        tp = hints.get(k, params[k].annotation)
        if isinstance(v, dict) and "_target_" in v:  # a nested part: validated by its target
            validate_node(node[k], f"{key}.{k}")
            continue
        if not _matches(v, tp):
            raise ConfigError(f"{key}.{k}", f"expected {_type_name(tp)} (got {v!r})")
        if k not in getattr(obj, "allows_nonfinite", ()):
            _check_finite_number(v, f"{key}.{k}")
    for name, p in params.items():
        if p.default is inspect.Parameter.empty and name not in values and name not in provided:
            raise ConfigError(f"{key}.{name}", "is required but missing")


def build(node: DictConfig, key: str, **extra):
    """Validate then instantiate ``node``; constructor ConfigErrors get ``key`` as prefix."""
    validate_node(node, key, provided=tuple(extra))
    try:
        return instantiate(node, **extra, _convert_="all")
    except ConfigError as e:
        raise e.prefixed(key) from None
    except Exception as e:  # noqa: BLE001 - hydra wraps constructor errors
        cause = e
        while cause is not None and not isinstance(cause, ConfigError):
            cause = cause.__cause__ or cause.__context__
        if isinstance(cause, ConfigError):
            raise cause.prefixed(key) from None
        raise


WHEN_DIR = "when"  # conf/when/<experiment>/: an experiment's per-choice settings (docs/configs.md)


def run_choices(choices) -> dict:
    """The config-group choices of a run (``hydra.runtime.choices``) without Hydra's own groups
    and the files of ``conf/when/`` that composed the experiment's per-choice settings."""
    return {k: v for k, v in choices.items() if not k.startswith(("hydra", WHEN_DIR))}


def reject_when(cfg: DictConfig) -> None:
    """Refuse a ``when:`` node (how per-choice settings were written before Hydra composed
    them): its values would not be applied, so the run would not be what it says."""
    if "when" in cfg:
        raise ConfigError(
            "when",
            "per-choice settings are files composed by Hydra now: write each `group=choice: "
            "{key: value}` entry as conf/when/<experiment>/<group>/<choice>.yaml and list the "
            "group in conf/when/<experiment>/conditions.yaml (docs/configs.md)",
        )


def check_state_space(cfg: DictConfig, choices: dict) -> None:
    """Refuse a sampler that cannot move in the model's state space, before any compute.

    Kernels declare ``state_spaces`` (the model ``state_kind`` values they support) and,
    when they need one model class (block Gibbs on an RBM, the GRBM samplers), ``model_type``
    (its import path); models declare ``state_kind``.
    """
    s, m = cfg.get("sampler"), cfg.get("model")
    if not (isinstance(s, DictConfig) and "_target_" in s):
        return
    if not (isinstance(m, DictConfig) and "_target_" in m):
        return
    kernel, model = _target(s, "sampler"), _target(m, "model")
    kind = model.state_kind
    name, mname = choices.get("sampler", s._target_), choices.get("model", m._target_)
    if kind not in kernel.state_spaces:
        raise ConfigError(
            "sampler",
            f"{name} moves in {'/'.join(kernel.state_spaces)} states, but model {mname} is "
            f"{kind}; choose a sampler that supports {kind} models",
        )
    if kernel.model_type is not None and not issubclass(model, get_object(kernel.model_type)):
        raise ConfigError(
            "sampler",
            f"{name} is specific to {kernel.model_type.rsplit('.', 1)[-1]} models; "
            f"model {mname} is a {model.__name__}",
        )


def compose_job(overrides: list[str]) -> tuple[dict, DictConfig]:
    """(group choices, job config) of ``python -m ebmlab.run <overrides>`` outside a Hydra app:
    composed from ``conf/`` (the experiment's per-choice settings included: Hydra composes
    them) with ``hydra.runtime`` set, so interpolations resolve. A Hydra that is already
    initialised (a test's, an app's) is left as it was."""
    from pathlib import Path

    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.hydra_config import HydraConfig
    from hydra.initialize import get_gh_backup, restore_gh_from_backup

    conf = Path(__file__).resolve().parents[2] / "conf"
    outer = get_gh_backup()
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(conf), version_base="1.3"):
            cfg = compose("config", overrides=list(overrides), return_hydra_config=True)
    finally:
        restore_gh_from_backup(outer)
    HydraConfig.instance().set_config(cfg)
    return run_choices(cfg.hydra.runtime.choices), cfg
