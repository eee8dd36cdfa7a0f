"""``gpurisk losses``: every registered information-loss measure, a third party's included."""
from __future__ import annotations

import json
import os
import textwrap

import pandas as pd

from conftest import ROOT, run_cli

LOSS_SRC = textwrap.dedent('''
    import gpurisk
    from gpurisk.protect import Loss

    class KeysGeneralised(Loss):
        name = "toy_keys_generalised"
        description = "keys above level 0"
        reference = "Toy (2026)"

        def compute(self, node):
            return float(sum(1 for lev in node.levels if lev))

    @gpurisk.hookimpl
    def gpurisk_register_losses():
        return [KeysGeneralised]
''')


def test_losses_lists_builtins_and_a_third_party_loss(tmp_path):
    from _fake_plugin import install
    (tmp_path / "site").mkdir()
    site = install(tmp_path / "site", "gpurisk-toy-loss", "toyloss", "gpurisk_toy_loss_19",
                   LOSS_SRC, "0.7")
    env = {"PYTHONPATH": os.pathsep.join([str(ROOT), str(site)])}
    rows = json.loads(run_cli("losses", "--json", check=True, env=env, subprocess=True).stdout)
    by = {r["name"]: r for r in rows}
    # the built-ins, as their classes describe themselves
    from gpurisk.protect import losses as builtin
    for cls in (builtin.Precision, builtin.NonUniformEntropy, builtin.Discernibility,
                builtin.Suppressed):
        assert by[cls.name]["package"] == "gpurisk"
        assert (by[cls.name]["reference"], by[cls.name]["reads"]) == (cls.reference, cls.reads)
    toy = by["toy_keys_generalised"]
    assert (toy["package"], toy["plugin"], toy["reference"], toy["reads"]) == \
        ("gpurisk-toy-loss", "toyloss", "Toy (2026)", "levels")
    plain = run_cli("losses", check=True, env=env).stdout.splitlines()
    assert plain[0].split("\t") == ["loss", "reads", "reference", "plugin", "description"]
    assert sorted(ln.split("\t")[0] for ln in plain[1:]) == sorted(by)
    # the listed loss is the one --loss selects: (a, b) at (1, 0) meets k >= 2 with one key
    # generalised; the loss the toy computes for it is 1
    df = pd.DataFrame({"a": [1, 1, 2, 3, 4, 4], "b": list("xxxyyy")})
    df.to_csv(tmp_path / "d.csv", index=False)
    (tmp_path / "ha.csv").write_text("1;lo\n2;lo\n3;hi\n4;hi\n")
    out = json.loads(run_cli("protect", tmp_path / "d.csv", "--keys", "a,b", "--hierarchy",
                             f"a={tmp_path / 'ha.csv'}", "--criterion", "k_anonymity>=2",
                             "--loss", "toy_keys_generalised", "--json", check=True,
                             env=env).stdout)
    assert out["node"] == {"a": 1, "b": 0}
    assert out["optimum"][0]["toy_keys_generalised"] == 1.0
    # without the plugin, the loss is unknown: one line naming the registered ones
    proc = run_cli("protect", tmp_path / "d.csv", "--keys", "a,b", "--criterion",
                   "k_anonymity>=1", "--loss", "toy_keys_generalised")
    assert proc.returncode == 2 and "unknown loss 'toy_keys_generalised'" in proc.stderr
    assert "toy_keys_generalised" not in run_cli("losses", check=True).stdout
