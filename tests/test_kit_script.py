"""The conformance kit called from a plain script (no ``if __name__ == "__main__":``) runs its Dask
check without starting worker processes that re-import the script (issue 29)."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from conftest import ROOT

SCRIPT = '''
import gpurisk.testing
from gpurisk.measures.theta_hat import ThetaHat

report = gpurisk.testing.check_measure(ThetaHat)
print("compared:", ",".join(report.compared))
'''


def test_check_measure_from_a_plain_script(tmp_path):
    pytest.importorskip("distributed")
    (tmp_path / "plain.py").write_text(SCRIPT)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("GPURISK_SCHEDULER", None)
    p = subprocess.run([sys.executable, "plain.py"], cwd=tmp_path, capture_output=True, text=True,
                       env=env, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "Nanny failed" not in p.stderr
    assert "dask" in p.stdout.split("compared: ")[1].strip().split(","), p.stdout   # the Dask check ran
