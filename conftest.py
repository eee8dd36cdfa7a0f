"""How the test suite shares the machine's cores (pytest-xdist); the tests' own fixtures are in
tests/conftest.py.

``python -m pytest -q`` runs the whole suite (or any folder, or three or more test files) on one
worker process per core, at most :data:`MAX_WORKERS`, as ``-n auto --dist loadscope`` would. One or
two test files, or named tests, run in this process: starting workers (each imports gpurisk, pandas
and Dask afresh) costs more than it saves there; so do ``--pdb`` and ``-m gpu`` (the GPU tests share
one device). The command line wins: ``-n 2`` distributes a single file, ``-n 0`` or ``-p no:xdist``
(or pytest-xdist not installed) runs in one process; ``PYTEST_XDIST_AUTO_NUM_WORKERS`` sets the
count.

Work is handed out a module at a time (``loadscope``): a module's tests share module-scoped
fixtures (a file many tests read, the outputs of a batch of commands, a kept Dask cluster), built
once that way, not once per worker; the modules with the most tests go first. A worker is a process
of its own, with its own session fixtures (tests/conftest.py: one Dask cluster per worker, on ports
the system picks) and its own temporary folders (tmp_path), so no two workers write the same path.

Nothing a test does may leave a file in the checkout: the controller lists the untracked files git
does not ignore before the run and after it, and a run that added one fails, naming it (a command
run with the checkout as its directory would write its relative outputs there).
"""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

#: more workers than this gain little (the slowest tests take 10-30 s each) and each may start a
#: Dask cluster of its own (tests/conftest.py: shared_cluster)
MAX_WORKERS = 4
#: the terminal size variables as this run was given them. A library the controller loads (GNU
#: readline) exports LINES=24 and COLUMNS=80 at the C level, which the workers would inherit and a
#: plain ``python -m pytest`` never sees: the commands' tables would be cut at 80 columns
TERMINAL_ENV = {k: os.environ.get(k) for k in ("COLUMNS", "LINES")}


def _is_worker(config) -> bool:
    return hasattr(config, "workerinput")


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config):
    """-n auto --dist loadscope unless the command line chose otherwise."""
    if _is_worker(config) or not config.pluginmanager.hasplugin("xdist"):
        return
    opt = config.option
    if getattr(opt, "numprocesses", 0) is None and not getattr(opt, "tx", None):
        opt.numprocesses = "auto"
    if opt.dist == "no" and opt.numprocesses not in (None, 0):
        opt.dist = "loadscope"


@pytest.hookimpl(optionalhook=True)   # a hook of pytest-xdist, in the controller
def pytest_configure_node(node):
    node.workerinput["gpurisk_terminal_env"] = TERMINAL_ENV


def pytest_configure(config):
    """In a worker: the terminal size variables as the controller was given them."""
    if _is_worker(config):
        for k, v in config.workerinput.get("gpurisk_terminal_env", {}).items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _is_small_run(config) -> bool:
    """One or two test files (or tests in them) named on the command line, no folder."""
    files = set()
    for arg in config.args:
        path = Path(config.invocation_params.dir, arg.split("::", 1)[0])
        if not path.is_file():
            return False            # a folder (the suite's testpaths by default) or a pattern
        files.add(path.resolve())
    return 0 < len(files) <= 2


@pytest.hookimpl(tryfirst=True, optionalhook=True)   # a hook of pytest-xdist
def pytest_xdist_auto_num_workers(config):
    """-n auto: 0 for a small run, else the cores this process may use, at most MAX_WORKERS."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None                 # xdist reads it
    if _is_small_run(config) or "gpu" in (config.option.markexpr or ""):
        return 0                    # (-m gpu: the GPU tests share one device, one at a time)
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:          # not on Linux
        cores = os.cpu_count() or 1
    return 0 if cores < 2 else min(cores, MAX_WORKERS)


def _untracked(root: Path) -> set[str] | None:
    """The checkout's untracked files that git does not ignore, or None outside a git checkout."""
    try:
        out = subprocess.run(["git", "-C", str(root), "ls-files", "--others", "--exclude-standard",
                              "-z"], capture_output=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    return set(out.stdout.decode(errors="replace").split("\0")) - {""} if out.returncode == 0 else None


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session):
    if not _is_worker(session.config):
        session.config._gpurisk_untracked = _untracked(Path(__file__).resolve().parent)


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session, exitstatus):
    """Fail a run that left new files in the checkout (module docstring)."""
    before = getattr(session.config, "_gpurisk_untracked", None)
    if before is None or _is_worker(session.config):
        return
    new = sorted((_untracked(Path(__file__).resolve().parent) or set()) - before)
    if new:
        tw = session.config.get_terminal_writer()
        tw.line()
        tw.line(f"the test run left {len(new)} new file(s) in the checkout: {', '.join(new[:10])}",
                red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
