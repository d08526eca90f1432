"""Errors that end a run with a clear message instead of a traceback, and the exit codes."""

# success, diverged or failed, configuration or input error, unusable run directory
# (a signal stop exits 128 + the signal's number: ebmlab.core.signals)
EXIT_OK, EXIT_FAILED, EXIT_CONFIG, EXIT_RUNDIR = 0, 1, 2, 3


class ConfigError(ValueError):
    """A configuration value is invalid. ``key`` names the config key (dotted path)."""

    def __init__(self, key: str, message: str):
        self.key = key
        self.message = message
        super().__init__(f"{key}: {message}")

    def prefixed(self, prefix: str) -> "ConfigError":
        key = (
            f"{prefix}.{self.key}" if prefix and not self.key.startswith(prefix + ".") else self.key
        )
        return ConfigError(key, self.message)


class DivergenceError(RuntimeError):
    """Training produced NaN/Inf or left its declared bounds; the last good checkpoint is
    kept. ``problem`` says what is wrong with ``what`` (a finite value out of bounds says so)."""

    def __init__(self, step: int, what: str, problem: str = "is not finite"):
        self.step = step
        super().__init__(f"training diverged at step {step}: {what} {problem}")


def check(cond: bool, key: str, message: str) -> None:
    """Raise ConfigError(key, message) unless ``cond`` holds."""
    if not cond:
        raise ConfigError(key, message)


def check_at_least(values: dict, bounds: tuple[tuple[str, int], ...]) -> None:
    """``bounds``: (space-separated keys, lower bound) pairs; every ``values[key] >= bound``."""
    for keys, lo in bounds:
        for k in keys.split():
            check(values[k] >= lo, k, f"must be >= {lo} (got {values[k]})")


class CheckpointError(RuntimeError):
    """No usable checkpoint in a run directory that has some (corrupt or truncated)."""
