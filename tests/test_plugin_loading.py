"""Entry-point plugins are loaded by pluggy (``load_setuptools_entrypoints``); one that fails to
import is skipped with one warning line and listed with its error (issue 20); plugins add commands
through ``gpurisk_register_commands`` (issue 15)."""
from __future__ import annotations

import json

import click
import pandas as pd
import pytest
from click.testing import CliRunner

import gpurisk
from gpurisk import plugins

from conftest import run_cli

GOOD_SRC = '''
import click
import gpurisk

class Cells(gpurisk.Measure):
    name = "toy_cells"
    description = "number of sample cells"
    reference = "test plugin"
    options = {"scale": gpurisk.Option(float, 1.0, min=0.0, help="multiplies the count")}

    def compute(self, table, ctx):
        return gpurisk.Result(value=table.sample_cells * ctx.option(self.name, "scale", 1.0))

@gpurisk.hookimpl
def gpurisk_register_measures():
    return [Cells]

@gpurisk.hookimpl
def gpurisk_register_commands(cli):
    @cli.command("toy-hello", help="Say hello to NAME.")
    @click.argument("name")
    def hello(name):
        if name == "bad":
            raise gpurisk.BadInput("toy-hello: 'bad' is not a name")
        click.echo(f"hello {name}")
'''

BROKEN_SRC = '''
import gpurisk_toy_missing_dependency   # not installed: the import fails

@gpurisk.hookimpl
def gpurisk_register_measures():
    return []
'''


def dist(tmp_path, dist_name, ep, module, src, version="0.2"):
    from _fake_plugin import install
    install(tmp_path, dist_name, ep, module, src, version)


@pytest.fixture
def two_plugins(tmp_path, monkeypatch):
    """A good plugin and one whose import fails, installed as entry points on sys.path."""
    yield from _installed(tmp_path, monkeypatch, [("good", GOOD_SRC, "0.2"), ("broken", BROKEN_SRC, "1.4")])


def _installed(tmp_path, monkeypatch, specs):
    """Install toy plugins ``gpurisk-toy-NAME`` (entry point ``toyNAME``) on sys.path; yields the
    folder with a fresh registry, and resets it after."""
    tag = abs(hash(str(tmp_path)))
    for name, src, version in specs:
        dist(tmp_path, f"gpurisk-toy-{name}", f"toy{name}", f"gpurisk_toy_{name}_{tag}", src, version)
    monkeypatch.syspath_prepend(str(tmp_path))
    plugins.reset()
    yield tmp_path
    plugins.reset()


def test_loaded_by_pluggy_with_distribution(two_plugins, capsys):
    pm = plugins.get_plugin_manager()
    names = {pm.get_name(p): d.metadata["name"] for p, d in pm.list_plugin_distributions()}
    assert names == {**names, "toygood": "gpurisk-toy-good"}
    assert "toybroken" not in names
    reg = plugins.measure_registry()
    assert reg["toy_cells"].package == "gpurisk-toy-good" and reg["toy_cells"].version == "0.2"


def test_broken_import_is_skipped_with_one_warning(two_plugins, capsys):
    reg = plugins.measure_registry()
    assert "toy_cells" in reg and "theta_hat" in reg          # the others loaded
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if "toybroken" in ln]
    assert len(lines) == 1
    line = lines[0]
    assert line.startswith("gpurisk: warning: plugin 'toybroken' (gpurisk-toy-broken 1.4)")
    assert "ModuleNotFoundError" in line and "gpurisk_toy_missing_dependency" in line
    assert "GPURISK_BLOCK_PLUGINS=toybroken" in line
    [failed] = plugins.failed_plugins()
    assert (failed.plugin, failed.package, failed.version) == ("toybroken", "gpurisk-toy-broken", "1.4")
    rows = plugins.plugins_list()
    assert {"plugin": "toygood", "package": "gpurisk-toy-good", "version": "0.2"} in rows
    bad = [r for r in rows if r["plugin"] == "toybroken"]
    assert bad and bad[0]["status"] == "failed" and "ModuleNotFoundError" in bad[0]["error"]
    # naming a measure that is not there says which plugin failed
    with pytest.raises(gpurisk.BadInput, match="unknown measure.*'toybroken'.*failed to load"):
        gpurisk.assess(pd.DataFrame({"k": [1, 2]}), ["k"], measures=["broken_measure"])
    with pytest.raises(gpurisk.BadInput, match="unknown measure 'broken_measure'.*'toybroken'"):
        gpurisk.assess(pd.DataFrame({"k": [1, 2]}), ["k"], options={"broken_measure": {"x": 1}})


