"""Every Result a measure returns is checked (issue 20): a value that is not a finite real number
without a reason, a bad se or upper, extras that are not JSON, and a measure that exits
(``sys.exit``) or raises any BaseException but KeyboardInterrupt each give a not-applicable row
saying what was returned; the other measures still run, and values come back as Python numbers."""
from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

import gpurisk
from gpurisk import plugins
from gpurisk.measure import checked_result

from conftest import run_cli

FRAME = pd.DataFrame({"k": [1, 2, 2, 3, 3, 3], "s": [0, 0, 1, 1, 0, 1]})

#: name -> (what the measure returns, text the reason must contain; None: a value must come back)
RETURNS = {
    "ret_complex": (lambda: gpurisk.Result(value=1 + 0j), "a complex, not a real number"),
    "ret_np_complex": (lambda: gpurisk.Result(value=np.complex128(0.5)), "a complex"),
    "ret_str": (lambda: gpurisk.Result(value="0.5"), "a str, not a real number"),
    "ret_array": (lambda: gpurisk.Result(value=np.array([0.1, 0.2])), "ndarray of shape (2,)"),
    "ret_bool": (lambda: gpurisk.Result(value=True), "a bool"),
    "ret_np_bool": (lambda: gpurisk.Result(value=np.bool_(False)), "a bool"),
    "ret_nan32": (lambda: gpurisk.Result(value=np.float32("nan")), "NaN without a reason"),
    "ret_inf64": (lambda: gpurisk.Result(value=np.float64("-inf")), "-inf without a reason"),
    "ret_none": (lambda: gpurisk.Result(), "no value and no reason"),
    "ret_se_str": (lambda: gpurisk.Result(value=0.5, se="small"), "a str as se"),
    "ret_se_inf": (lambda: gpurisk.Result(value=0.5, se=math.inf), "inf as se without a reason"),
    "ret_upper_array": (lambda: gpurisk.Result(value=0.5, upper=np.ones(3)), "as upper"),
    "ret_upper_nan": (lambda: gpurisk.Result(value=0.5, upper=np.float32("nan")), "NaN as upper"),
    "ret_extra_array": (lambda: gpurisk.Result(value=0.5, extra={"a": np.arange(3)}), "not JSON"),
    "ret_reason_int": (lambda: gpurisk.Result(reason=3), "a reason of type int"),
    "ret_float": (lambda: 0.5, "float, not a gpurisk.Result"),
    "ret_np_ok": (lambda: gpurisk.Result(value=np.float32(0.25), se=np.float64(0.125),
                                         upper=np.int64(1)), None),
    "ret_0d_ok": (lambda: gpurisk.Result(value=np.array(0.75)), None),
    "ret_nan_reason": (lambda: gpurisk.Result(value=np.float64("nan"), reason="no uniques"), None),
}


class Exits(Exception):
    pass


class CustomBase(BaseException):
    pass


def _measure(name, make):
    def compute(self, table, ctx):
        return make()
    return type(name, (gpurisk.Measure,), {"name": name, "description": "test", "compute": compute})


def _raising(name, exc):
    def compute(self, table, ctx):
        raise exc
    return type(name, (gpurisk.Measure,), {"name": name, "description": "test", "compute": compute})


class _Plugin:
    def __init__(self, classes):
        self.classes = classes

    @gpurisk.hookimpl
    def gpurisk_register_measures(self):
        return list(self.classes)


@pytest.fixture
def registered():
    plugins.reset()
    classes = [_measure(n, make) for n, (make, _) in RETURNS.items()]
    classes.append(_raising("exits_zero", SystemExit(0)))
    classes.append(_raising("exits_custom", CustomBase("odd")))
    plugins.register(_Plugin(classes), name="result-checks")
    yield
    plugins.reset()


def test_each_bad_result_is_its_own_not_applicable_row(registered):
    a = gpurisk.assess(FRAME, ["k"], fraction=0.5, measures=list(RETURNS) + ["theta_hat"])
    for name, (_, expect) in RETURNS.items():
        r = a.measures[name]
        if expect is None:
            continue
        assert r.value is None and r.se is None and r.upper is None, name
        assert expect in r.reason, (name, r.reason)
    ok = a.measures["ret_np_ok"]
    assert (ok.value, ok.se, ok.upper, ok.reason) == (0.25, 0.125, 1, None)
    assert type(ok.value) is float and type(ok.se) is float and type(ok.upper) is int
    assert type(a.measures["ret_0d_ok"].value) is float and a.measures["ret_0d_ok"].value == 0.75
    nr = a.measures["ret_nan_reason"]
    assert type(nr.value) is float and math.isnan(nr.value) and nr.reason == "no uniques"
    assert a.measures["theta_hat"].value is not None and a.measures["theta_hat"].reason is None
    json.dumps(a.to_dict(), allow_nan=False)       # the whole document is JSON


