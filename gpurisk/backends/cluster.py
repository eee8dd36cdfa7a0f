"""The Dask clusters the distributed backends count on (:func:`dask_client`).

Dask backends run on the cluster at ``--scheduler ADDRESS`` (``config.scheduler``,
``GPURISK_SCHEDULER``), else on the Dask client already active in the process, else on a local
cluster started for the run (``--workers N`` worker processes, one thread each; a dask-cuda
``LocalCUDACluster``, one worker per GPU, for ``dask-cudf``), kept for later counts of the same
process and closed when it exits.
"""
from __future__ import annotations

import atexit
import logging
import os
from contextlib import contextmanager

from gpurisk.backends.choose import (ENV_MEMORY_LIMIT, ENV_SCHEDULER, ENV_WORKERS, config,
                                     log, require)
from gpurisk.errors import BadInput
from gpurisk.core.messages import bad_input


# --- Dask clusters -----------------------------------------------------------------------------

def _workers(workers) -> int | None:
    w = workers or config.workers or os.environ.get(ENV_WORKERS)
    if w in (None, ""):
        return None
    try:
        w = int(w)
    except ValueError:
        raise BadInput(f"number of workers {w!r} is not an integer") from None
    if w < 1:
        raise BadInput(f"number of workers must be at least 1, got {w}")
    return w


def _check_local_workers(workers: int | None) -> None:
    """A local cluster runs one single-threaded worker process per core at most: more only
    contend for the cores (200 workers on 2 cores never finish starting), so they are refused."""
    cores = os.cpu_count() or 1
    if workers is not None and workers > cores:
        raise bad_input(f"{{arg:--workers {workers}|gpurisk.config.workers = {workers}}} is more than this "
                        f"machine's {cores} cores: a local cluster runs at most one worker per core "
                        f"(give {{arg:--workers {cores}|gpurisk.config.workers = {cores}}} or fewer, or "
                        "{arg:--scheduler|gpurisk.config.scheduler} for a larger cluster)")


#: at most this many workers in a local cluster by default
LOCAL_WORKERS_MAX = 8


def default_local_workers() -> int:
    """A local cluster's workers without ``--workers``: one single-threaded worker per CPU this
    process may use (its affinity, and a CPU quota: :func:`gpurisk.freq.schedule.usable_cpus`),
    at most :data:`LOCAL_WORKERS_MAX`."""
    from gpurisk.freq.schedule import usable_cpus
    return max(1, min(usable_cpus(), LOCAL_WORKERS_MAX))


#: the smallest memory limit of a local worker gpurisk accepts
MIN_WORKER_MEMORY = 256 * 2**20


def memory_limit_bytes(limit) -> int | None:
    """A local worker's memory limit (``"1.5GiB"``, ``"800MB"``, bytes) in bytes; None for no value.
    A value Dask cannot read is one line."""
    if limit in (None, ""):
        return None
    if isinstance(limit, (int, float)) and not isinstance(limit, bool):
        value = int(limit)
    else:
        from dask.utils import parse_bytes
        try:
            value = int(parse_bytes(str(limit)))
        except (ValueError, TypeError):
            raise BadInput(f"memory limit {limit!r} is not a size (say 1.5GiB, 800MB or 2e9)") from None
    if value < MIN_WORKER_MEMORY:
        raise BadInput(f"memory limit {limit!r} is below 256 MiB: a Dask worker takes about 70 MiB "
                       "at rest and pauses at 80 % of its limit, so it could not hold a partition")
    return value


def _memory_limit(limit):
    limit = limit or config.memory_limit or os.environ.get(ENV_MEMORY_LIMIT)
    return memory_limit_bytes(limit)


def _reachable(address: str) -> None:
    """Fail fast, in one line, when a tcp:// scheduler address refuses connections."""
    import socket
    from urllib.parse import urlsplit
    if "://" not in address:
        address = "tcp://" + address
    u = urlsplit(address)
    if u.scheme != "tcp" or not u.hostname:
        return
    try:
        with socket.create_connection((u.hostname, u.port or 8786), timeout=10):
            pass
    except OSError as exc:
        raise BadInput(f"cannot reach the Dask scheduler at {address!r} ({exc})") from None


#: local clusters started by gpurisk, kept for the process's later counts: {(gpu, workers, limit): client}
_LOCAL: dict = {}


def worker_memory_note() -> str:
    """The memory limit of the Dask workers gpurisk started or was told to use, for a message:
    ``"each worker is limited to 1.50 GiB (2 workers)"``; ``""`` when unknown (an outside scheduler
    that does not answer)."""
    limits = set()
    nworkers = 0
    for client in list(_LOCAL.values()):
        try:
            workers = client.scheduler_info()["workers"].values()
        except Exception:
            continue
        nworkers += len(workers)
        limits.update(int(w.get("memory_limit") or 0) for w in workers)
    if not limits:
        try:
            configured = _memory_limit(None)
        except BadInput:
            configured = None
        limits = {configured} if configured else set()
    limits.discard(0)
    if not limits:
        return ""
    shown = " or ".join(f"{v / 2**30:.2f} GiB" for v in sorted(limits))
    return f"each worker is limited to {shown}" + (f" ({nworkers} workers)" if nworkers else "")


