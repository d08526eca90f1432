"""Command-line overrides checked before Hydra composes: unknown keys with the keys nearby.

Hydra answers ``sampler.stepsize=0.3`` with "Key 'stepsize' is not in struct"; here the same
mistake reads ``sampler.stepsize: unknown key; did you mean sampler.step_size? ...`` and the
run exits 2 like every other configuration error. A key of the layout before the ``run:``
node (``task.n_iters``, ``learner.n_epochs`` of a GRBM task, ...) names its new key.
"""

from __future__ import annotations

import difflib
from pathlib import Path

from omegaconf import DictConfig, ListConfig, OmegaConf

from ebmlab.errors import ConfigError
from ebmlab.utils.config_schema import renamed_message


def searchpath_entries(argv: list[str]) -> list[str]:
    """The entries of a ``hydra.searchpath=[file://my_conf,...]`` override (none: [])."""
    for arg in argv:
        key, _, value = arg.partition("=")
        if key.lstrip("+") == "hydra.searchpath":
            return [v.strip().strip("'\"") for v in value.strip().strip("[]").split(",") if v]
    return []


def _is_group(key: str, dirs: list[Path]) -> bool:
    return any((d / key).is_dir() for d in dirs)


def _parse(argv: list[str]):
    from hydra.core.override_parser.overrides_parser import OverridesParser

    return OverridesParser.create().parse_overrides(
        [a for a in argv if "=" in a and not a.startswith("-")]
    )


def _first(override) -> str:
    """The override as one ``key=value`` (a sweep's first value)."""
    if override.is_sweep_override():
        value = next(iter(override.sweep_string_iterator()))
    else:
        value = override.get_value_element_as_str()
    return f"{override.key_or_group}={value}"


def _keys(node, prefix: str = "") -> list[str]:
    """Every dotted key of ``node`` (nodes and leaves)."""
    out = []
    if isinstance(node, DictConfig):
        for k in node.keys():
            key = f"{prefix}.{k}" if prefix else str(k)
            out.append(key)
            out += _keys(node._get_node(k), key)
    return out


def nearby_keys(cfg: DictConfig, key: str) -> str:
    """``did you mean ...?`` and the keys beside ``key``'s deepest existing parent."""
    parts = key.split(".")
    node, depth = cfg, 0
    while depth < len(parts) - 1 and isinstance(node, DictConfig) and parts[depth] in node:
        node = node._get_node(parts[depth])
        depth += 1
    parent = ".".join(parts[:depth])
    siblings = [str(k) for k in node.keys()] if isinstance(node, DictConfig) else []
    everything = [k for k in _keys(cfg) if not k.startswith("hydra")]
    close = [
        f"{parent}.{k}" if parent else k
        for k in difflib.get_close_matches(parts[depth], siblings, 3, 0.6)
    ]
    same_leaf = [k for k in everything if k.rsplit(".", 1)[-1] == parts[-1] and k not in close]
    close += same_leaf[:3]
    close += [k for k in difflib.get_close_matches(key, everything, 3, 0.75) if k not in close]
    msg = "unknown key"
    if close:
        msg += f"; did you mean {' or '.join(close[:4])}?"
    if siblings:
        where = f"keys of {parent}" if parent else "top-level keys"
        msg += f" ({where}: {', '.join(sorted(siblings))}; `+{key}=...` adds a new key)"
    return msg


def _exists(cfg: DictConfig, key: str) -> bool:
    node = cfg
    for part in key.split("."):
        if isinstance(node, ListConfig):
            if not part.isdigit() or int(part) >= len(node):
                return False
            node = node._get_node(int(part))
        elif isinstance(node, DictConfig):
            if part not in node:
                return not OmegaConf.is_struct(node)  # an open node takes new keys
            node = node._get_node(part)
        else:
            return False
    return True


def check_keys(argv: list[str], dirs: list[Path]) -> None:
    """Raise :class:`ConfigError` naming the first command-line key that the composed config
    does not have (``+key=`` adds one and is not checked), with the keys nearby. Composes only
    when some override sets a key (group choices are checked against the option files).
    ``dirs``: the config folder, then the ``hydra.searchpath`` folders
    (``ebmlab.configs.search_dirs``)."""
    try:
        overrides = _parse(argv)
    except Exception:  # noqa: BLE001 - bad syntax: Hydra's own message says where
        return
    keys, compose_with = [], []
    for o in overrides:
        key = o.key_or_group
        if key.startswith("hydra"):
            if key.startswith("hydra.searchpath"):
                compose_with.append(o.input_line)
            continue
        if o.is_add() or o.is_force_add() or o.is_delete() or o.package:
            continue
        if _is_group(key, dirs) or "/" in key:
            compose_with.append(_first(o))
        else:
            keys.append(key)
    if not keys:
        return
    cfg = _compose(dirs[0], compose_with)
    if cfg is None:
        return
    target = OmegaConf.select(cfg, "task._target_", default=None, throw_on_resolution_failure=False)
    for key in keys:
        exists = _exists(cfg, key)
        renamed = renamed_message(key, target, exists)
        if renamed is not None:
            raise ConfigError(key, renamed)
        if not exists:
            raise ConfigError(key, nearby_keys(cfg, key))


def _compose(config_dir: Path, overrides: list[str]) -> DictConfig | None:
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(config_dir), version_base="1.3"):
            return compose("config", overrides=overrides)
    except Exception:  # noqa: BLE001 - composition errors are Hydra's to report
        return None
    finally:
        GlobalHydra.instance().clear()
