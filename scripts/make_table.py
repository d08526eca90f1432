#!/usr/bin/env python
"""Aggregate a sweep directory into a markdown table + figures (see ebmlab.report)."""

from ebmlab.report import main

if __name__ == "__main__":
    main()
