"""The backend registry (issue 29): one object per backend, asked instead of its name.

- no module outside the registry (``gpurisk/backends/``) compares a backend's name: a scan of the
  source of ``gpurisk/`` and ``plugins/*/src`` (the scanner is shown to find a planted comparison);
- a backend is added in one place: a toy ``pandas-copy`` backend registered here counts through the
  pandas path and runs ``gpurisk.assess`` and ``gpurisk assess`` end to end, with pandas' answers;
- the GPU backends are registered lazily: importing gpurisk, looking the GPU backends up and counting
  a pandas frame imports none of cuDF, CuPy, dask-cuda, dask-cudf (fake modules of those names on the
  path record any import).
"""
from __future__ import annotations

import ast
import dataclasses
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import gpurisk
from conftest import ROOT, data_path, run_cli
from gpurisk import backends
from gpurisk.backends import Backend, get_backend, register, unregister
from gpurisk.errors import BadInput

#: the registry: the only modules that may compare backend names
REGISTRY = ROOT / "gpurisk" / "backends"
NAMES = set(backends.names(listed_only=False))


def _about_a_backend(node) -> bool:
    return "backend" in ast.unparse(node).lower()


def _string_constants(node) -> set[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return {e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)}
    return set()


def _about_a_module(node) -> bool:
    """``type(x).__module__ ... == "pandas"`` compares a module's name, not a backend's."""
    return any(isinstance(n, ast.Attribute) and n.attr == "__module__" for n in ast.walk(node))


def name_comparisons(source: str, filename: str = "<src>") -> list[tuple[int, str]]:
    """(line, names) of each comparison (``==``, ``!=``, ``in``, ``not in``) of a backend name."""
    found = []
    for node in ast.walk(ast.parse(source, filename=filename)):
        if not isinstance(node, ast.Compare):
            continue
        operands = [node.left, *node.comparators]
        strings = set().union(*map(_string_constants, operands))
        names = strings & NAMES
        if "auto" in strings and any(map(_about_a_backend, operands)):   # "auto" is a measure
            names.add("auto")                                         # option's value too
        if names and not any(_about_a_module(o) for o in operands):
            found.append((node.lineno, ", ".join(sorted(names))))
    return found


def _sources():
    yield from (ROOT / "gpurisk").rglob("*.py")
    for src in (ROOT / "plugins").glob("*/src"):
        yield from src.rglob("*.py")


def test_the_scanner_finds_a_name_compared():
    src = textwrap.dedent('''
        def f(inp, name, a):
            gpu = inp.backend == "dask-cudf"
            if name in ("dask", "dask-cudf"):
                pass
            if type(a).__module__.split(".")[0] in ("pandas", "cudf"):   # a module, not a backend
                pass
            if backend in (None, "auto") or method == "auto":     # a measure's option may be "auto"
                pass
            return "cudf" != name, name.startswith("dask")
    ''')
    assert name_comparisons(src) == [(3, "dask-cudf"), (4, "dask, dask-cudf"), (8, "auto"),
                                     (10, "cudf")]


def test_no_backend_name_is_compared_outside_the_registry():
    found = [f"{p.relative_to(ROOT)}:{line}: {names}" for p in _sources()
             if REGISTRY not in p.parents
             for line, names in name_comparisons(p.read_text(), str(p))]
    assert not found, ("backend names compared outside gpurisk/backends/ (ask the backend object: "
                       ".distributed, .gpu, ...):\n" + "\n".join(found))


def test_the_engine_is_not_reached_through_its_private_modules():
    """Outside freq/ the Dask passes are reached through the backend object, never ``freq._dask``."""
    found = []
    for p in _sources():
        if (ROOT / "gpurisk" / "freq") in p.parents or REGISTRY in p.parents:
            continue
        for node in ast.walk(ast.parse(p.read_text())):
            mods = ([node.module or ""] + [f"{node.module}.{a.name}" for a in node.names]
                    if isinstance(node, ast.ImportFrom) else
                    [a.name for a in node.names] if isinstance(node, ast.Import) else [])
            if any(m.startswith(("gpurisk.freq._dask", "gpurisk.freq._cudf")) for m in mods):
                found.append(f"{p.relative_to(ROOT)}:{node.lineno}")
    assert not found, found


# --- a backend added in one place ------------------------------------------------------------------