def test_exits_and_odd_base_exceptions_are_isolated(registered):
    a = gpurisk.assess(FRAME, ["k"], fraction=0.5, measures=["exits_zero", "exits_custom", "theta_hat"])
    assert a.measures["exits_zero"].reason == "measure raised SystemExit: 0"
    assert a.measures["exits_custom"].reason == "measure raised CustomBase: odd"
    assert a.measures["theta_hat"].value is not None
    # with a time limit the measure runs in a thread; the exit is still only its own row
    a = gpurisk.assess(FRAME, ["k"], fraction=0.5, measures=["exits_zero", "theta_hat"],
                       measure_timeout=5)
    assert a.measures["exits_zero"].reason == "measure raised SystemExit: 0"


def test_keyboard_interrupt_raised_by_a_measure_is_its_own_failure():
    """Issue 42: a KeyboardInterrupt a measure raises in its thread (Ctrl-C reaches the main
    thread, never a measure's) is that measure's failure; the other measures keep their values
    (it used to end the run, exit 130, the other results lost)."""
    plugins.reset()
    plugins.register(_Plugin([_raising("interrupted", KeyboardInterrupt())]), name="ki")
    try:
        a = gpurisk.assess(FRAME, ["k"], fraction=0.5, measures=["interrupted", "theta_hat"])
        assert a.measures["interrupted"].value is None
        assert a.measures["interrupted"].reason == "measure raised KeyboardInterrupt"
        assert a.measures["theta_hat"].value is not None
    finally:
        plugins.reset()


def test_scan_rows_carry_the_reasons(registered):
    names = ["ret_complex", "ret_str", "ret_array", "ret_se_str", "ret_np_ok", "exits_zero", "theta_hat"]
    r = gpurisk.scan(FRAME, keys=["k", "s"], max_size=2, fraction=0.5, measures=names).results
    assert len(r) == 3
    assert r["ret_complex"].isna().all() and r["ret_complex_reason"].str.contains("a complex").all()
    assert r["ret_str"].isna().all() and r["ret_array_reason"].str.contains("ndarray").all()
    assert r["ret_se_str_reason"].str.contains("as se").all()
    assert (r["ret_np_ok"] == 0.25).all() and (r["ret_np_ok_se"] == 0.125).all()
    assert (r["exits_zero_reason"] == "measure raised SystemExit: 0").all()
    assert r["theta_hat"].notna().any()


def test_checked_result_passes_a_good_result_through():
    r = gpurisk.Result(value=2, extra={"n": np.int64(3)})
    out = checked_result(r)
    assert out.value == 2 and type(out.value) is int and out.reason is None
    assert out.to_dict()["n"] == 3


PLUGIN_SRC = '''
import sys
import numpy as np
import gpurisk

class Cx(gpurisk.Measure):
    name = "toy_complex"
    description = "complex"
    def compute(self, table, ctx):
        return gpurisk.Result(value=complex(1, 0))

class Arr(gpurisk.Measure):
    name = "toy_array"
    description = "array"
    def compute(self, table, ctx):
        return gpurisk.Result(value=np.zeros(4))

class Ex(gpurisk.Measure):
    name = "toy_exit"
    description = "exits"
    def compute(self, table, ctx):
        sys.exit(0)

@gpurisk.hookimpl
def gpurisk_register_measures():
    return [Cx, Arr, Ex]
'''


def test_cli_assess_and_scan_survive_bad_results(tmp_path):
    from _fake_plugin import install
    install(tmp_path, "gpurisk-toy-results", "toyresults", "gpurisk_toy_results", PLUGIN_SRC)
    FRAME.to_csv(tmp_path / "d.csv", index=False)
    env = {"PYTHONPATH": str(tmp_path)}
    p = run_cli("assess", tmp_path / "d.csv", "--keys", "k,s", "--fraction", "0.5", "--json",
                "--measures", "toy_complex,toy_array,toy_exit,theta_hat", env=env, check=True)
    m = json.loads(p.stdout)["measures"]
    assert m["toy_complex"]["value"] is None and "a complex" in m["toy_complex"]["reason"]
    assert m["toy_array"]["value"] is None and "ndarray of shape (4,)" in m["toy_array"]["reason"]
    assert m["toy_exit"]["reason"] == "measure raised SystemExit: 0"
    assert m["theta_hat"]["value"] is not None
    p = run_cli("scan", tmp_path / "d.csv", "--keys", "k,s", "--fraction", "0.5", "--json",
                "--measures", "toy_complex,toy_array,toy_exit,theta_hat", "--output", tmp_path / "out",
                env=env)
    assert p.returncode == 0, p.stderr
    json.loads(p.stdout)
    rows = gpurisk.read_scan(tmp_path / "out")
    assert len(rows) == 3 and rows["toy_complex"].isna().all()
    assert rows["toy_complex_reason"].str.contains("a complex").all()
    assert (rows["toy_exit_reason"] == "measure raised SystemExit: 0").all()
