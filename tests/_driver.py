"""Many ``gpurisk`` command lines in ONE real subprocess (one interpreter start instead of many).

Each argument list goes through :func:`gpurisk.cli.main`, what ``python -m gpurisk`` runs, with its
own captured stdout/stderr and exit code; an exception escaping ``main`` is returned as rc -1 with its
traceback. Used where a test runs dozens of command lines and must stay fast.
"""
from __future__ import annotations

import json
import os
import subprocess
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


def run_many(arg_lists, timeout: float = 300, cwd=None, pythonpath=()) -> list[Proc]:
    """Run each argument list through ``gpurisk.cli.main`` in one subprocess (in ``cwd``, with the
    directories ``pythonpath`` after the repository root on ``PYTHONPATH``)."""
    from conftest import ROOT
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(map(str, (ROOT, *pythonpath))), COLUMNS="200")
    proc = subprocess.run([sys.executable, "-c", DRIVER],
                          input=json.dumps([[str(a) for a in args] for args in arg_lists]),
                          capture_output=True, text=True, env=env, timeout=timeout, cwd=cwd)
    assert proc.returncode == 0, proc.stderr
    return [Proc(d) for d in json.loads(proc.stdout)]