def _close_local() -> None:
    for client in list(_LOCAL.values()):
        cluster = client.cluster
        try:
            client.close()
            if cluster is not None:
                cluster.close()
        except Exception:  # pragma: no cover - interpreter shutdown
            pass
    _LOCAL.clear()


def _gpu_count() -> int | None:  # pragma: no cover - needs a GPU
    """CUDA devices CuPy sees, or None when it cannot tell."""
    try:
        import cupy
        return int(cupy.cuda.runtime.getDeviceCount())
    except Exception:
        return None


@contextmanager
def _port_taken_quietly():
    """The local scheduler's HTTP routes (health, metrics) take port 8787, or another one where
    8787 is taken (another Dask cluster on the machine): Dask then warned on stderr at every run
    ("Port 8787 is already in use ... Hosting the HTTP server on port N instead"), which says
    nothing about the run."""
    import warnings
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"Port \d+ is already in use",
                                category=UserWarning)
        yield


def _local_client(gpu: bool, workers, limit):
    """The process's local cluster of this shape, started on first use and closed at exit."""
    from distributed import Client, LocalCluster

    from gpurisk.backends import malloc        # (imports distributed: only where a cluster starts)
    if not gpu:
        _check_local_workers(workers)
    key = (gpu, workers, limit)
    client = _LOCAL.get(key)
    if client is not None and client.status == "running":
        return client
    if gpu:
        from dask_cuda import LocalCUDACluster
        gpus = _gpu_count()
        if workers and gpus and workers > gpus:
            raise bad_input(f"{{arg:--workers {workers}|gpurisk.config.workers = {workers}}} asks for more "
                            "dask-cuda workers than this machine has "
                           f"GPUs ({gpus}): dask-cuda runs one worker per GPU")
        kw = {"n_workers": workers} if workers else {}
        if limit:
            kw["memory_limit"] = limit
        # RMM's asynchronous pool for cuDF and CuPy alike (CuPy routed to RMM on every worker), and
        # cuDF spilling to host memory instead of failing when a worker's GPU fills
        with malloc.glibc_defaults(), _port_taken_quietly():
            cluster = LocalCUDACluster(silence_logs=logging.CRITICAL, dashboard_address=None,
                                       rmm_async=True, rmm_allocator_external_lib_list=["cupy"],
                                       enable_cudf_spill=True, **kw)
    else:
        kw = {"memory_limit": limit} if limit else {}
        with malloc.glibc_defaults(), _port_taken_quietly():
            cluster = LocalCluster(n_workers=workers or default_local_workers(),
                                   threads_per_worker=1, processes=True, host="127.0.0.1",
                                   dashboard_address=None, silence_logs=logging.CRITICAL, **kw)
    client = Client(cluster, set_as_default=False)
    # its workers keep glibc's malloc settings, and give freed memory back only when nearly full
    client.register_plugin(malloc.TrimWhenFull())
    # Ctrl-C at a terminal reaches every process of the foreground group: this process says so in
    # one line and closes the cluster; the workers, its children, ignore it
    from gpurisk.backends.interrupts import IgnoreInterrupts
    client.register_plugin(IgnoreInterrupts())
    if not _LOCAL:
        atexit.register(_close_local)
    _LOCAL[key] = client
    log.info("started a local %s cluster with %d worker(s)", "dask-cuda" if gpu else "Dask",
             len(cluster.workers))
    return client


#: seconds the Dask workers may stay paused (memory above Dask's pause threshold) or absent before a
#: run is stopped with one line; ``GPURISK_DASK_STALL`` sets it (0 turns the watch off)
ENV_STALL = "GPURISK_DASK_STALL"
STALL_SECONDS = 30.0


def _stall_seconds() -> float:
    raw = os.environ.get(ENV_STALL, "")
    if raw.strip() == "":
        return STALL_SECONDS
    try:
        value = float(raw)
    except ValueError:
        raise BadInput(f"{ENV_STALL}={raw!r} is not a number of seconds") from None
    if not value >= 0 or value == float("inf"):
        raise BadInput(f"{ENV_STALL}={raw!r} must be a finite number of seconds >= 0")
    return value


def _worker_states(dask_scheduler=None) -> list[str]:
    """Run on the scheduler: the status of each worker ("running", "paused", ...)."""
    return [str(getattr(ws.status, "name", ws.status)) for ws in dask_scheduler.workers.values()]


