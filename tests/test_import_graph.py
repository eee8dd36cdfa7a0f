"""The package's shape (issue 15): no import circles between modules, few files at the top level."""
from __future__ import annotations

import ast
from pathlib import Path

from conftest import ROOT

PKG = ROOT / "gpurisk"


def _modules() -> dict[str, Path]:
    out = {}
    for p in PKG.rglob("*.py"):
        parts = list(p.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = p
    return out


def _imports(path: Path, name: str, modules, module_level_only: bool = False) -> set[str]:
    """gpurisk modules that ``name`` imports: every import statement, also those inside functions
    (a lazy import is still a dependency), or only those at module level."""
    tree = ast.parse(path.read_text(), filename=str(path))
    is_pkg = path.name == "__init__.py"
    base = name.split(".") if is_pkg else name.split(".")[:-1]
    found = set()
    for node in (tree.body if module_level_only else ast.walk(tree)):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name in modules}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                mod = ".".join(base[:len(base) - node.level + 1] + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            for a in node.names:
                sub = f"{mod}.{a.name}"
                found.add(sub if sub in modules else mod)
    return {m for m in found if m in modules and m != name}


def graph(module_level_only: bool = False) -> dict[str, set[str]]:
    mods = _modules()
    return {m: _imports(p, m, mods, module_level_only) for m, p in mods.items()}


def cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in g.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(g):
        if v not in index:
            visit(v)
    return out


def test_no_import_circles():
    """Counting lazy imports too: the graph points one way (commands -> workflows -> measures and
    models -> engine -> io and xp), so no module depends on one that depends on it."""
    found = cycles(graph())
    assert not found, "import circles: " + "; ".join(" <-> ".join(c) for c in found)


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_at_most_ten_files_at_the_top_level():
    top = sorted(p.name for p in PKG.glob("*.py"))
    assert len(top) <= 10, top


#: the most lines of code an ``__init__.py`` may hold (issue 29): it hands names on, code lives in
#: modules named for their concern
INIT_CODE_LINES = 40


def code_lines(source: str) -> int:
    """Lines holding code: not blank, not a comment, not part of a module/class/function docstring."""
    tree = ast.parse(source)
    doc: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) \
                and node.body and isinstance(node.body[0], ast.Expr) \
                and isinstance(node.body[0].value, ast.Constant) and isinstance(node.body[0].value.value, str):
            doc.update(range(node.body[0].lineno, node.body[0].end_lineno + 1))
    return sum(1 for i, line in enumerate(source.splitlines(), 1)
               if line.strip() and not line.strip().startswith("#") and i not in doc)


def test_code_lines_counts_code_only():
    src = '"""A docstring\n\nover lines."""\n# a comment\n\nimport os\n\n\ndef f():\n    """Doc."""\n' \
          '    return os.sep  # trailing\n'
    assert code_lines(src) == 3      # import, def, return


def test_no_init_holds_more_than_forty_lines_of_code():
    fat = {str(p.relative_to(ROOT)): n for p in PKG.rglob("__init__.py")
           if (n := code_lines(p.read_text())) > INIT_CODE_LINES}
    assert not fat, f"__init__.py files over {INIT_CODE_LINES} lines of code (move it to a module): {fat}"


def test_moved_code_keeps_its_import_paths():
    import subprocess
    import sys
    import gpurisk.cli
    import gpurisk.dis
    import gpurisk.testing
    from gpurisk.cli.app import main
    from gpurisk.dis.workflow import dis
    from gpurisk.testing.checks import check_measure
    assert gpurisk.cli.main is main and gpurisk.dis.dis is dis
    assert gpurisk.testing.check_measure is check_measure
    for pkg in (gpurisk.testing, gpurisk.dis, gpurisk.cli):
        missing = [name for name in pkg.__all__ if not hasattr(pkg, name)]
        assert not missing, (pkg.__name__, missing)
    # the console script's entry point names gpurisk.cli:main
    assert 'gpurisk = "gpurisk.cli:main"' in (ROOT / "pyproject.toml").read_text()
    out = subprocess.run([sys.executable, "-m", "gpurisk", "--version"], capture_output=True, text=True,
                         cwd=ROOT, timeout=120)
    assert out.returncode == 0 and "gpurisk" in out.stdout, out.stderr


def test_the_engine_takes_its_backend_as_an_argument():
    """Issue 40: the counting engine (``gpurisk.freq``) is handed its backend's connection and
    never looks a backend up; only the public dispatcher ``freq.engine`` (``build_table(...,
    backend=NAME)``) resolves a name. So there is no loop freq._dask -> backends -> freq._dask at
    run time."""
    g = graph()
    upward = {m: sorted(d for d in deps if d.startswith("gpurisk.backends"))
              for m, deps in g.items() if m.startswith("gpurisk.freq") and m != "gpurisk.freq.engine"}
    assert not {m: d for m, d in upward.items() if d}, upward
