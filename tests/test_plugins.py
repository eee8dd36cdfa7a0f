"""The pluggy registry: built-ins and entry-point plugins registered alike, disable, block, clashes."""
from __future__ import annotations

import textwrap

import pandas as pd
import pytest

import gpurisk
from gpurisk import plugins
from gpurisk.errors import PluginError

from conftest import run_cli

BUILTINS = {"theta_hat", "theta", "pr_pu", "pr_pu_su", "match_prob_a", "theta_hat_dis"}

PLUGIN_SRC = '''
import gpurisk

class CellCount(gpurisk.Measure):
    name = "{name}"
    description = "number of sample cells"
    reference = "test plugin"

    def compute(self, table, ctx):
        return gpurisk.Result(value=float(table.sample_cells))

class Broken(gpurisk.Measure):
    name = "{name}_broken"
    description = "always raises"

    def compute(self, table, ctx):
        raise RuntimeError("boom")

@gpurisk.hookimpl
def gpurisk_register_measures():
    return [CellCount, Broken]
'''


def make_plugin(tmp_path, dist="gpurisk-toy", module=None, ep="toy", name="toy_cells"):
    module = module or f"gpurisk_toy_{abs(hash(str(tmp_path)))}"  # fresh module per test
    from _fake_plugin import install
    return install(tmp_path, dist, ep, module, PLUGIN_SRC.format(name=name), "0.3")


@pytest.fixture
def fresh_registry(monkeypatch):
    plugins.reset()
    yield
    plugins.reset()


def test_builtins_are_registered_through_the_hook(fresh_registry):
    reg = plugins.measure_registry()
    assert BUILTINS <= set(reg)
    for name in BUILTINS:
        assert reg[name].package == "gpurisk"
        assert reg[name].plugin.startswith("gpurisk.measures.")
        d = reg[name].cls.describe()
        assert d["description"] and d["reference"]


def test_entry_point_plugin_loads_and_runs(tmp_path, monkeypatch, fresh_registry):
    monkeypatch.syspath_prepend(str(make_plugin(tmp_path)))
    reg = plugins.measure_registry()
    assert reg["toy_cells"].package == "gpurisk-toy" and reg["toy_cells"].version == "0.3"
    r = gpurisk.assess(pd.DataFrame({"k": [1, 1, 2]}), ["k"], fraction=0.5)
    assert r.measures["toy_cells"].value == 2.0
    # a measure that raises is reported in its own reason; the others are still computed
    assert "RuntimeError: boom" in r.measures["toy_cells_broken"].reason
    assert r.measures["theta_hat"].value == pytest.approx(0.5 / (0.5 + 2 * 0.5 * 1))
    assert {"plugin": "toy", "package": "gpurisk-toy", "version": "0.3"} in plugins.plugins_list()


def test_autoload_can_be_disabled(tmp_path, monkeypatch, fresh_registry):
    monkeypatch.syspath_prepend(str(make_plugin(tmp_path)))
    monkeypatch.setenv("GPURISK_DISABLE_PLUGIN_AUTOLOAD", "1")
    reg = plugins.measure_registry()
    assert "toy_cells" not in reg and BUILTINS <= set(reg)


@pytest.mark.parametrize("blocked", ["toy", "gpurisk-toy"])
def test_named_plugins_can_be_blocked(tmp_path, monkeypatch, fresh_registry, blocked):
    monkeypatch.syspath_prepend(str(make_plugin(tmp_path)))
    monkeypatch.setenv("GPURISK_BLOCK_PLUGINS", f"nothing,{blocked}")
    assert "toy_cells" not in plugins.measure_registry()


def test_builtin_can_be_blocked(monkeypatch, fresh_registry):
    monkeypatch.setenv("GPURISK_BLOCK_PLUGINS", "gpurisk.measures.theta_hat_dis")
    assert "theta_hat_dis" not in plugins.measure_registry()


def test_duplicate_measure_name_names_both_plugins(tmp_path, monkeypatch, fresh_registry):
    monkeypatch.syspath_prepend(str(make_plugin(tmp_path, name="theta_hat")))
    with pytest.raises(PluginError, match="'theta_hat' is registered twice.*gpurisk.measures.theta_hat.*'toy'"):
        plugins.measure_registry()


def test_misspelt_hook_is_an_error(tmp_path, monkeypatch, fresh_registry):
    from _fake_plugin import install
    install(tmp_path, "typo", "typo", "typo_mod", textwrap.dedent('''
        import gpurisk
        @gpurisk.hookimpl
        def gpurisk_register_measure():
            return []
    '''))
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(PluginError, match="unknown hook"):
        plugins.get_plugin_manager()


def test_measure_returning_wrong_type_or_bare_nan_is_reported(fresh_registry):
    class Wrong(gpurisk.Measure):
        name = "wrong_type"

        def compute(self, table, ctx):
            return 0.5

    class BareNaN(gpurisk.Measure):
        name = "bare_nan"

        def compute(self, table, ctx):
            return gpurisk.Result(value=float("nan"))

    class P:
        @gpurisk.hookimpl
        def gpurisk_register_measures(self):
            return [Wrong, BareNaN]

    plugins.register(P(), name="runtime")
    r = gpurisk.assess(pd.DataFrame({"k": [1, 2]}), ["k"], fraction=0.1)
    assert "not a gpurisk.Result" in r.measures["wrong_type"].reason
    assert "NaN without a reason" in r.measures["bare_nan"].reason


def test_cli_lists_third_party_plugin(tmp_path):
    make_plugin(tmp_path)
    out = run_cli("measures", "--json", env={"PYTHONPATH": f"{tmp_path}"}, check=True, subprocess=True)
    # PYTHONPATH from env replaces the repo root; run_cli prepends the root again
    assert '"toy_cells"' in out.stdout and '"gpurisk-toy"' in out.stdout
    out = run_cli("plugins", env={"PYTHONPATH": f"{tmp_path}"}, check=True, subprocess=True)
    assert "gpurisk-toy 0.3" in out.stdout
