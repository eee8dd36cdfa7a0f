"""The serial stand-ins for ``Future`` used by :meth:`gpurisk.freq.lattice.Lattice.tables` when it
runs without a thread pool, :func:`_submit`, which picks a pool or runs at once, and
:func:`usable_cpus`, what decides whether the engine's work is split between threads, and
:func:`in_runs`, which splits a long pass into runs, one a thread."""


#: where set (a forked worker process: :mod:`gpurisk.core.forked`), the CPUs
#: :func:`usable_cpus` gives, whatever the process's affinity: each of those processes is one of
#: several sharing the CPUs, so its passes run in one thread
CPU_LIMIT: list = [None]


def usable_cpus() -> int:
    """The CPUs this process may run on (at most :data:`CPU_LIMIT` where it is set)."""
    import os
    if CPU_LIMIT[0] is not None:
        return int(CPU_LIMIT[0])
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def in_runs(fn, size: int, align: int, runs: int, name: str) -> list:
    """``fn(begin, end)`` over ``runs`` contiguous runs of 0..size (their bounds multiples of
    ``align``), each run in a thread of its own (one run: in this thread), and their results in
    the runs' order: the engine's way of sharing a long pass among the CPUs."""
    if runs < 2:
        return [fn(0, size)]
    cut = [size * h // runs // align * align for h in range(runs)] + [size]
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(runs, thread_name_prefix=name) as pool:
        futures = [pool.submit(fn, a, b) for a, b in zip(cut[:-1], cut[1:])]
        return [f.result() for f in futures]



class _Done:
    """A finished computation with the ``Future`` interface (the serial path of :meth:`Lattice.tables`)."""

    __slots__ = ("_value",)

    def __init__(self, value):
        self._value = value

    def result(self):
        return self._value

    def done(self) -> bool:
        return True


class _Later:
    """A value computed on first ``result()`` (thread-safe), from futures that may still be running."""

    def __init__(self, fn):
        import threading
        self._fn, self._lock, self._value = fn, threading.Lock(), None

    def result(self):
        with self._lock:
            if self._fn is not None:
                self._value, self._fn = self._fn(), None
        return self._value

    def done(self) -> bool:
        return self._fn is None


def _submit(pool, fn, *args):
    return pool.submit(fn, *args) if pool is not None else _Done(fn(*args))

