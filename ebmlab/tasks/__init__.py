"""ebmlab.tasks."""
