"""Figures of one run, drawn by the tasks at ``finish`` (a leaf: it imports only torch, numpy,
matplotlib, networkx and ebmlab's other leaves; cross-run figures are in ebmlab/report/figures/)."""
