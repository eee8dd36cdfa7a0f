"""Shared test fixtures: where the real data is, and how to run the CLI as a user would."""
from __future__ import annotations

import contextlib
import io
import os
import signal
import subprocess as _subprocess
import sys
import traceback
import warnings
from pathlib import Path

import pytest

from gpurisk.testing.data import find_shared_data

ROOT = Path(__file__).resolve().parents[1]


DATA = find_shared_data(ROOT) or ROOT.parent / "shared" / "data"


def data_path(rel: str) -> Path:
    p = DATA / rel
    if not p.exists():
        pytest.skip(f"real data file {p} is not present")
    return p


class CliRun:
    """What :func:`run_cli` returns: the attributes of ``subprocess.CompletedProcess`` the tests read."""

    def __init__(self, args, returncode: int, stdout: str, stderr: str):
        self.args, self.returncode, self.stdout, self.stderr = list(args), returncode, stdout, stderr

    def __repr__(self) -> str:
        return f"CliRun(args={self.args!r}, returncode={self.returncode})"


def run_cli(*args: str, check: bool = False, env: dict | None = None, timeout: float = 300,
            cwd: str | Path | None = None, subprocess: bool = False,
            keep_clusters: bool = False) -> CliRun:
    """Run ``gpurisk ARGS`` as a user would; returns its exit code, standard output and error.

    By default the command runs in this process, through :func:`gpurisk.cli.main` (what ``python -m
    gpurisk`` runs) with its own captured stdout/stderr and SystemExit caught, isolated as a new
    process would be (see :func:`cli_isolated`); ``timeout`` is then not enforced. ``subprocess=True``
    runs ``python -m gpurisk ARGS`` in a real process: for the tests that prove something about
    processes (exit at the process level, signals, kill/resume, pipes, interpreter exit).
    ``keep_clusters`` (in this process only) keeps a local Dask cluster the command starts for the
    next command that asks for the same one, as the commands of one process share it; the caller
    closes it (``gpurisk.backends._close_local()``)."""
    args = tuple(map(str, args))
    if subprocess:
        run = _run_subprocess(args, env, timeout, cwd)
    else:
        with cli_isolated(env=env, cwd=cwd, keep_clusters=keep_clusters):
            run = _run_in_process(args)
    if check and run.returncode != 0:
        raise AssertionError(f"gpurisk {' '.join(args)} failed ({run.returncode}):\n"
                             f"{run.stdout}\n{run.stderr}")
    return run


def _run_subprocess(args, env, timeout, cwd) -> CliRun:
    e = dict(os.environ)
    e["PYTHONPATH"] = str(ROOT) + (os.pathsep + e["PYTHONPATH"] if e.get("PYTHONPATH") else "")
    e.setdefault("COLUMNS", "200")
    if env:
        e.update(env)
    proc = _subprocess.run([sys.executable, "-m", "gpurisk", *args], capture_output=True,
                           text=True, env=e, timeout=timeout, cwd=cwd)
    return CliRun(args, proc.returncode, proc.stdout, proc.stderr)


class _Captured(io.TextIOWrapper):
    """A text stream over bytes (``.buffer`` works), not a terminal and with no file descriptor:
    what a command sees when its output goes to a pipe, as with ``subprocess.run(capture_output=True)``."""

    def __init__(self):
        super().__init__(io.BytesIO(), encoding="utf-8", errors="backslashreplace", write_through=True)

    def text(self) -> str:
        self.flush()
        return self.buffer.getvalue().decode("utf-8", "replace")


def _run_in_process(args) -> CliRun:
    from gpurisk.cli import main
    out, err = _Captured(), _Captured()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(list(args))
        except SystemExit as exc:       # what the interpreter would make of it
            c = exc.code
            code = c if isinstance(c, int) else (0 if c is None else 1)
            if c is not None and not isinstance(c, int):
                print(c, file=sys.stderr)
        except BaseException:           # escaped main: the interpreter prints it and exits 1
            traceback.print_exc()
            code = 1
        finally:
            for stream in (sys.stdout, sys.stderr):
                try:
                    stream.flush()
                except Exception:
                    pass
    return CliRun(args, code, out.text(), err.text())


#: Python's own warning filters at start-up (``python -W`` not given), lowest priority first
_STARTUP_WARNING_FILTERS = (("ignore", ResourceWarning), ("ignore", ImportWarning),
                            ("ignore", PendingDeprecationWarning), ("ignore", DeprecationWarning))
#: environment variables that decide which plugins load
_PLUGIN_ENV = ("PYTHONPATH", "GPURISK_DISABLE_PLUGIN_AUTOLOAD", "GPURISK_BLOCK_PLUGINS")


