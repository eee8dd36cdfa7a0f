"""Every workflow on the same settings, in one place (issue 29).

Each command's workflow lives in ``gpurisk/workflows/<command>.py`` and has a ``*_with`` form that
takes the settings objects (:class:`gpurisk.core.settings.Design`, ``Run``, ``Reading``) instead of
listing their fields one by one; the keyword conveniences (``gpurisk.scan(frame, keys, fraction=...)``)
are thin wrappers that build the settings and call it. Every command that reads records builds its
settings from the option groups of ``gpurisk/cli/_common.py``.
"""
from __future__ import annotations

import dataclasses
import importlib
import inspect
import pkgutil
import re

import numpy as np
import pandas as pd
import pytest

import gpurisk
from conftest import ROOT
from gpurisk.core.settings import Design, Reading, Run
from gpurisk.inputs import Inputs

#: command -> (module under gpurisk.workflows, its keyword convenience, its settings form)
WORKFLOWS = {
    "assess": ("assess", "assess", "assess_with"),
    "scan": ("scan", "scan", "scan_with"),
    "compare": ("compare", "compare", "compare_with"),
    "validate": ("validate", "validate", "validate_with"),
    "protect": ("protect", "protect", "protect_with"),
    "dis": ("dis", "dis", "dis_with"),
    "design": ("design", "design_report", "design_report_with"),
    "record-risk": ("record_risk", "record_risk", "record_risk_with"),
    "suda": ("suda", "suda", "suda_with"),
}
#: the thin keyword conveniences, the only functions of gpurisk.workflows that list the fields, and
#: headline_of, whose ``measures`` are an assessment's results and ``alpha`` the level it shows
EXEMPT = {conv for _, conv, _ in WORKFLOWS.values()} | {"headline_of"}

SETTINGS = {"design": Design, "run": Run, "reading": Reading}
#: the fields the settings objects hold (and Inputs' reading fields): no workflow lists them
FIELDS = ({f.name for cls in SETTINGS.values() for f in dataclasses.fields(cls)}
          | {f.name for f in dataclasses.fields(Inputs)} - {"data", "keys", "columns", "role"})


def _workflow_functions():
    import gpurisk.workflows as pkg
    for info in pkgutil.iter_modules(pkg.__path__):
        mod = importlib.import_module(f"gpurisk.workflows.{info.name}")
        for name, fn in vars(mod).items():
            fn = inspect.unwrap(fn) if callable(fn) else fn
            if inspect.isfunction(fn) and fn.__module__ == mod.__name__ and not name.startswith("_"):
                yield mod.__name__, name, fn


def test_the_field_list_is_what_the_issue_names():
    for name in ("fraction", "population", "sample_flag", "weights", "alpha", "seed", "measures",
                 "options", "measure_timeout", "backend", "missing", "recode", "sep", "encoding",
                 "allow_high_cardinality"):
        assert name in FIELDS, name


def test_every_command_has_its_workflow_in_one_place():
    for cmd, (module, conv, form) in WORKFLOWS.items():
        mod = importlib.import_module(f"gpurisk.workflows.{module}")
        assert callable(getattr(mod, conv, None)), (cmd, conv)
        assert callable(getattr(mod, form, None)), (cmd, form)
        params = inspect.signature(inspect.unwrap(getattr(mod, form))).parameters
        # the settings come right after the data (and keys), positionally, before the options
        # (validate's keyword ``design`` is its replicate design, a text of its own)
        taken = [p for p, v in params.items()
                 if p in SETTINGS and v.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD]
        assert "reading" in taken and ({"design", "run"} & set(taken)), (cmd, list(params))


def test_no_workflow_lists_the_settings_fields_one_by_one():
    found = {}
    for mod, name, fn in _workflow_functions():
        if name in EXEMPT:
            continue
        listed = sorted(set(inspect.signature(fn).parameters) & FIELDS)
        if listed:
            found[f"{mod}.{name}"] = listed
    assert not found, f"workflows listing settings fields one by one: {found}"


