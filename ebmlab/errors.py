"""Errors that end a run with a clear message instead of a traceback."""


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
    """Training produced NaN/Inf; the last good checkpoint is kept."""

    def __init__(self, step: int, what: str):
        self.step = step
        super().__init__(f"training diverged at step {step}: {what} is not finite")


def check(cond: bool, key: str, message: str) -> None:
    """Raise ConfigError(key, message) unless ``cond`` holds."""
    if not cond:
        raise ConfigError(key, message)


class CheckpointError(RuntimeError):
    """No usable checkpoint in a run directory that has some (corrupt or truncated)."""