@pytest.mark.parametrize("block", ["toybroken", "gpurisk-toy-broken"])
def test_blocking_the_broken_plugin_silences_it(two_plugins, monkeypatch, capsys, block):
    monkeypatch.setenv("GPURISK_BLOCK_PLUGINS", block)
    assert "toy_cells" in plugins.measure_registry()
    assert plugins.failed_plugins() == [] and "toybroken" not in capsys.readouterr().err


def test_cli_lists_loaded_and_failed_plugins(two_plugins):
    env = {"PYTHONPATH": str(two_plugins)}
    p = run_cli("plugins", env=env, check=True)
    assert "toygood\tgpurisk-toy-good 0.2" in p.stdout
    assert "toybroken\tgpurisk-toy-broken 1.4\tFAILED: ModuleNotFoundError" in p.stdout
    assert p.stderr.count("\n") == 1 and "GPURISK_BLOCK_PLUGINS=toybroken" in p.stderr
    rows = json.loads(run_cli("plugins", "--json", env=env, check=True).stdout)
    assert {"plugin": "toygood", "package": "gpurisk-toy-good", "version": "0.2"} in rows
    assert any(r["plugin"] == "toybroken" and r.get("status") == "failed" for r in rows)
    rows = json.loads(run_cli("measures", "--json", env=env, check=True).stdout)
    cells = [r for r in rows if r["name"] == "toy_cells"][0]
    assert cells["option_specs"]["scale"]["type"] == "float"
    failed = [r for r in rows if r.get("status") == "failed"]
    assert [(r["plugin"], r["name"]) for r in failed] == [("toybroken", None)]
    table = run_cli("measures", env={**env, "COLUMNS": "300"}, check=True).stdout
    assert "FAILED to load" in table and "toybroken" in table
    # a command still runs; naming the lost plugin's measure is a clear error
    pd.DataFrame({"k": [1, 2, 2]}).to_csv(two_plugins / "d.csv", index=False)
    ok = run_cli("assess", two_plugins / "d.csv", "--keys", "k", "--fraction", "0.5", "--json",
                 "--measures", "theta_hat,toy_cells", env=env, check=True)
    assert json.loads(ok.stdout)["measures"]["toy_cells"]["value"] == 2
    bad = run_cli("assess", two_plugins / "d.csv", "--keys", "k", "--measures", "lost", env=env)
    assert bad.returncode == 2
    assert "unknown measure(s) 'lost'" in bad.stderr and "'toybroken'" in bad.stderr


def test_entry_point_plugin_adds_a_command(two_plugins):
    env = {"PYTHONPATH": str(two_plugins)}
    p = run_cli("--help", env=env, check=True)
    assert "toy-hello" in p.stdout and "Say hello to NAME." in p.stdout
    assert run_cli("toy-hello", "world", env=env, check=True).stdout == "hello world\n"
    bad = run_cli("toy-hello", "bad", env=env)
    assert bad.returncode == 2
    assert bad.stderr.strip().splitlines()[-1] == "gpurisk: error: toy-hello: 'bad' is not a name"
    # autoload off: the command is gone, the built-ins stay
    off = run_cli("--help", env={**env, "GPURISK_DISABLE_PLUGIN_AUTOLOAD": "1"}, check=True)
    assert "toy-hello" not in off.stdout and "assess" in off.stdout