def test_the_conveniences_are_thin_wrappers_of_the_settings_forms():
    for cmd, (module, conv, form) in WORKFLOWS.items():
        fn = inspect.unwrap(getattr(importlib.import_module(f"gpurisk.workflows.{module}"), conv))
        src = inspect.getsource(fn)
        body = src[src.index('"""', src.index('"""') + 3):]          # after the docstring
        assert f"return {form}(" in body, cmd
        assert len([ln for ln in body.splitlines() if ln.strip()]) <= 16, (cmd, "not thin")


def test_the_public_paths_hand_on_the_same_functions():
    from gpurisk.workflows import compare, dis, protect, record_risk, scan, validate
    old = {p: importlib.import_module(p) for p in ("gpurisk.dis.workflow", "gpurisk.models.record_risk",
                                                   "gpurisk.protect.workflow", "gpurisk.scan.compare",
                                                   "gpurisk.protect", "gpurisk.dis", "gpurisk.scan",
                                                   "gpurisk.validation")}
    assert gpurisk.validate is validate.validate is old["gpurisk.validation"].validate
    assert gpurisk.scan is scan.scan is old["gpurisk.scan"].scan
    assert old["gpurisk.scan"].scan_with is scan.scan_with
    assert gpurisk.record_risk is record_risk.record_risk is old["gpurisk.models.record_risk"].record_risk
    assert old["gpurisk.scan.compare"].compare is compare.compare
    assert old["gpurisk.protect"].protect is protect.protect is old["gpurisk.protect.workflow"].protect
    assert gpurisk.dis.dis is dis.dis is old["gpurisk.dis.workflow"].dis


# --- the command line: the settings from the shared groups ------------------------------------------

READING_FLAGS = ["--sep", "--encoding", "--missing", "--recode", "--backend",
                 "--allow-high-cardinality"]
#: the commands that read records
READERS = list(WORKFLOWS)


def test_reading_flags_are_declared_once():
    text = "\n".join(p.read_text() for p in (ROOT / "gpurisk" / "cli").glob("*.py"))
    for flag in READING_FLAGS:
        assert len(re.findall(rf'"{flag}"', text)) == 1, flag


def test_every_command_that_reads_records_builds_its_settings_from_the_groups():
    from gpurisk.cli import cli
    cli.load_plugin_commands()
    for cmd in READERS:
        command = cli.commands[cmd]
        flags = {o for p in command.params for o in p.opts}
        assert {"--sep", "--encoding", "--missing", "--backend"} <= flags, cmd
        params = set(inspect.signature(inspect.unwrap(command.callback)).parameters)
        assert "reading" in params, (cmd, sorted(params))
        listed = sorted(params & FIELDS)
        assert not listed, f"gpurisk {cmd} receives settings fields one by one: {listed}"


# --- the settings forms give what the conveniences give ---------------------------------------------

@pytest.fixture(scope="module")
def frame():
    rng = np.random.default_rng(5)
    return pd.DataFrame({"a": rng.integers(0, 25, 600), "b": rng.integers(0, 4, 600),
                         "c": rng.integers(0, 3, 600)})


