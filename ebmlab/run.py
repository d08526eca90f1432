"""The single entry point: compose -> validate -> dispatch to a task.

    python -m ebmlab.run task=ising_learning sampler=dmala scale=smoke
    python -m ebmlab.run -m sampler=gibbs,gwg,dula,dmala seed=0,1,2

Configuration errors (unknown option, wrong type, out-of-range value, shape
mismatch, missing data file) end with one message naming the key and exit
code 2, before any compute. A run directory that holds a checkpoint resumes.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import hydra
import torch
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from ebmlab.errors import ConfigError, DivergenceError
from ebmlab.utils.config import build, validate_node
from ebmlab.utils.context import RunContext
from ebmlab.utils.logging import MetricLogger
from ebmlab.utils.seeding import make_generator, resolve_device, seed_everything
from ebmlab.utils.workspace import Workspace

CONF_DIR = Path(__file__).resolve().parent.parent / "conf"
GROUPS = ("task", "model", "dataset", "sampler", "learner", "logger")
EXIT_CONFIG = 2
_STATE = {"task_started": False}


def _run_name(override_dirname: str) -> str:
    return override_dirname or "default"


OmegaConf.register_new_resolver("run_name", _run_name, replace=True)
OmegaConf.register_new_resolver("mul", lambda a, b: a * b, replace=True)


def _config_error(msg: str) -> None:
    print(f"ebmlab: configuration error: {msg}", file=sys.stderr)
    sys.exit(EXIT_CONFIG)


def _options(group: str) -> list[str]:
    d = CONF_DIR / group
    return sorted(p.relative_to(d).with_suffix("").as_posix() for p in d.rglob("*.yaml"))


def precheck_overrides(argv: list[str]) -> None:
    """Reject unknown config-group options with the list of allowed ones (exit 2)."""
    for arg in argv:
        if "=" not in arg or arg.startswith("-"):
            continue
        key, value = arg.split("=", 1)
        key = key.lstrip("+~")
        if key.startswith("hydra/") or key.startswith("hydra."):
            group = key
            d = CONF_DIR / key
        else:
            group = key
            d = CONF_DIR / key
        if not d.is_dir() or "." in key:
            continue
        allowed = _options(group)
        for choice in value.split(","):
            choice = choice.strip()
            if choice in ("null", "") or choice.startswith(("range(", "choice(", "glob(")):
                continue
            if choice not in allowed:
                _config_error(
                    f"{group}={choice}: unknown option; allowed: {', '.join(allowed) or '(none)'}"
                )


def _check_device(name: str) -> torch.device:
    if name != "auto" and not (name == "cpu" or name.startswith("cuda")):
        raise ConfigError("device", f"must be auto, cpu, cuda or cuda:N (got {name!r})")
    device = resolve_device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError("device", f"{name} requested but CUDA is not available; use auto or cpu")
    return device


def _fresh(run_dir: Path) -> None:
    for name in ("checkpoints", "figures", "wandb"):
        shutil.rmtree(run_dir / name, ignore_errors=True)
    for name in ("metrics.jsonl", "results.json", "wandb_id.txt", ".fault_done"):
        (run_dir / name).unlink(missing_ok=True)


def _print_results(results: dict, run_dir: Path, note: str = "") -> None:
    print(f"\nResults{note}:")
    for k, v in results.items():
        if isinstance(v, float):
            print(f"  {k:<32} {v:.6g}")
        elif isinstance(v, (int, str, bool)):
            print(f"  {k:<32} {v}")
    print(f"Run directory: {run_dir}")


def execute(cfg: DictConfig):
    """Validate the whole config, then run the task. Returns the task's main metric."""
    _STATE["task_started"] = True
    hc = HydraConfig.get()
    run_dir = Path(hc.runtime.output_dir)
    choices = {k: v for k, v in hc.runtime.choices.items() if not k.startswith("hydra")}
    try:
        for group in GROUPS:
            node = cfg.get(group)
            if isinstance(node, DictConfig) and "_target_" in node:
                validate_node(node, group)
        if not isinstance(cfg.get("task"), DictConfig):
            raise ConfigError("task", f"no task selected; allowed: {', '.join(_options('task'))}")
        if not isinstance(cfg.seed, int) or cfg.seed < 0:
            raise ConfigError("seed", f"must be a non-negative integer (got {cfg.seed!r})")
        device = _check_device(str(cfg.device))
        task = build(cfg.task, "task")
        if cfg.get("fresh", False):
            _fresh(run_dir)
        done = run_dir / "results.json"
        if done.exists():
            results = json.loads(done.read_text())["metrics"]
            _print_results(results, run_dir, " (already complete; pass fresh=true to rerun)")
            return results.get(task.main_metric)
        seed_everything(int(cfg.seed))
        generator = make_generator(int(cfg.seed), device)
        logger_settings = build(cfg.logger, "logger") if cfg.get("logger") else None
        scale = str(choices.get("scale", "paper"))
        logger = MetricLogger(
            run_dir,
            logger_settings,
            OmegaConf.to_container(cfg, resolve=True),
            run_name=f"{choices.get('task')}/{run_dir.name}",
        )
        ctx = RunContext(
            cfg=cfg,
            run_dir=run_dir,
            device=device,
            generator=generator,
            logger=logger,
            workspace=Workspace(run_dir),
            scale=scale,
            choices=choices,
        )
        exit_code = 1
        try:
            task.setup(ctx)  # builds components; ConfigErrors surface here, before compute
            results = task.run(ctx)
            ctx.write_results(results)
            exit_code = 0
        finally:
            logger.finish(exit_code)
    except ConfigError as e:
        _config_error(str(e))
    except FileNotFoundError as e:
        _config_error(f"missing file: {e}")
    except DivergenceError as e:
        print(
            f"ebmlab: {e}; the last good checkpoint is kept in {run_dir / 'checkpoints'}",
            file=sys.stderr,
        )
        sys.exit(1)
    _print_results(results, run_dir)
    return results.get(task.main_metric)


@hydra.main(version_base="1.3", config_path="../conf", config_name="config")
def main(cfg: DictConfig):
    return execute(cfg)


def cli() -> None:
    precheck_overrides(sys.argv[1:])
    try:
        main()
    except SystemExit as e:
        # Hydra exits 1 on composition errors (bad key, bad syntax) before our task starts.
        if e.code == 1 and not _STATE["task_started"]:
            sys.exit(EXIT_CONFIG)
        raise


if __name__ == "__main__":
    cli()
