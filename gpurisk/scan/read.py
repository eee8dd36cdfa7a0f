"""Reading a scan's output back: :func:`read_scan` gives the :class:`~gpurisk.scan.runner.ScanResult`
that :func:`gpurisk.scan` returned (its rows, the manifest's settings and measures, the short repr,
``_repr_html_``, ``top``), with the rows' reasons (stored in their neutral form) phrased for the
Python API, or for the command line inside a ``gpurisk`` command (:mod:`gpurisk.core.messages`)."""
from __future__ import annotations

from pathlib import Path

from gpurisk.scan.sink import read_manifest, read_rows


def read_scan(path):
    """The scan output at ``path`` (a scan directory, or one Parquet file of scan rows) as a
    :class:`~gpurisk.scan.runner.ScanResult`: ``.results`` the rows sorted by plan order,
    ``.settings`` and ``.measures`` from its manifest (empty for a lone Parquet file). The result
    gives DataFrame-like access to its rows (``len(r)``, ``r["n1"]``, ``r.columns``) and
    ``r.to_frame()`` converts it to a DataFrame."""
    from gpurisk.core.messages import phrase_frame
    from gpurisk.scan.runner import ScanResult
    rows = phrase_frame(read_rows(path))      # the reasons for the reader: the API, or a command
    man = read_manifest(path) if Path(path).is_dir() else {}
    settings = dict(man.get("settings") or {})
    measures = list(settings.get("measures") or
                    [c[:-len("_reason")] for c in rows.columns if c.endswith("_reason")])
    return ScanResult(rows, Path(path), measures, settings)
