"""Dataset loaders (standard public file formats) and synthetic generators."""
