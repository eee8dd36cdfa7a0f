"""Conformance kit for measures: what every measure, built-in or third-party, must satisfy.

A plugin's tests call it on each of its measure classes::

    from gpurisk.testing import check_measure
    def test_conformance():
        check_measure(MyMeasure)                       # all the checks below

- :func:`check_metadata`: the class describes itself completely (name usable on the command line,
  description, reference, ``needs`` from :data:`gpurisk.measure.NEEDS`, level, JSON-able options,
  column options declared consistently).
- :func:`check_bad_input`: on awkward tables (no sample uniques, only uniques, one cell, one record)
  and thin contexts (no options, no fraction, no population, no weights) the measure returns a
  :class:`~gpurisk.Result` whose value is a finite number exactly when it gives no reason (never NaN
  or infinity without a reason), or raises :class:`~gpurisk.BadInput` with one line; nothing else.
- :func:`check_reads_summary` / :func:`check_buckets`: a measure that reads summaries gives the
  same result on the summaries alone; one that reads buckets gives the same result on the cells dealt
  at random into several buckets (and on the strict namespace) as in one bucket.
- :func:`check_backends_agree`: the same records counted by every backend named (through
  :func:`gpurisk.build_table`) give the same result as pandas; a backend that raises
  :class:`~gpurisk.UnsupportedBackend` here is skipped and listed in the report. One of them,
  ``strict``, runs everywhere: the device engine with arrays of :mod:`gpurisk.testing.strict`, which
  refuse every implicit host conversion (``np.asarray``, ``float()``, iteration, numpy functions)
  and offer only what CuPy has, so a measure learns on a CPU that it would break on a GPU. The Dask
  backends count on a threads-only local cluster (unless a scheduler or client is there), so a plain
  script may call the kit at top level.

Every check raises ``AssertionError`` naming the measure and each problem found. Measures are run
exactly as :func:`gpurisk.run_measures` runs them (needs checked first), but from the class, so a
measure need not be registered to be checked.
"""
from gpurisk.testing.checks import (BackendReport, check_backends_agree, check_bad_input,
                                    check_buckets, check_measure, check_metadata,
                                    check_reads_summary)
from gpurisk.testing.kit import (BACKENDS, EXTRA_COLUMN, result_problems, run_cli, run_measure,  # noqa: F401
                                 synthetic_register, table_from_counts)

__all__ = ["check_metadata", "check_bad_input", "check_backends_agree", "check_measure",
           "synthetic_register", "table_from_counts", "run_measure", "BackendReport", "BACKENDS",
           "EXTRA_COLUMN", "run_cli", "check_reads_summary", "check_buckets"]

