"""Self-contained HTML pages: the release decision page of a scan (``gpurisk report``, with the
office's policy, a protect run's plan and a SUDA summary) and the SUDA page.

Modules: :mod:`~gpurisk.report.page` (the decision page), :mod:`~gpurisk.report.policy` (policy
and verdicts), :mod:`~gpurisk.report.drivers` (which keys drive the risk), :mod:`~gpurisk.report.plots`,
:mod:`~gpurisk.report.text` (meanings, next steps, number format), :mod:`~gpurisk.report.protection`
(the recommended protection), :mod:`~gpurisk.io.provenance` (file identity the scan records),
:mod:`~gpurisk.report.style` (CSS, Jinja2 templates), :mod:`~gpurisk.report.suda`.
"""
from __future__ import annotations

from gpurisk.report.drivers import key_contributions
from gpurisk.report.plots import label as _label
from gpurisk.report.plots import png as _png
from gpurisk.report.policy import Policy, Verdict, evaluate, load_policy
from gpurisk.report.style import CSS
from gpurisk.report.text import MEANINGS
from gpurisk.report.text import fmt as _fmt
from gpurisk.report.text import meaning as _meaning
from gpurisk.report.page import write_report

__all__ = ["CSS", "MEANINGS", "Policy", "Verdict", "evaluate", "key_contributions", "load_policy",
           "write_report", "_fmt", "_label", "_meaning", "_png"]
