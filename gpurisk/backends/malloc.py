"""How the workers of the local Dask cluster gpurisk starts use glibc's malloc.

Dask's nannies set ``MALLOC_TRIM_THRESHOLD_=65536`` in every worker by default
(``distributed.nanny.pre-spawn-environ``), so that freed memory goes back to the system at once.
Setting it turns off glibc's sliding mmap threshold: every array above 128 KiB is then mapped
afresh and its pages faulted in again, and the counting's cubes and partials are such arrays, made
and dropped by the thousand. Measured on bench/bench_register_scan.py's 20 M-record register (16
keys, <= 3 keys, 2 workers of 3 GB, ``--cells-on-workers``, in process, the same file):

- the variable set (Dask's default): 34.6 s wall, 23.0 s of system time; left out: 25.7 s,
  10.3 s of system time;
- later, with the merges' faster sorts (largest worker's resident memory sampled every 50 ms): the
  variable set 28.8 s, 1.42 GB; left out 21.1-21.9 s, 1.75-1.78 GB (a worker keeps freed memory for
  reuse); left out, and ``malloc_trim`` after every task, 24.1 s, 1.52 GB;
- the 100 M-record register (20 keys, the same workers, whole CLI): read by ``ps`` every second,
  the largest worker reached 2.64 GB left out (in 192 s) and 2.27 GB with :class:`TrimWhenFull`
  (198 s); read every 20 ms by the bench, 2.46 GB with it (195 s), just past the 2.4 GB at which
  Dask pauses a worker (80 % of 3 GB). A trim after a task does not lower the peak within a task.

So the workers start without the variable (:func:`glibc_defaults`), and :class:`TrimWhenFull`
gives freed memory back (``malloc_trim(0)``) after a task only while the worker's resident memory
is above Dask's own target fraction of its limit (``distributed.worker.memory.target``, where Dask
starts to spill): memory that would otherwise count towards spilling and pausing. A
``MALLOC_TRIM_THRESHOLD_`` set in gpurisk's own environment is passed on as it is. Workers of an
outside scheduler keep what their own configuration says.
"""
from __future__ import annotations

import os

from distributed.diagnostics.plugin import WorkerPlugin

#: the variable Dask's nannies set in each worker process
MALLOC_TRIM = "MALLOC_TRIM_THRESHOLD_"
#: Dask's setting read for :class:`TrimWhenFull`'s threshold, and its value where it is unset
TARGET_KEY = "distributed.worker.memory.target"
TARGET_DEFAULT = 0.6


def glibc_defaults():
    """A context (``dask.config.set``) in which a local cluster's nannies start their workers
    without ``MALLOC_TRIM_THRESHOLD_``, unless this process's environment sets it."""
    import dask
    if MALLOC_TRIM in os.environ:
        return dask.config.set({})
    return dask.config.set({f"distributed.nanny.pre-spawn-environ.{MALLOC_TRIM}": None})


def _libc():
    """glibc's ``malloc_trim``, or None where there is none (macOS, musl)."""
    try:
        import ctypes
        trim = ctypes.CDLL("libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


def _rss() -> int:
    import psutil
    return int(psutil.Process().memory_info().rss)


class TrimWhenFull(WorkerPlugin):
    """A worker plugin: after each task, ``malloc_trim(0)`` where the worker's resident memory is
    above ``fraction`` of its memory limit (default: Dask's spill target); nothing where the worker
    has no limit or the C library has no ``malloc_trim``."""

    name = "gpurisk-trim-when-full"

    def __init__(self, fraction: float | None = None):
        self.fraction = fraction
        self.trimmed = 0

    def setup(self, worker):
        import dask
        limit = getattr(getattr(worker, "memory_manager", None), "memory_limit", None)
        fraction = self.fraction
        if fraction is None:
            fraction = dask.config.get(TARGET_KEY, TARGET_DEFAULT) or TARGET_DEFAULT
        self._above = int(limit * float(fraction)) if limit else None
        self._trim = _libc() if self._above else None

    def transition(self, key, start, finish, **kwargs):
        if start == "executing" and self._trim is not None and _rss() > self._above:
            self._trim(0)
            self.trimmed += 1
