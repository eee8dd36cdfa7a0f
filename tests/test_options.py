"""Typed measure options (issue 15): declared with gpurisk.Option (or inferred from a plain default),
checked before anything is read (unknown measure, unknown option, wrong type, out of range: one
BadInput line, exit 2), and handed to the measures converted."""
from __future__ import annotations

import json

import pandas as pd
import pytest

import gpurisk
from gpurisk import BadInput, Option, plugins
from gpurisk.plugins import check_options
from gpurisk.options import OptionSpecs, option_specs

from conftest import run_cli

FRAME = pd.DataFrame({"k": [1, 2, 2, 3, 3, 3], "s": [0, 1, 1, 0, 0, 1]})


class Seen(gpurisk.Measure):
    """Returns nothing useful: records the options it was given, with their types."""

    name = "seen_opts"
    description = "records its options"
    reference = "test"
    options = {"n": Option(int, 10, min=1, max=100, help="a count"),
               "p": Option(float, 0.5, min=0.0, max=1.0, min_open=True),
               "mode": Option(str, "a", choices=("a", "b")),
               "flag": Option(bool, False),
               "cuts": Option(list, [0.1], item=float, min=0.0, max=1.0),
               "label": "x",          # plain defaults: types inferred
               "count": 3,
               "anything": None}
    last: dict = {}

    def compute(self, table, ctx):
        Seen.last = {k: ctx.option(self.name, k, d) for k, d in self.options.items()}
        return gpurisk.Result(value=1.0)


class _P:
    @gpurisk.hookimpl
    def gpurisk_register_measures(self):
        return [Seen]


@pytest.fixture
def seen():
    plugins.reset()
    plugins.register(_P(), name="seen-plugin")
    Seen.last = {}
    yield Seen
    plugins.reset()


def test_options_keep_their_defaults_and_declarations():
    assert isinstance(Seen.options, OptionSpecs)
    assert Seen.options["n"] == 10 and Seen.options["label"] == "x" and dict(Seen.options)["p"] == 0.5
    specs = option_specs(Seen)
    assert specs["n"].type is int and specs["label"].type is str and specs["count"].type is int
    assert specs["anything"].type is None and Seen.options.inferred == {"label", "count", "anything"}
    d = Seen.describe()
    assert d["options"]["n"] == 10
    assert d["option_specs"]["n"] == {"type": "int", "default": 10, "min": 1, "max": 100,
                                      "min_open": False, "max_open": False, "choices": None,
                                      "range": "[1, 100]", "help": "a count"}
    assert d["option_specs"]["p"]["range"] == "(0, 1]"
    assert d["option_specs"]["cuts"]["type"] == "list of float"
    json.dumps(d)


def test_values_reach_the_measure_converted(seen):
    gpurisk.assess(FRAME, ["k"], measures=["seen_opts"],
                   options={"seen_opts": {"n": 5.0, "p": 1, "mode": "b", "flag": 1, "cuts": 0.5,
                                          "label": 7, "count": 4.0, "anything": [1, "x"]}})
    got = Seen.last
    assert got == {"n": 5, "p": 1.0, "mode": "b", "flag": True, "cuts": [0.5], "label": "7",
                   "count": 4, "anything": [1, "x"]}
    assert type(got["n"]) is int and type(got["p"]) is float and type(got["count"]) is int


@pytest.mark.parametrize("options, message", [
    ({"nosuch": {"K": 3}}, "option for unknown measure 'nosuch'"),
    ({"seen_opts": {"nn": 5}}, r"unknown option seen_opts.nn; seen_opts takes n \(int\), p \(float\)"),
    ({"seen_opts": {"n": "abc"}}, r"option seen_opts.n='abc' is not an int \(expected int in \[1, 100\]\)"),
    ({"seen_opts": {"n": 2.5}}, "seen_opts.n=2.5 is not an int"),
    ({"seen_opts": {"n": True}}, "seen_opts.n=True is not an int"),
    ({"seen_opts": {"n": 1e30}}, r"seen_opts.n=1e\+30 is out of range \(expected int in \[1, 100\]\)"),
    ({"seen_opts": {"n": 0}}, "seen_opts.n=0 is out of range"),
    ({"seen_opts": {"n": None}}, "seen_opts.n=None is not an int"),
    ({"seen_opts": {"p": 0}}, r"seen_opts.p=0 is out of range \(expected float in \(0, 1\]\)"),
    ({"seen_opts": {"p": float("nan")}}, "seen_opts.p=nan is not a float"),
    ({"seen_opts": {"p": "0.5"}}, "seen_opts.p='0.5' is not a float"),
    ({"seen_opts": {"mode": "c"}}, "seen_opts.mode='c' is not one of a, b"),
    ({"seen_opts": {"flag": "maybe"}}, "seen_opts.flag='maybe' is not a bool"),
    ({"seen_opts": {"cuts": [0.5, 2]}}, r"seen_opts.cuts=\[0.5, 2\] is out of range"),
    ({"seen_opts": {"cuts": ["a"]}}, "seen_opts.cuts=\\['a'\\] is not a list of float"),
    ({"seen_opts": {"count": 1.5}}, "seen_opts.count=1.5 is not an int"),
    ({"seen_opts": 3}, "options of 'seen_opts' must be a mapping"),
])
def test_bad_options_are_one_line_bad_input(seen, options, message):
    with pytest.raises(BadInput, match=message) as info:
        check_options(options)
    assert "\n" not in str(info.value)