# --- the hook in-process, with plugins registered at run time --------------------------------------
class _Commands:
    @gpurisk.hookimpl
    def gpurisk_register_commands(self, cli):
        @cli.command("toy-echo")
        @click.argument("text")
        def echo(text):
            """Echo TEXT."""
            click.echo(text.upper())


class _Raises:
    @gpurisk.hookimpl
    def gpurisk_register_commands(self, cli):
        @cli.command("half-made")
        def half():
            """Never kept: the hook raises after adding it."""
        raise RuntimeError("no commands today")


class _Replaces:
    @gpurisk.hookimpl
    def gpurisk_register_commands(self, cli):
        @cli.command("assess")
        def fake():
            """Not the real assess."""
            click.echo("fake")


@pytest.fixture
def runtime():
    plugins.reset()
    yield
    plugins.reset()


def test_registered_hook_adds_and_runs_a_command(runtime):
    from gpurisk.cli import cli
    plugins.register(_Commands(), name="toy-commands")
    r = CliRunner().invoke(cli, ["--help"])
    assert r.exit_code == 0 and "toy-echo" in r.output and "Echo TEXT." in r.output
    r = CliRunner().invoke(cli, ["toy-echo", "abc"])
    assert r.exit_code == 0 and r.output == "ABC\n"
    plugins.unregister("toy-commands")       # the command goes with its plugin
    assert "toy-echo" not in CliRunner().invoke(cli, ["--help"]).output


def test_failing_or_replacing_hook_is_isolated(runtime, capsys):
    from gpurisk.cli import cli
    plugins.register(_Raises(), name="toy-raises")
    plugins.register(_Replaces(), name="toy-replaces")
    plugins.register(_Commands(), name="toy-commands")
    names = cli.list_commands(click.Context(cli))
    err = capsys.readouterr().err
    assert "toy-echo" in names and "half-made" not in names
    assert ("gpurisk: warning: plugin 'toy-raises' failed to register its commands and is skipped: "
            "RuntimeError: no commands today; to silence this, uninstall it or set "
            "GPURISK_BLOCK_PLUGINS=toy-raises") in err
    assert "plugin 'toy-replaces' tried to replace the command 'assess'; ignored" in err
    assert cli.get_command(click.Context(cli), "assess").callback.__name__ == "assess"



def test_builtin_commands_come_through_the_command_hook(runtime, monkeypatch):
    from gpurisk.cli import cli
    hooks = plugins.get_plugin_manager().hook.gpurisk_register_commands.get_hookimpls()
    assert "gpurisk.cli.builtin" in [i.plugin_name for i in hooks]
    listed = cli.list_commands(click.Context(cli))
    assert listed == sorted(listed)
    assert {"assess", "scan", "protect", "dis", "record-risk", "suda", "plugins"} <= set(listed)
    # block the built-in plugin: its commands go with it, as a third-party plugin's would
    monkeypatch.setenv("GPURISK_BLOCK_PLUGINS", "gpurisk.cli.builtin")
    plugins.reset()
    assert cli.list_commands(click.Context(cli)) == []
    assert CliRunner().invoke(cli, ["assess", "--help"]).exit_code != 0
    monkeypatch.delenv("GPURISK_BLOCK_PLUGINS")
    plugins.reset()
    assert cli.list_commands(click.Context(cli)) == listed

RAISING_SRC = '''
import gpurisk

@gpurisk.hookimpl
def gpurisk_register_measures():
    raise RuntimeError("hook exploded")
'''

NAMELESS_SRC = '''
import gpurisk

class NoName(gpurisk.Measure):
    description = "a measure class without a name"

    def compute(self, table, ctx):
        return gpurisk.Result(value=1.0)

@gpurisk.hookimpl
def gpurisk_register_measures():
    return [NoName]
'''


