"""ebmlab.learning."""
