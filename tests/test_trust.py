"""Issue 20, "trust at first use": output a statistician can act on, one flag vocabulary, help on
every option, no internal spec section numbers in what users read."""
from __future__ import annotations

import json
import re

import click
import pytest

from conftest import ROOT, data_path
from _driver import run_many

TESTDATA_KEYS = "urbrur,water,sex,age"


@pytest.fixture(scope="module")
def runs():
    td = str(data_path("sdcmicro/testdata.csv"))
    adult = str(data_path("arx/adult.csv"))
    cmds = {
        "assess": ["assess", td, "--keys", TESTDATA_KEYS, "--fraction", "0.01",
                   "--measures", "indiv_risk,k_anonymity,theta_hat"],
        "assess pop": ["assess", td, "--keys", TESTDATA_KEYS, "--population", td, "--measures",
                       "bethlehem_flag,l_diversity,r1", "--option", "l_diversity.sensitive=roof"],
        "compare": ["compare", adult, "--keys", "sex,age,race", "--fraction", "0.01",
                    "--alt", "age=bands:5", "--alt", "age=bands:10"],
        "compare json": ["compare", adult, "--keys", "sex,age", "--fraction", "0.01",
                         "--alt", "age=bands:10", "--json"],
        "validate": ["validate", td, "--keys", "urbrur,water,sex", "--fractions", "0.1",
                     "--replicates", "5"],
        "dis": ["dis", td, "--keys", "urbrur,water,sex", "--fraction", "0.1", "--perturb",
                "pram:vars=water,p=0.9", "--max-iter", "3"],
    }
    procs = run_many(list(cmds.values()))
    for name, p in zip(cmds, procs):
        assert p.returncode == 0, (name, p.stderr)
    return {name: p.stdout for name, p in zip(cmds, procs)}


def _row(text, name):
    return next(line for line in text.splitlines() if re.match(rf"\W*{name}\s", line))


def test_threshold_measures_print_their_threshold_and_expected_reidentifications(runs):
    ind = _row(runs["assess"], "indiv_risk")
    assert "threshold 0.1: 0 records above" in ind and "expected re-identifications 24.8" in ind
    k = _row(runs["assess"], "k_anonymity")
    assert "k = 3: 674 records (14.7 %) in 502 cells with fewer than k" in k
    assert "threshold 0.001 on Pr(PU)" in _row(runs["assess pop"], "bethlehem_flag")
    assert "l = 2:" in _row(runs["assess pop"], "l_diversity")
    assert "records with risk > 0.1: 330, > 0.5: 274" in _row(runs["assess pop"], "r1")


def test_measure_note_reads_fields_by_name():
    from gpurisk.cli._notes import measure_note
    assert measure_note({"value": 1.0}) == ""
    assert measure_note({"value": 2, "reliable": False}) == "reliable: false"
    assert measure_note({"threshold": 0.2, "records_above_threshold": 7,
                         "expected_reidentifications": 1234.56}) == \
        "threshold 0.2: 7 records above; expected re-identifications 1235"
    assert measure_note({"value": 358.2, "lower": 236.01, "upper": 480.46, "level": 0.95,
                         "interactions": "age x sex, race x sex"}) == \
        "two-sided 95 % interval 236 to 480; main effects + age × sex, race × sex"
    # the one convention (issue 41): the two-sided interval's own fields and level, not the bound
    assert measure_note({"value": 358.2, "lower": 250.0, "upper": 460.0, "level": 0.98,
                         "interval_lower": 236.01, "interval_upper": 480.46,
                         "interval_level": 0.99}) == "two-sided 99 % interval 236 to 480"
    assert measure_note({"value": 0.5, "upper": 0.6}) == ""      # a one-sided bound alone: no interval


def test_compare_says_why_a_cell_has_no_value(runs):
    out = runs["compare"]
    # a measure with no value anywhere (pr_pu without a population) is left out, with its reason;
    # a cell without a value in a measure that has some says why in a footnote
    assert "left out, not applicable here: pr_pu (needs population counts F_j" in out
    assert "—¹ → —¹ → —¹" not in out and "pr_pu: original" not in out
    assert "→ —¹" in out and "—¹ not applicable: no sample cell has f_j = 1 or 2" in out
    doc = json.loads(runs["compare json"])
    assert "needs population counts" in doc["left_out"]["pr_pu"]
    why = [r["not_applicable"] for r in doc["rows"] if "not_applicable" in r]
    assert why and all("no unique match can happen" in w["theta_hat"]["age=bands:10"] for w in why)