@contextlib.contextmanager
def cli_isolated(env: dict | None = None, cwd=None, keep_clusters: bool = False):
    """Run a command in this process as if in a new one, and leave nothing behind: ``env`` patched
    into os.environ (``COLUMNS=200`` unless set; ``PYTHONPATH`` entries put on sys.path, the modules
    imported from them forgotten afterwards), ``cwd`` as the working directory, Python's start-up
    warning filters, a plugin manager built afresh when ``env`` names plugin settings; afterwards
    os.environ, cwd, sys.path, signal handlers, ``gpurisk.config``, the plugin manager, pipes read
    and local Dask clusters started by the command (closed, as at a process's exit, unless
    ``keep_clusters``: the caller closes them) are restored."""
    import importlib
    from gpurisk import backends, io as gio, plugins
    saved_env, saved_cwd, saved_path = dict(os.environ), os.getcwd(), list(sys.path)
    saved_modules = set(sys.modules)
    saved_config = dict(vars(backends.config))
    saved_signals = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGPIPE)}
    env = dict(env or {})
    extra = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    fresh_plugins = any(k in env for k in _PLUGIN_ENV)
    os.environ.setdefault("COLUMNS", "200")
    os.environ.update(env)
    if extra:
        sys.path[:0] = extra
        importlib.invalidate_caches()
    if fresh_plugins:
        plugins.reset()
    if cwd is not None:
        os.chdir(cwd)
    try:
        with warnings.catch_warnings():
            warnings.resetwarnings()
            for action, category in _STARTUP_WARNING_FILTERS:
                warnings.simplefilter(action, category)
            yield
    finally:
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
        sys.path[:] = saved_path
        if extra:      # forget the modules first imported from there (another test's plugin)
            roots = [r for r in (str(Path(p).resolve()) for p in extra) if r != str(ROOT)]
            for name in set(sys.modules) - saved_modules:
                f = getattr(sys.modules[name], "__file__", None)
                if f and name.split(".")[0] != "gpurisk" \
                        and any(str(Path(f).resolve()).startswith(r + os.sep) for r in roots):
                    del sys.modules[name]
            importlib.invalidate_caches()
        if fresh_plugins:
            plugins.reset()
        vars(backends.config).update(saved_config)
        if not keep_clusters:
            backends._close_local()
        gio._SPOOLED.clear()
        for s, h in saved_signals.items():
            if h is not None:
                signal.signal(s, h)


def arx_hierarchy_maps(path) -> list[dict]:
    """An ARX hierarchy CSV (``;``-separated, one row per value, one column per level) as one
    {value: label} dict per level above the values (read with the csv module: the tests' oracle)."""
    import csv
    with open(path, newline="") as fh:
        rows = [r for r in csv.reader(fh, delimiter=";") if r]
    return [{r[0]: r[lev] for r in rows} for lev in range(1, len(rows[0]))]


#: the memory of each worker of the tests' local Dask clusters
WORKER_MEMORY = "400MiB"


_SHARED_CLUSTER = None


def shared_cluster():
    """The session's local Dask cluster, started on first use and closed when the session ends: two
    worker processes of one thread each on the loopback, WORKER_MEMORY each (Arrow's default
    allocator keeps freed pages, which Dask counts as unmanaged memory: the system allocator
    instead). Tests that kill or restart workers start their own."""
    global _SHARED_CLUSTER
    distributed = pytest.importorskip("distributed")
    if _SHARED_CLUSTER is None or _SHARED_CLUSTER.status.name != "running":
        _SHARED_CLUSTER = distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
            dashboard_address=None, memory_limit=WORKER_MEMORY, silence_logs=40,
            env={"ARROW_DEFAULT_MEMORY_POOL": "system"})
    return _SHARED_CLUSTER


def pytest_sessionfinish(session, exitstatus):
    global _SHARED_CLUSTER
    if _SHARED_CLUSTER is not None:
        _SHARED_CLUSTER.close()
        _SHARED_CLUSTER = None


@pytest.fixture(scope="session")
def dask_scheduler() -> str:
    """The address of the session's Dask cluster (:func:`shared_cluster`), for ``--scheduler`` or
    ``GPURISK_SCHEDULER``: a command line on Dask without a cluster of its own to start."""
    return shared_cluster().scheduler_address


@pytest.fixture(scope="module")
def client():
    """A Dask client, the default for one test module, of the session's cluster (:func:`shared_cluster`)."""
    distributed = pytest.importorskip("distributed")
    c = distributed.Client(shared_cluster())
    try:
        yield c
    finally:
        c.close()


def gpu_available() -> tuple[bool, str]:
    """(usable, reason): a CUDA device that cupy can see."""
    try:
        import cupy  # noqa: F401
    except Exception as exc:  # pragma: no cover - depends on machine
        return False, f"cupy not importable ({type(exc).__name__})"
    try:
        n = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # pragma: no cover
        return False, f"no CUDA device ({type(exc).__name__}: {exc})"
    return (n > 0), ("" if n > 0 else "no CUDA device")


def pytest_collection_modifyitems(config, items):
    ok, why = gpu_available()
    if ok:
        return
    skip = pytest.mark.skip(reason=f"gpu test: {why}")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def gamma_poisson_margins(seed: int, cards, shape: float, scale: float):
    """(codes, f, Margins) of a synthetic sample: every cell of the ``cards`` key space a count
    f ~ Poisson(Gamma(shape, scale)), the cells with f > 0 kept (the models' tests' tables)."""
    import numpy as np

    from gpurisk.models.forest import Margins
    rng = np.random.default_rng(seed)
    K = int(np.prod(cards))
    f = rng.poisson(rng.gamma(shape, scale, K))
    codes = [c[f > 0] for c in np.unravel_index(np.arange(K), cards)]
    f = f[f > 0]
    return codes, f, Margins(codes, f, list(cards))