@pytest.fixture
def faulty_hooks(tmp_path, monkeypatch):
    """A good plugin, one whose registration hook raises, one that registers a nameless class."""
    yield from _installed(tmp_path, monkeypatch, [("good", GOOD_SRC, "0.2"), ("raising", RAISING_SRC, "0.9"),
                                                  ("nameless", NAMELESS_SRC, "0.1")])


def test_a_hook_that_fails_at_load_time_is_reported_failed_and_the_rest_work(faulty_hooks, capsys):
    reg = plugins.measure_registry()
    assert "toy_cells" in reg and "theta_hat" in reg
    failed = {f.plugin: f for f in plugins.failed_plugins()}
    assert set(failed) == {"toyraising", "toynameless"}
    assert "RuntimeError: hook exploded" in failed["toyraising"].error
    assert "has no name" in failed["toynameless"].error
    err = capsys.readouterr().err
    assert err.count("toyraising") == 2 and err.count("failed to load and is skipped") == 2  # one line each
    rows = plugins.plugins_list()
    status = {r["plugin"]: r.get("status", "loaded") for r in rows}
    assert status["toygood"] == "loaded"
    assert status["toyraising"] == status["toynameless"] == "failed"   # never listed "loaded"
    a = gpurisk.assess(pd.DataFrame({"k": [1, 2, 2]}), ["k"], fraction=0.5,
                       measures=["toy_cells", "sample_uniques"])
    assert a.measures["toy_cells"].value == 2 and a.measures["sample_uniques"].value == 1


def test_cli_runs_beside_a_plugin_whose_hook_fails(faulty_hooks):
    env = {"PYTHONPATH": str(faulty_hooks)}
    pd.DataFrame({"k": [1, 2, 2]}).to_csv(faulty_hooks / "d.csv", index=False)
    p = run_cli("assess", faulty_hooks / "d.csv", "--keys", "k", "--fraction", "0.5", "--json",
                "--measures", "sample_uniques,toy_cells", env=env)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["measures"]["toy_cells"]["value"] == 2
    assert "toyraising" in p.stderr and "toynameless" in p.stderr
    out = run_cli("plugins", env=env, check=True).stdout
    assert "toyraising\tgpurisk-toy-raising 0.9\tFAILED: " in out


# --- a thread a measure leaves running does not keep the process alive (issue 29) ---------------
THREAD_SRC = '''
import threading, time
import gpurisk

class Lingers(gpurisk.Measure):
    name = "toy_lingers"
    description = "sample cells, leaving a non-daemon thread asleep for a minute"
    reference = "test plugin"

    def compute(self, table, ctx):
        threading.Thread(target=time.sleep, args=(60,), name="toy-lingers", daemon=False).start()
        return gpurisk.Result(value=table.sample_cells)

@gpurisk.hookimpl
def gpurisk_register_measures():
    return [Lingers]
'''


def test_a_measures_non_daemon_thread_does_not_keep_the_cli_alive(tmp_path):
    import time
    tag = abs(hash(str(tmp_path)))
    dist(tmp_path, "gpurisk-toy-lingers", "toylingers", f"gpurisk_toy_lingers_{tag}", THREAD_SRC)
    pd.DataFrame({"k": [1, 2, 2, 3]}).to_csv(tmp_path / "d.csv", index=False)
    env = {"PYTHONPATH": str(tmp_path)}
    start = time.monotonic()
    p = run_cli("assess", tmp_path / "d.csv", "--keys", "k", "--fraction", "0.5", "--json",
                "--measures", "toy_lingers", env=env, subprocess=True, timeout=50)
    took = time.monotonic() - start
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["measures"]["toy_lingers"]["value"] == 3   # the output came out whole
    assert took < 30, f"the command waited for the measure's thread ({took:.0f} s)"
