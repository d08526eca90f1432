#!/usr/bin/env python
"""Tables and figures from run directories: a thin wrapper of ``python -m ebmlab.report``
(e.g. ``scripts/make_table.py table dlp/fig3_ising_sampling --scale smoke``)."""

from ebmlab.report.__main__ import main

if __name__ == "__main__":
    main()