class PandasCopy(Backend):
    """A toy backend: pandas' count under another name, counting its calls."""

    name = "pandas-copy"

    def __init__(self):
        self.calls = 0

    def count(self, sample, keys, **kw):
        self.calls += 1
        table = get_backend("pandas").count(sample, keys, **kw)
        return dataclasses.replace(table, backend=self.name)


@pytest.fixture
def toy():
    backend = register(PandasCopy())
    try:
        yield backend
    finally:
        unregister(backend.name)


def test_a_registered_backend_runs_assess_end_to_end(toy):
    frame = pd.read_csv(data_path("sdcmicro/testdata.csv"))
    keys = ["urbrur", "water", "sex", "age"]
    ref = gpurisk.assess(frame, keys, fraction=0.01, backend="pandas")
    got = gpurisk.assess(frame, keys, fraction=0.01, backend="pandas-copy")
    assert toy.calls >= 1 and got.table.backend == "pandas-copy"
    assert got.to_dict()["backend"] == "pandas-copy"
    assert list(got.measures) == list(ref.measures)
    for name, r in ref.measures.items():
        assert got.measures[name].to_dict() == r.to_dict(), name
    assert "pandas-copy" in backends.choices()


def test_a_registered_backend_is_taken_by_the_command(toy):
    run = run_cli("assess", data_path("sdcmicro/testdata.csv"), "--keys", "urbrur,water,sex",
                  "--fraction", "0.01", "--measures", "theta_hat", "--backend", "pandas-copy",
                  "--json", check=True)
    assert json.loads(run.stdout)["backend"] == "pandas-copy" and toy.calls == 1


def test_an_unregistered_name_is_one_line():
    with pytest.raises(BadInput, match="'pandas-copy' is not one of auto, pandas, dask, cudf, dask-cudf$"):
        backends.resolve_backend("pandas-copy")
    with pytest.raises(ValueError, match="registered already"):
        register(get_backend("pandas").__class__())
    assert "strict" not in backends.choices() and get_backend("strict").stand_in


def test_the_builtin_backends_say_what_they_are():
    said = {n: (get_backend(n).distributed, get_backend(n).gpu) for n in backends.names()}
    assert said == {"pandas": (False, False), "dask": (True, False), "cudf": (False, True),
                    "dask-cudf": (True, True)}
    assert get_backend("cudf").unavailable().startswith("backend 'cudf' needs")   # no GPU here
    with pytest.raises(gpurisk.UnsupportedBackend, match="distributed backend, not 'pandas'"):
        get_backend("pandas").record_pass(None, None, {})
    strict = get_backend("strict")           # arrays move into the backend's namespace and back
    from gpurisk.testing.strict import StrictArray, xp
    moved = strict.to_device(np.arange(3))
    assert strict.namespace() is xp and isinstance(moved, StrictArray)
    assert strict.to_host(moved).tolist() == [0, 1, 2]
    assert get_backend("dask").to_device(np.arange(3)).tolist() == [0, 1, 2]


# --- the GPU backends are registered lazily ---------------------------------------------------------

GPU_MODULES = ("cudf", "cupy", "dask_cuda", "dask_cudf")

PROBE = """
import sys
import gpurisk, gpurisk.cli
from gpurisk.backends import get_backend, names
import pandas as pd
for n in names():
    get_backend(n)
a = gpurisk.assess(pd.DataFrame({"a": [1, 2, 2, 3], "b": [0, 0, 1, 1]}), ["a", "b"], fraction=0.5,
                   measures=["theta_hat"])
print(",".join(m for m in %r if m in sys.modules) or "-")
get_backend("cudf").unavailable()      # asking whether a GPU is there imports CuPy: the probe sees it
print(",".join(m for m in %r if m in sys.modules) or "-")
""" % (GPU_MODULES, GPU_MODULES)


def test_gpu_backends_are_registered_lazily(tmp_path):
    for m in GPU_MODULES:      # importable stand-ins: an import of one would show in sys.modules
        (tmp_path / m).mkdir()
        (tmp_path / m / "__init__.py").write_text("")
    path = os.pathsep.join(p for p in (str(tmp_path), os.environ.get("PYTHONPATH")) if p)
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, cwd=ROOT,
                         timeout=300, env={**os.environ, "PYTHONPATH": path})
    assert out.returncode == 0, out.stderr
    before, after = out.stdout.split()
    assert before == "-", f"imported at import time or by a pandas count: {before}"
    assert "cupy" in after          # the probe does see an import
