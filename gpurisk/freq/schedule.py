"""The serial stand-ins for ``Future`` used by :meth:`gpurisk.freq.lattice.Lattice.tables` when it
runs without a thread pool, :func:`_submit`, which picks a pool or runs at once, and
:func:`usable_cpus`, what decides whether the engine's work is split between threads, and
:func:`in_runs`, which splits a long pass into runs, one a thread."""


#: where set (a forked worker process: :mod:`gpurisk.core.forked`), the CPUs
#: :func:`usable_cpus` gives, whatever the process's affinity: each of those processes is one of
#: several sharing the CPUs, so its passes run in one thread
CPU_LIMIT: list = [None]


def usable_cpus() -> int:
    """The CPUs this process may run on (at most :data:`CPU_LIMIT` where it is set): those of its
    affinity (``taskset``, a cpuset, a batch system's binding), and at most what a CPU quota of its
    control group allows (:func:`quota_cpus`: ``docker --cpus``, a Kubernetes CPU limit)."""
    import os
    if CPU_LIMIT[0] is not None:
        return int(CPU_LIMIT[0])
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    quota = _quota()
    return max(1, min(cpus, quota)) if quota is not None else cpus


#: where the control groups are mounted, and the file naming this process's (Linux)
CGROUP_ROOT = "/sys/fs/cgroup"
PROC_CGROUP = "/proc/self/cgroup"


def quota_cpus(root: str = CGROUP_ROOT, proc: str = PROC_CGROUP) -> int | None:
    """The CPUs a CPU quota lets this process's control group use, rounded up (quota 150 ms a
    period of 100 ms: 2); None where there is no quota, or no control group to read (not Linux).
    Read where a container sees its own group (``cpu.max`` at the root, cgroup v2;
    ``cpu/cpu.cfs_quota_us`` and ``cpu.cfs_period_us``, v1) and at this process's group and each
    group above it, as ``/proc/self/cgroup`` names them (a systemd unit's ``CPUQuota=``, a batch
    job's group); the smallest quota found holds."""
    import math
    import os
    found = []

    def read(path, lines=False):
        try:
            with open(path) as fh:
                text = fh.read()
        except (OSError, UnicodeDecodeError):
            return None
        return text.splitlines() if lines else text.split()

    def add(quota, period):
        try:
            q, p = int(quota), int(period)
        except (TypeError, ValueError):       # "max": no quota
            return
        if q > 0 and p > 0:
            found.append(math.ceil(q / p))

    def above(base, path):           # the group at path under base, and each group above it
        parts = [x for x in path.split("/") if x]
        return [os.path.join(base, *parts[:k]) for k in range(len(parts), -1, -1)]
    v2, v1 = [root], [os.path.join(root, "cpu")]
    for line in read(proc, lines=True) or []:      # "0::/a/b" (v2), "4:cpu,cpuacct:/a/b" (v1)
        number, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if number == "0" and not controllers:
            v2 += above(root, path)
        elif "cpu" in controllers.split(","):
            v1 += above(os.path.join(root, "cpu"), path)
    for d in dict.fromkeys(v2):
        got = read(os.path.join(d, "cpu.max"))
        if got and len(got) == 2:
            add(*got)
    for d in dict.fromkeys(v1):
        quota = read(os.path.join(d, "cpu.cfs_quota_us"))
        period = read(os.path.join(d, "cpu.cfs_period_us"))
        if quota and period:
            add(quota[0], period[0])
    return min(found) if found else None


_QUOTA: list = []


def _quota() -> int | None:
    """:func:`quota_cpus`, read once a process (a forked child keeps its parent's group)."""
    if not _QUOTA:
        _QUOTA.append(quota_cpus())
    return _QUOTA[0]


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

