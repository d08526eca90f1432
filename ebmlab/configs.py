"""The packaged configs, and parts built from them outside Hydra (a notebook, a test).

The YAML files live in ``conf/`` at the top of a checkout; a wheel ships the same files as
``ebmlab/conf/`` (pyproject.toml maps the package ``ebmlab.conf`` to ``conf/``).
:func:`config_dir` finds whichever this ``ebmlab`` came with; the command line composes from
it, and a user's own folders join it through ``hydra.searchpath``.

    from ebmlab.configs import make
    sampler = make("sampler", "dmala", step_size=0.4)   # conf/sampler/dmala.yaml, one value changed
"""

from __future__ import annotations

import re
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
# an interpolation of another group's key (``${dataset.dim}``), not a resolver (``${mul:...}``,
# ``${oc.env:...}``) nor a key of the same node (``${.n_side}``)
OUTSIDE_REF = re.compile(r"\$\{(?![\w.]+:)(?!\.)")


def config_dir() -> Path:
    """The folder holding ``config.yaml`` and the config groups: ``ebmlab/conf`` of an
    installed wheel, else ``conf/`` of the checkout this package was imported from."""
    for d in (PACKAGE_DIR / "conf", PACKAGE_DIR.parent / "conf"):
        if (d / "config.yaml").is_file():
            return d
    raise FileNotFoundError(
        f"no ebmlab configs beside {PACKAGE_DIR} (neither ebmlab/conf/ of an installed package "
        "nor conf/ of a checkout); reinstall ebmlab"
    )


def search_dirs(extra: list[str] | tuple[str, ...] = ()) -> list[Path]:
    """The packaged config folder, then the ``file://`` folders of a ``hydra.searchpath``
    (``extra``: its entries, e.g. ``["file://my_conf"]``; relative ones from the current
    directory)."""
    dirs = [config_dir()]
    for entry in extra:
        entry = str(entry).strip().strip("'\"")
        if entry.startswith("file://"):
            dirs.append(Path(entry[len("file://") :]).expanduser().resolve())
    return dirs


def group_options(group: str, dirs: list[Path] | None = None) -> list[str]:
    """The options of a config group (``sampler`` -> ``dmala``, ...) in every folder of ``dirs``
    (default: the packaged configs)."""
    found = set()
    for d in dirs or [config_dir()]:
        root = d / group
        if root.is_dir():
            found |= {p.relative_to(root).with_suffix("").as_posix() for p in root.rglob("*.yaml")}
    return sorted(found)


def option_file(group: str, name: str) -> Path:
    """The YAML file of option ``name`` of ``group`` in the packaged configs."""
    path = config_dir() / group / f"{name}.yaml"
    if not path.is_file():
        from ebmlab.errors import ConfigError

        allowed = ", ".join(group_options(group)) or "(none)"
        raise ConfigError(group, f"unknown option {name!r}; allowed: {allowed}")
    return path


def make(group: str, name: str, **overrides):
    """Build option ``name`` of ``group`` (``conf/<group>/<name>.yaml``) with its YAML values as
    the defaults and ``overrides`` replacing any of them; validated like a run's config (an
    unknown or mistyped key raises :class:`ebmlab.errors.ConfigError`). Values a YAML takes
    from another group (a model's ``dim: ${dataset.dim}``) must be given."""
    from omegaconf import OmegaConf

    from ebmlab.utils.config import build

    node = OmegaConf.merge(_load(group, name), overrides)
    for key in node:
        value = node._get_node(key)._value()
        if OmegaConf.is_interpolation(node, key) and OUTSIDE_REF.search(str(value)):
            from ebmlab.errors import ConfigError

            raise ConfigError(
                f"{group}.{key}",
                f"the YAML takes it from the run's config ({value}); pass {key}=...",
            )
    return build(node, group)


def _load(group: str, name: str):
    """An option's node with the options of its own group that its defaults list extends
    (``learner/rmwggis_basic.yaml``: ``defaults: [rmwggis]``) merged under it."""
    from omegaconf import OmegaConf

    from ebmlab.errors import ConfigError

    node = OmegaConf.load(option_file(group, name))
    bases = node.pop("defaults", None) or []
    merged = OmegaConf.create()
    for entry in bases:
        if entry == "_self_":
            continue
        if not isinstance(entry, str) or "/" in entry or "override" in entry:
            raise ConfigError(
                f"{group}/{name}",
                "its defaults list composes other groups; build it with the "
                "command line (ebmlab ...) instead",
            )
        merged = OmegaConf.merge(merged, _load(group, entry))
    return OmegaConf.merge(merged, node)
