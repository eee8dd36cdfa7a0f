"""Many ``gpurisk`` command lines in a row, each as :func:`conftest.run_cli` runs one.

By default each argument list goes through :func:`gpurisk.cli.main` in this process, isolated as a
new process would be (:func:`conftest.cli_isolated`), with its own captured stdout/stderr and exit
code; local Dask clusters a command starts are kept for the later lines and closed after the last, as
in one process. ``subprocess=True`` runs them all in ONE real subprocess instead (one interpreter
start), where a test must prove something across processes (a lock held by another process); there
an exception escaping ``main`` is returned as rc -1 with its traceback.
"""
from __future__ import annotations

import json
import os
import subprocess as _subprocess
import sys

DRIVER = r"""
import contextlib, io, json, sys, traceback
from gpurisk.cli import main
out = []
for args in json.load(sys.stdin):
    err, std = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(std):
        try:
            main(args)
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        except BaseException:
            code, err = -1, io.StringIO(traceback.format_exc())
    out.append({"rc": code, "stderr": err.getvalue(), "stdout": std.getvalue()})
json.dump(out, sys.stdout)
"""


class Proc:
    def __init__(self, d):
        self.returncode, self.stderr, self.stdout = d["rc"], d["stderr"], d["stdout"]


def run_many(arg_lists, timeout: float = 300, cwd=None, pythonpath=(), subprocess: bool = False):
    """Run each argument list through ``gpurisk.cli.main`` (in ``cwd``, with the directories
    ``pythonpath`` on the path: plugins installed there are loaded); in this process unless
    ``subprocess``. Returns objects with ``returncode``, ``stdout`` and ``stderr``."""
    from conftest import ROOT, _run_in_process, cli_isolated
    arg_lists = [[str(a) for a in args] for args in arg_lists]
    if not subprocess:
        env = {"PYTHONPATH": os.pathsep.join(map(str, pythonpath))} if pythonpath else None
        runs = []
        try:
            for args in arg_lists:
                with cli_isolated(env=env, cwd=cwd, keep_clusters=True):
                    runs.append(_run_in_process(args))
        finally:
            from gpurisk import backends
            backends._close_local()
        return runs
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(map(str, (ROOT, *pythonpath))), COLUMNS="200")
    proc = _subprocess.run([sys.executable, "-c", DRIVER], input=json.dumps(arg_lists),
                           capture_output=True, text=True, env=env, timeout=timeout, cwd=cwd)
    assert proc.returncode == 0, proc.stderr
    return [Proc(d) for d in json.loads(proc.stdout)]
