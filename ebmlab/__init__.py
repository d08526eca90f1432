"""ebmlab: sampling and learning energy-based models, reproducibly."""

__version__ = "0.1.0"
