"""ebmlab.utils."""
