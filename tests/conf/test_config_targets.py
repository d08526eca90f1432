"""conf/ is the only source of hyperparameters (issue 10).

Every node with a ``_target_`` under ``ebmlab.`` in conf/ -- in every group option file
(nested nodes too) and in every experiment after composition with its default choices --
must satisfy:

1. the target's constructor has no parameter defaults (a default is a second, silent source
   of a hyperparameter);
2. the node sets every constructor parameter, except the ones the code passes in (plumbing:
   a model, a data tensor, a device). A target declares those in a class attribute
   ``provided_by_code = ("model",)``; the YAML must not set them, and
   :func:`ebmlab.utils.config.validate_node` does not ask for them.

``PENDING`` lists the target prefixes whose conversion is still under way: their nodes are
skipped (reported as skips, by name). Empty it once the last area is converted.
"""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest
import yaml
from hydra import compose, initialize_config_dir
from hydra.utils import get_object
from omegaconf import OmegaConf

from ebmlab.utils.config import validate_node

PENDING: set[str] = set()

CONF = Path(__file__).resolve().parents[2] / "conf"


def target_problems(target: str, keys: set[str]) -> list[str]:
    """Why a node targeting ``target`` with ``keys`` breaks rules 1-2 (empty when it does not)."""
    obj = get_object(target)
    fn = obj.__init__ if inspect.isclass(obj) else obj
    provided = set(getattr(obj, "provided_by_code", ()))
    params = {
        n: p
        for n, p in inspect.signature(fn).parameters.items()
        if n != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    }
    problems = [f"unknown provided_by_code entry {n!r}" for n in sorted(provided - set(params))]
    problems += [f"{n} has a code default ({p.default!r})" for n, p in params.items()
                 if p.default is not inspect.Parameter.empty]  # fmt: skip
    problems += [f"{n} is not set" for n in params if n not in keys and n not in provided]
    problems += [f"{n} is provided by code but set in YAML" for n in sorted(provided & keys)]
    return problems


def _nodes(node, path: str):
    """(path, target, keys) of every node with a ``_target_`` inside ``node``."""
    if isinstance(node, dict):
        target = node.get("_target_")
        if isinstance(target, str) and target.startswith("ebmlab."):
            yield path or "<root>", target, {str(k) for k in node.keys()}
        for k, v in node.items():
            yield from _nodes(v, f"{path}.{k}" if path else str(k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _nodes(v, f"{path}[{i}]")


def _group_files() -> list[Path]:
    """Every option file of every config group (experiments are checked composed)."""
    skip = {"experiment", "hydra"}
    return sorted(p for p in CONF.rglob("*.yaml") if p.relative_to(CONF).parts[0] not in skip)


def _experiments() -> list[str]:
    d = CONF / "experiment"
    return sorted(p.relative_to(d).with_suffix("").as_posix() for p in d.rglob("*.yaml"))


def _check(where: str, nodes) -> None:
    errors, pending = [], []
    for path, target, keys in nodes:
        if any(target.startswith(p) for p in PENDING):
            pending.append(target)
            continue
        errors += [f"{where}: {path} ({target}): {e}" for e in target_problems(target, keys)]
    assert not errors, "\n".join(errors)
    if pending:
        pytest.skip(f"PENDING conversion: {', '.join(sorted(set(pending)))}")


@pytest.mark.parametrize("path", _group_files(), ids=lambda p: p.relative_to(CONF).as_posix())
def test_group_file_sets_every_hyperparameter(path):
    node = yaml.safe_load(path.read_text()) or {}
    _check(path.relative_to(CONF).as_posix(), _nodes(node, ""))


@pytest.mark.parametrize("experiment", _experiments())
def test_composed_experiment_sets_every_hyperparameter(experiment):
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose("config", overrides=[f"experiment={experiment}"])
    _check(f"experiment={experiment}", _nodes(OmegaConf.to_container(cfg), ""))


class _WithDefault:
    def __init__(self, a: int, b: float = 0.5):
        pass


class _Provided:
    provided_by_code = ("model",)

    def __init__(self, model: object, a: int):
        pass


def test_checker_flags_defaults_missing_and_provided_keys():
    me = f"{__name__}._WithDefault"
    assert target_problems(me, {"a", "b"}) == ["b has a code default (0.5)"]
    assert "a is not set" in target_problems(me, {"b"})
    ok = f"{__name__}._Provided"
    assert target_problems(ok, {"a"}) == []
    assert target_problems(ok, {"a", "model"}) == ["model is provided by code but set in YAML"]


def test_validate_node_does_not_ask_for_provided_by_code():
    validate_node(OmegaConf.create({"_target_": f"{__name__}._Provided", "a": 1}), "x")
