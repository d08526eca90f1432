"""Check that the configs in conf/ still give every recorded run its config hash.

    python scripts/check_record_hashes.py [RECORDS_DIR ...]   # default: records

For each run directory below the given directories that holds ``.hydra/overrides.yaml`` and
``run_config.json``, the run's command-line overrides are composed with today's ``conf/``
exactly as ``python -m ebmlab.run`` composes them, and the hash of the resolved config
(``ebmlab.utils.rundir.identity``) is compared with the hash of the config the run recorded.
A record of the layout before the ``run:`` node (issue 44) is read in today's layout, its
overrides too (``ebmlab.utils.config_schema``), as every reader of records does. Prints one
line per run whose hash changed (with the keys that differ) and exits 1 if any did, else 0.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]


def recorded_runs(roots: list[Path]) -> list[Path]:
    """The run directories below ``roots`` that recorded both overrides and config."""
    found = []
    for root in roots:
        for f in sorted(Path(root).rglob("run_config.json")):
            if (f.parent / ".hydra" / "overrides.yaml").is_file():
                found.append(f.parent)
    return found


def check_run(run_dir: Path) -> list[str]:
    """The keys whose resolved value today differs from the run's record ([] = same hash)."""
    from omegaconf import open_dict

    from ebmlab.utils.config import compose_job
    from ebmlab.utils.config_schema import upgrade, upgrade_override
    from ebmlab.utils.jsonio import read_json
    from ebmlab.utils.rundir import _diff, config_hash, identity

    overrides = yaml.safe_load((run_dir / ".hydra" / "overrides.yaml").read_text()) or []
    recorded = read_json(run_dir / "run_config.json", "the run's config record")
    config = recorded.get("config", {})
    target = (config.get("task") or {}).get("_target_")
    _, cfg = compose_job([upgrade_override(str(o), target) for o in overrides])
    with open_dict(cfg):
        del cfg["hydra"]  # the job config, as the task sees it (hydra: resolves from HydraConfig)
    now = identity(cfg)
    if now["hash"] == config_hash(upgrade(config)):
        return []
    return _diff(upgrade(config), now["config"]) or ["<hash only>"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("roots", nargs="*", type=Path, default=[REPO / "records"])
    a = ap.parse_args(argv)
    runs = recorded_runs(a.roots)
    changed = 0
    for run_dir in runs:
        keys = check_run(run_dir)
        if keys:
            changed += 1
            shown = ", ".join(keys[:6]) + (f" (+{len(keys) - 6} more)" if len(keys) > 6 else "")
            print(f"CHANGED {run_dir}: {shown}")
    print(f"{len(runs) - changed} of {len(runs)} recorded runs keep their config hash.")
    return 1 if changed else 0


if __name__ == "__main__":
    sys.exit(main())
