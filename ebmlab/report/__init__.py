"""Tables and figures from run directories (never from re-typed numbers).

    python -m ebmlab.report table dlp/fig3_ising_sampling --scale smoke

reads every ``results.json`` of the experiment's sweep (``outputs/multirun/<experiment>/
<scale>/``), groups runs as its ``report:`` node says (conf/experiment/<experiment>.yaml),
averages over seeds (mean ± std), puts the paper's values beside ours, and writes markdown,
CSV and PNG files under ``outputs/tables/<experiment>/<scale>/``. ``python -m ebmlab.report
--help`` lists the other commands (ad-hoc tables of any sweep directory, single figures).
"""

from ebmlab.report.grouping import group_runs, select
from ebmlab.report.tables import curve_figure, markdown_table, write_table
from ebmlab.runs.rundirs import collect, key_value

__all__ = [
    "collect",
    "curve_figure",
    "group_runs",
    "key_value",
    "markdown_table",
    "select",
    "write_table",
]