def test_checked_before_anything_is_read(seen, tmp_path):
    missing = tmp_path / "no-such-file.csv"     # reading it would be a different error
    with pytest.raises(BadInput, match="seen_opts.n='abc'"):
        gpurisk.assess(missing, ["k"], options={"seen_opts": {"n": "abc"}})
    with pytest.raises(BadInput, match="unknown option seen_opts.nn"):
        gpurisk.scan(missing, keys=["k"], options={"seen_opts": {"nn": 1}})
    with pytest.raises(BadInput, match="option for unknown measure 'nosuch'"):
        gpurisk.validate(missing, ["k"], options={"nosuch": {"K": 1}})


def test_shared_namespaces_are_checked_too():
    assert check_options({"kim_jeong": {"p_f2": 0.5}}) == {"kim_jeong": {"p_f2": 0.5}}
    with pytest.raises(BadInput, match=r"kim_jeong.p_f2=1.5 is out of range \(expected float in \(0, 1\]\)"):
        check_options({"kim_jeong": {"p_f2": 1.5}})
    with pytest.raises(BadInput, match="unknown option kim_jeong.K"):
        check_options({"kim_jeong": {"K": 1}})
    assert check_options({"record_risk": {"thresholds": [0.2, 0.9]}, "r3": {"y": 10}}) == \
        {"record_risk": {"thresholds": [0.2, 0.9]}, "r3": {"y": 10.0}}


def test_every_builtin_and_classic_option_is_declared():
    reg = plugins.measure_registry()
    checked = 0
    for name, r in reg.items():
        if r.package not in ("gpurisk", "gpurisk-classic", "gpurisk-arx"):
            continue
        assert not getattr(r.cls.options, "inferred", frozenset()), (name, r.cls.options.inferred)
        for key, spec in option_specs(r.cls).items():
            assert isinstance(spec, Option) and (spec.type is not None or spec.help), (name, key)
            checked += 1
    assert checked >= 20


@pytest.mark.parametrize("option, message", [
    ("theta_hat_dis.K=abc", "option theta_hat_dis.K='abc' is not an int (expected int in [1, "),
    ("theta_hat_dis.K=1e30", "option theta_hat_dis.K=1e30 is out of range (expected int in [1, "),
    ("nosuch.K=3", "option for unknown measure 'nosuch'"),
    ("theta_hat_dis.KK=5", "unknown option theta_hat_dis.KK; theta_hat_dis takes K (int)"),
    ("tau1_hat.smoothing=gauss", "option tau1_hat.smoothing='gauss' is not one of binomial, poisson, none"),
])
def test_cli_rejects_bad_options_before_reading(tmp_path, option, message):
    p = run_cli("assess", tmp_path / "missing.csv", "--keys", "k", "--fraction", "0.1",
                "--option", option)
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.count("\n") == 1 and p.stderr.startswith("gpurisk: error: ") and message in p.stderr
    p = run_cli("scan", tmp_path / "missing.csv", "--keys", "k", "--fraction", "0.1", "--option", option)
    assert p.returncode == 2 and message in p.stderr


def test_cli_str_option_keeps_the_text_and_good_values_run(seen, tmp_path):
    FRAME.to_csv(tmp_path / "d.csv", index=False)
    p = run_cli("assess", tmp_path / "d.csv", "--keys", "k", "--fraction", "0.5", "--json",
                "--measures", "theta_hat_dis", "--option", "theta_hat_dis.K=1e4", check=True)
    assert json.loads(p.stdout)["measures"]["theta_hat_dis"]["K"] == 10000
    # a str option keeps the text as typed (JSON would read "05" as 5); messages quote the text
    assert check_options({"seen_opts": {"label": 5}}, texts={("seen_opts", "label"): "05"}) \
        == {"seen_opts": {"label": "05"}}
    with pytest.raises(BadInput, match="seen_opts.mode=05 is not one of a, b"):
        check_options({"seen_opts": {"mode": 5}}, texts={("seen_opts", "mode"): "05"})


def test_cli_measures_lists_option_types():
    rows = {r["name"]: r for r in json.loads(run_cli("measures", "--json", check=True).stdout)}
    spec = rows["theta_hat_dis"]["option_specs"]["K"]
    assert spec["type"] == "int" and spec["default"] == 200_000 and spec["min"] == 1
    assert rows["tau1_hat"]["option_specs"]["smoothing"]["choices"] == ["binomial", "poisson", "none"]
    assert rows["risk_fishing"]["shared_options"] == "kim_jeong"
    table = run_cli("measures", env={"COLUMNS": "400"}, check=True).stdout
    assert "K: int = 200000 [1, 1000000000000]" in table