def test_every_workflow_imports_first_in_a_fresh_process():
    """A workflow module imported before its package (the command line does): no circle. One
    process; gpurisk's modules are dropped from sys.modules before each workflow is imported."""
    import subprocess
    import sys
    mods = [f"gpurisk.workflows.{module}" for module, _, _ in WORKFLOWS.values()]
    code = ("import importlib, sys\n"
            f"for m, form in {[(m, f) for m, (_, _, f) in zip(mods, WORKFLOWS.values())]!r}:\n"
            "    for k in [k for k in sys.modules if k == 'gpurisk' or k.startswith('gpurisk.')]:\n"
            "        del sys.modules[k]\n"
            "    getattr(importlib.import_module(m), form)\n"
            "    print(m)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                         timeout=300)
    assert out.returncode == 0 and out.stdout.split() == mods, out.stderr[-800:]


def test_settings_forms_equal_the_keyword_calls(frame):
    from gpurisk.workflows import compare, design, dis, record_risk, suda, validate
    reading = Reading(missing="category", recode=["a=bands:5"])
    d = Design(fraction=0.2)
    a = compare.compare_with(frame, "a,b", d, Run(measures="theta_hat"), reading,
                             alternatives=["b=breaks:2"], max_size=2)
    b = compare.compare(frame, "a,b", ["b=breaks:2"], max_size=2, fraction=0.2,
                                     measures=["theta_hat"], recode=["a=bands:5"])
    pd.testing.assert_frame_equal(a.table, b.table)
    r1 = record_risk.record_risk_with(frame, "a,b,c", d, reading).to_dict()
    r2 = gpurisk.record_risk(frame, "a,b,c", fraction=0.2, recode=["a=bands:5"]).to_dict()
    assert r1 == r2
    s1 = suda.suda_with(frame, "a,b,c", d, reading).summary
    s2 = gpurisk.suda(frame, "a,b,c", fraction=0.2, recode=["a=bands:5"]).summary
    assert s1 == s2
    g1 = design.design_report_with(frame, "a,b", d, reading)
    g2 = design.design_report(frame, "a,b", fraction=0.2, recode=["a=bands:5"])
    assert g1 == g2
    x1 = dis.dis_with(frame, "a,b", d, Run(seed=3), reading, perturb=["pram:p=0.9,vars=b"],
                      max_iter=5).to_dict()
    x2 = gpurisk.dis.dis(frame, "a,b", 0.2, ["pram:p=0.9,vars=b"], max_iter=5, seed=3,
                         recode=["a=bands:5"]).to_dict()
    assert x1 == x2
    pop = pd.concat([frame] * 5, ignore_index=True)
    v1 = validate.validate_with(pop, "a,b", Run(measures="theta_hat", seed=2), fractions=[0.2],
                                replicates=3)
    v2 = gpurisk.validate(pop, "a,b", fractions=[0.2], replicates=3, measures=["theta_hat"], seed=2)
    pd.testing.assert_frame_equal(v1.summary, v2.summary)


def test_settings_forms_refuse_what_the_command_cannot_use(frame):
    from gpurisk.errors import BadInput
    from gpurisk.workflows import design, dis, protect
    with pytest.raises(BadInput, match="dis takes the sampling fraction f only"):
        dis.dis_with(frame, "a,b", Design(fraction=0.2, weights="c"), Run(), perturb=["pram:p=0.9"])
    with pytest.raises(BadInput, match="dis needs the sampling fraction"):
        dis.dis_with(frame, "a,b", Design(), Run(), perturb=["pram:p=0.9"])
    with pytest.raises(BadInput, match="design takes a sampling fraction or design weights"):
        design.design_report_with(frame, "a,b", Design(population=frame))
    with pytest.raises(BadInput, match="protect recodes the keys through its hierarchies"):
        protect.protect_with(frame, "a,b", Design(fraction=0.2), Run(), Reading(recode=["a=bands:5"]),
                             hierarchies=["a=bands:10"], criteria=["theta_hat.upper<=0.9"])


def test_reading_checks_its_fields_in_the_one_format():
    from gpurisk.errors import BadInput
    with pytest.raises(BadInput, match=r"^missing='drop' is not one of category, error$") as e:
        Reading(missing="drop")
    assert e.value.cli_message() == "--missing 'drop' is not one of category, error"
    with pytest.raises(BadInput, match=r"^allow_high_cardinality='yes' is not True or False$") as e:
        Reading(allow_high_cardinality="yes")
    assert e.value.cli_message() == "--allow-high-cardinality 'yes' is not True or False"
    assert Reading(recode=None).recode == ()
    assert Reading(allow_high_cardinality=1).allow_high_cardinality is True
    assert Reading(allow_high_cardinality=np.bool_(True)).allow_high_cardinality is True
