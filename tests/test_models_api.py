"""gpurisk.models' public API (issue 43: the plugins use it, not the modules under it)."""
from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

import gpurisk.models as models

ROOT = Path(__file__).resolve().parents[1]


def test_every_public_name_is_the_object_of_its_module():
    assert models.__all__ == sorted(models._PUBLIC)
    for name, (module, attr) in models._PUBLIC.items():
        assert getattr(models, name) is getattr(importlib.import_module(module), attr), name
    assert models.choose_eb_forest is importlib.import_module("gpurisk.models.eb_forest").choose
    assert set(models.__all__) <= set(dir(models))
    with pytest.raises(AttributeError, match="no attribute 'choose'"):
        models.choose                                   # noqa: B018


def _model_imports(path: Path):
    """(line, what) of every import of gpurisk.models or a module under it in ``path``."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and \
                node.module.startswith("gpurisk.models"):
            yield node.lineno, node.module, [a.name for a in node.names]
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("gpurisk.models"):
                    yield node.lineno, a.name, []


def test_the_shipped_plugins_import_only_the_public_api():
    sources = sorted(ROOT.glob("plugins/*/src/**/*.py"))
    assert len(sources) > 5                 # the two plugin packages are there
    seen = []
    for path in sources:
        for line, module, names in _model_imports(path):
            where = f"{path.relative_to(ROOT)}:{line}"
            assert module == "gpurisk.models", f"{where} imports {module}, not gpurisk.models"
            assert names and set(names) <= set(models.__all__), f"{where}: {names}"
            seen += names
    # the plugin's N1 uses the forests and margins through the API (so the test reads real imports)
    assert {"Margins", "choose_eb_forest", "choose_forest", "category_ranks"} <= set(seen)


def test_a_submodule_import_is_found(tmp_path):
    """The check above can fail: an import of a module under gpurisk.models is reported."""
    src = tmp_path / "p.py"
    src.write_text("from gpurisk.models.forest import Margins\nimport gpurisk.models.eb_forest\n"
                   "from gpurisk.models import Margins\n", encoding="utf-8")
    got = list(_model_imports(src))
    assert [m for _, m, _ in got] == ["gpurisk.models.forest", "gpurisk.models.eb_forest",
                                      "gpurisk.models"]


def test_a_plugin_gets_the_headline_from_loglinear_estimate():
    """``gpurisk.models.loglinear_estimate`` with options of the caller's own (a plain dict, the
    measures' defaults) gives what matches_ll and tau1_ll report; a fit it cannot form is a reason,
    not a number."""
    import pandas as pd

    from gpurisk.freq.engine import build_table
    from gpurisk.measure import Context
    from gpurisk.measures.matches_ll import MatchesLL
    from gpurisk.measures.tau1_ll import Tau1LL
    from conftest import data_path
    frame = pd.read_csv(data_path("uci_adult/adult_full_48842.csv"))
    table = build_table(frame, ["age", "sex", "race", "marital-status"])
    for cls, kind in ((MatchesLL, "inverse"), (Tau1LL, "tau1")):
        options = {k: spec.default for k, spec in cls.options.specs.items()}
        got = models.loglinear_estimate(table, 0.01, kind, options.__getitem__, 0.01)
        want = cls().compute(table, Context(fraction=0.01))
        assert got.reason is None and got.value > 0
        assert (got.value, got.se, got.upper) == (want.value, want.se, want.upper)
        assert got.extra["interval_upper"] == want.extra["interval_upper"]
    small = dict(options, model="two_way", max_cells=10.0)
    none = models.loglinear_estimate(table, 0.01, "inverse", small.__getitem__, 0.01)
    assert none.value is None and "not available" in none.reason
