"""The array-namespace contract in the source (issue 15): one module tells numpy from CuPy and moves
data to the host; the strict-namespace tests prove the behaviour, this test keeps new sniffers and
transfers from creeping back in elsewhere."""
from __future__ import annotations

import ast
from pathlib import Path

from conftest import ROOT

SOURCES = sorted((ROOT / "gpurisk").rglob("*.py")) + \
    sorted((ROOT / "plugins" / "gpurisk-classic" / "src").rglob("*.py")) + \
    sorted((ROOT / "plugins" / "gpurisk-arx" / "src").rglob("*.py"))

#: the one module that moves device arrays to the host (and the strict namespace that mimics CuPy)
HOST_TRANSFER = {"gpurisk/xp.py", "gpurisk/testing/strict.py"}
#: modules that tell array or frame kinds apart by their module
SNIFFERS = {"gpurisk/xp.py", "gpurisk/backends/cpu.py"}
#: GPU backend code, which calls CuPy/cuDF APIs on cuDF frames (device counts, categorical codes)
CUPY_IMPORTERS = {"gpurisk/xp.py", "gpurisk/backends/choose.py", "gpurisk/backends/cluster.py",
                  "gpurisk/backends/gpu.py", "gpurisk/freq/_cudf.py", "gpurisk/freq/plan.py",
                  "gpurisk/freq/partial.py"}


def _rel(p: Path) -> str:
    return p.relative_to(ROOT).as_posix()


def _walk():
    for p in SOURCES:
        yield _rel(p), ast.parse(p.read_text(), filename=str(p))


def host_transfers(rel: str, tree) -> list[str]:
    """``.get()`` calls (CuPy's copy to the host) outside the modules allowed to make them."""
    if rel in HOST_TRANSFER:
        return []
    return [f"{rel}:{node.lineno}: .get() (use gpurisk.xp.to_host)" for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr == "get" and not node.args and not node.keywords]


def sniffers(rel: str, tree) -> list[str]:
    """``__module__`` sniffing and cupy imports outside the modules allowed to do them."""
    bad = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr == "__module__" and rel not in SNIFFERS:
            bad.append(f"{rel}:{node.lineno}: .__module__ (use gpurisk.xp.namespace / is_cudf)")
        if isinstance(node, (ast.Import, ast.ImportFrom)) and rel not in CUPY_IMPORTERS:
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            if any(n.split(".")[0] == "cupy" for n in names):
                bad.append(f"{rel}:{node.lineno}: imports cupy (use table.xp)")
    return bad


def test_only_the_xp_module_moves_arrays_to_the_host():
    bad = [b for rel, tree in _walk() for b in host_transfers(rel, tree)]
    assert not bad, "\n".join(bad)


def test_only_the_xp_module_sniffs_namespaces():
    bad = [b for rel, tree in _walk() for b in sniffers(rel, tree)]
    assert not bad, "\n".join(bad)


def test_the_checks_have_teeth():
    """The scanners above find what they look for, in a module that is not allowed to do it."""
    tree = ast.parse("import cupy\nx = a.get()\ny = type(a).__module__\nz = d.get('k')\n")
    assert len(host_transfers("gpurisk/measures/x.py", tree)) == 1      # a.get(), not d.get('k')
    assert len(sniffers("gpurisk/measures/x.py", tree)) == 2            # the import and __module__
    assert host_transfers("gpurisk/xp.py", tree) == [] and sniffers("gpurisk/xp.py", tree) == []