def test_validate_and_dis_define_their_symbols(runs):
    legend = next(line for line in runs["validate"].splitlines() if line.startswith("legend:"))
    assert "NMSE = normalised mean squared error" in legend and "error = estimate − true" in legend
    legend = next(line for line in runs["dis"].splitlines() if line.startswith("legend:"))
    assert all(f"{s} = records" in legend for s in "TPF")


def _walk(cmd, path=()):
    """Every command of the tree, plugin commands included (list_commands loads them)."""
    yield path, cmd
    if isinstance(cmd, click.Group):
        ctx = click.Context(cmd)
        for name in cmd.list_commands(ctx):
            yield from _walk(cmd.get_command(ctx, name), path + (name,))


def test_no_internal_spec_sections_in_what_users_read():
    """Users read paper citations (author year, equation), never "SPEC §N" of the internal spec."""
    from gpurisk.cli import cli
    from gpurisk.plugins import measure_registry, perturbation_registry
    texts = []
    for reg in (measure_registry(), perturbation_registry()):
        for r in reg.values():
            texts.append(json.dumps(r.cls.describe(), default=str))
    for path, cmd in _walk(cli):
        texts.append(cmd.help or "")
        texts += [getattr(p, "help", "") or "" for p in cmd.params]
    for f in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        texts.append(f.read_text())
    bad = [t[max(0, t.find("SPEC §") - 60): t.find("SPEC §") + 20] for t in texts if "SPEC §" in t]
    assert not bad, bad


# --- one flag vocabulary ----------------------------------------------------------------------------
def test_every_option_of_every_command_has_help():
    from gpurisk.cli import cli
    missing = [f"{' '.join(path)} {'/'.join(p.opts)}" for path, cmd in _walk(cli)
               for p in cmd.params if isinstance(p, click.Option) and not (p.help or "").strip()]
    assert not missing, missing


def test_every_file_output_is_dash_o():
    """-o/--output writes the command's result file, in every command that writes one."""
    from gpurisk.cli import cli
    writers = {"assess", "scan", "compare", "validate", "record-risk", "report"}
    for path, cmd in _walk(cli):
        opts = {o for p in cmd.params if isinstance(p, click.Option) and not p.hidden for o in p.opts}
        if path and path[-1] in writers:
            assert {"-o", "--output"} <= opts, (path, sorted(opts))
        assert "--html" not in opts and "--thresholds" not in opts, path   # hidden aliases only


@pytest.fixture(scope="module")
def old_spellings(tmp_path_factory):
    d = tmp_path_factory.mktemp("flags")
    td = str(data_path("sdcmicro/testdata.csv"))
    import gpurisk
    gpurisk.scan(td, keys=["urbrur", "water", "sex"], max_size=2, fraction=0.01,
                 output=d / "s.parquet", measures=["theta_hat", "sample_uniques"])
    cmds = [["report", str(d / "s.parquet"), "--html", str(d / "old.html")],
            ["report", str(d / "s.parquet"), "-o", str(d / "new.html")],
            ["report", str(d / "s.parquet")],
            ["record-risk", td, "--keys", "urbrur,water,sex", "--fraction", "0.01", "--json",
             "--thresholds", "0.2,0.6"],
            ["record-risk", td, "--keys", "urbrur,water,sex", "--fraction", "0.01", "--json",
             "--threshold", "0.2", "--threshold", "0.6"]]
    return d, run_many(cmds)


def test_deprecated_spellings_still_work_with_a_warning(old_spellings):
    d, (old, new, none, th_old, th_new) = old_spellings
    assert old.returncode == 0 and new.returncode == 0, (old.stderr, new.stderr)
    assert "--html is deprecated; use -o/--output" in old.stderr
    assert (d / "old.html").exists() and (d / "new.html").exists()
    assert none.returncode == 2 and "Missing option '-o' / '--output'" in none.stderr
    assert th_old.returncode == 0 and "--thresholds is deprecated" in th_old.stderr
    assert json.loads(th_old.stdout)["thresholds"] == json.loads(th_new.stdout)["thresholds"] == [0.2, 0.6]


def test_measures_and_plugins_print_plain_tables_and_json():
    procs = run_many([["measures"], ["plugins"], ["measures", "--json"], ["plugins", "--json"]])
    measures, plugins, mj, pj = procs
    assert all(p.returncode == 0 for p in procs)
    m_lines = measures.stdout.splitlines()
    assert m_lines[0].split("\t")[:2] == ["measure", "needs"]
    assert len(m_lines) - 1 == len(json.loads(mj.stdout))
    assert all(len(line.split("\t")) == 6 for line in m_lines[1:])
    assert "┃" not in measures.stdout and "│" not in measures.stdout
    p_lines = plugins.stdout.splitlines()
    assert p_lines[0] == "plugin\tpackage\tstatus"
    assert len(p_lines) - 1 == len(json.loads(pj.stdout))
