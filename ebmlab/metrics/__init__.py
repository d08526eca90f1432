"""Metrics: MMD, ESS, AIS, graph statistics, FID."""
