"""The runs on disk: where an experiment's runs live and how to read them (:mod:`.rundirs`),
the committed records of finished runs (:mod:`.records`, the top-level ``records/``), parked
unfinished runs (:mod:`.park`) and launching the runs a sweep still lacks (:mod:`.sweeps`).

:mod:`ebmlab.report` reads the runs this package finds and judges them; nothing here imports
the report. The commands stay on the report's command line (``python -m ebmlab.report
reproduce --run``, ``park``, ``unpark``), which call into this package.
"""