class _StallWatch:
    """Watches a cluster while a count runs: when no worker can run a task (every worker paused
    above Dask's memory pause threshold, or none there at all) for ``limit`` seconds in a row, the
    run is interrupted and :func:`dask_client` turns it into one line (issue 30: a memory limit too
    small for the data otherwise leaves the run waiting for ever)."""

    def __init__(self, client, limit: float, poll: float = 1.0, owned: bool = False):
        import threading
        self.client, self.limit, self.poll, self.owned = client, limit, poll, owned
        self.stalled: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="gpurisk-dask-watch")

    def __enter__(self):
        if self.limit > 0:
            self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        return False

    def _run(self) -> None:
        import time
        since = None
        while not self._stop.wait(self.poll):
            try:
                states = self.client.run_on_scheduler(_worker_states)
            except Exception:   # the cluster is going away, or the run ended: nothing to watch
                return
            stuck = not states or all(st == "paused" for st in states)
            if not stuck:
                since = None
                continue
            since = since if since is not None else time.monotonic()
            if time.monotonic() - since >= self.limit and not self._stop.is_set():
                self.stalled = ("no Dask worker is connected" if not states else
                                f"all {len(states)} Dask workers stayed paused (memory above Dask's "
                                "pause threshold)")
                self._cancel_all()
                return

    def _cancel_all(self) -> None:
        """Close the client (and a local cluster gpurisk started for it): the count waiting on it
        raises at once, and a stuck cluster is not kept for the process's later counts."""
        for key, kept in list(_LOCAL.items()):
            if kept is self.client:
                del _LOCAL[key]
        cluster = getattr(self.client, "cluster", None) if self.owned else None
        try:
            self.client.close()
            if cluster is not None:
                cluster.close()
        except Exception:   # already closing: the run ends anyway
            pass

    def message(self) -> str:
        note = worker_memory_note()
        return (f"{self.stalled} for {self.limit:g} s, so the run cannot go on"
                + (f"; {note}" if note else "")
                + ": give the workers more memory ({arg:--memory-limit|gpurisk.config.memory_limit}), use "
                  "fewer {arg:--workers|gpurisk.config.workers}, or split "
                  f"the data into smaller partitions (set {ENV_STALL} to wait longer)")


class ClusterLost(BadInput):
    """The Dask scheduler went away while a count ran (killed, its machine gone, the network cut):
    the command line says so in one line, with how to resume."""


def _lost(exc: BaseException) -> bool:
    """Whether ``exc`` is distributed's way of saying the scheduler's connection was lost."""
    names = {t.__name__ for t in type(exc).__mro__}
    text = str(exc)
    return ("scheduler-connection-lost" in text or "CommClosedError" in names
            or ("FutureCancelledError" in names and "connection" in text.lower()))


@contextmanager
def _quiet_client_logs():
    """distributed's client logs each failed reconnection with its traceback (37 lines when the
    scheduler dies): silenced while a count runs; what went wrong is gpurisk's one line."""
    names = [n for n in list(logging.root.manager.loggerDict) if n.split(".")[0] == "distributed"]
    saved = {n: logging.getLogger(n).level for n in names + ["distributed"]}
    for n in saved:
        logging.getLogger(n).setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        for n, level in saved.items():
            logging.getLogger(n).setLevel(level)


@contextmanager
def _watched(client, owned: bool = False, address: str | None = None):
    watch = _StallWatch(client, _stall_seconds(), owned=owned)
    try:
        with watch, _quiet_client_logs():
            yield client
    except BaseException as exc:  # noqa: B036 - distributed's cancellations are BaseExceptions
        if watch.stalled:   # its futures were cancelled: whatever the count raised, say why
            raise bad_input(watch.message()) from None
        if not isinstance(exc, BadInput) and _lost(exc):
            where = f" at {address!r}" if address else ""
            raise ClusterLost(f"the Dask scheduler{where} went away during the run (its connection "
                              "was lost)") from None
        raise


@contextmanager
def dask_client(gpu: bool = False, scheduler: str | None = None, workers: int | None = None,
                memory_limit=None):
    """A ``distributed.Client`` for one count: the scheduler at ``scheduler`` (or the config, or
    ``GPURISK_SCHEDULER``), else the process's active Dask client, else a local cluster started on
    first use and kept for the process's later counts (closed at exit). While the count runs, a
    cluster whose workers are all paused (or gone) for ``GPURISK_DASK_STALL`` seconds (30) stops
    it with one line."""
    require("dask-cudf" if gpu else "dask")
    from distributed import Client

    address = scheduler or config.scheduler or os.environ.get(ENV_SCHEDULER)
    if address:
        _reachable(address)
        try:
            client = Client(address, timeout="30s", set_as_default=False)
        except (OSError, TimeoutError) as exc:
            raise BadInput(f"cannot reach the Dask scheduler at {address!r} ({exc})") from None
        try:
            with _watched(client, address=address):
                yield client
        finally:
            with _quiet_client_logs():
                try:
                    client.close()
                except Exception:   # noqa: BLE001 - a scheduler already gone
                    pass
        return
    try:
        from distributed import default_client
        client = default_client()
    except ValueError:
        client = None
    if client is not None and client.status == "running":
        with _watched(client):
            yield client
        return
    client = _local_client(gpu, _workers(workers), _memory_limit(memory_limit))
    with _watched(client, owned=True):
        yield client
