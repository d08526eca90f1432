"""Warnings about a run whose numbers are finite but suspect.

A non-finite value stops a run (:mod:`ebmlab.core.loop`); some failures stay finite. The one
watched here: a Metropolis-Hastings sampler whose acceptance collapses, e.g. when a learned
energy's scale runs away under PCD and the persistent chains freeze (docs/graph_generation.md,
EBM(GWG) with buffer re-initialisation). Its results are what the frozen model does, so the run
still finishes; the warning goes into ``results.json`` (``warnings``), stderr and the
reproduction report, so that nobody reads those numbers without knowing.
"""

from __future__ import annotations

import math
import sys

from ebmlab.errors import ConfigError


class Health:
    """Watches the logged acceptance (each log window's mean ``accept_rate``).

    ``min_accept_rate``: a window below it is recorded (0 switches the check off). The
    record keeps the first low window, the lowest and how many there were; it is part of
    the checkpoint, so a resumed run reports the same warnings as an uninterrupted one.
    """

    def __init__(self, min_accept_rate: float = 0.0):
        ok = isinstance(min_accept_rate, (int, float)) and not isinstance(min_accept_rate, bool)
        if not ok or not 0.0 <= float(min_accept_rate) < 1.0:
            raise ConfigError(
                "health.min_accept_rate", f"must be a number in [0, 1) (got {min_accept_rate!r})"
            )
        self.min_accept_rate = float(min_accept_rate)
        self.low: dict | None = None

    @classmethod
    def from_config(cls, node) -> Health:
        """From the config's ``health`` node (absent: no checks)."""
        node = dict(node or {})
        unknown = sorted(set(node) - {"min_accept_rate"})
        if unknown:
            raise ConfigError(f"health.{unknown[0]}", "unknown key (allowed: min_accept_rate)")
        return cls(node.get("min_accept_rate", 0.0))

    def observe(self, window: dict, step: int) -> None:
        rate = window.get("accept_rate")
        if self.min_accept_rate <= 0 or not isinstance(rate, float) or math.isnan(rate):
            return
        if rate >= self.min_accept_rate:
            return
        if self.low is None:
            self.low = {"first_step": step, "first": rate, "min_step": step, "min": rate, "n": 0}
            print(f"ebmlab: warning: {self._first()}", file=sys.stderr)
        self.low["n"] += 1
        if rate < self.low["min"]:
            self.low.update(min_step=step, min=rate)

    def _first(self) -> str:
        return (
            f"sampler acceptance {self.low['first']:.3g} in the log window ending at step "
            f"{self.low['first_step']}, below health.min_accept_rate={self.min_accept_rate:g}: "
            "the chains are (nearly) frozen"
        )

    def messages(self) -> list[str]:
        if self.low is None:
            return []
        low = self.low
        return [
            f"{self._first()}; {low['n']} log window(s) below it, the lowest "
            f"{low['min']:.3g} at step {low['min_step']}"
        ]

    def state_dict(self) -> dict:
        return {"low": dict(self.low) if self.low else None}

    def load_state_dict(self, d: dict | None) -> None:
        low = (d or {}).get("low")
        self.low = dict(low) if low else None
