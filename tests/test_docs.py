"""The documentation stays true: the generated measures reference, the references the measures cite."""
from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from conftest import ROOT, run_cli

#: the packages of the test environment: the built-ins and the bundled plugins
DOC_PACKAGES = {"gpurisk", "gpurisk-classic", "gpurisk-arx"}


def test_measures_reference_is_the_registry_output():
    packages = {r["package"] for r in json.loads(run_cli("plugins", "--json", check=True).stdout)}
    if packages != DOC_PACKAGES:
        pytest.skip(f"docs/measures.md lists the measures of {sorted(DOC_PACKAGES)}; "
                    f"this environment has {sorted(packages)}")
    generated = run_cli("measures", "--markdown", check=True).stdout
    committed = (ROOT / "docs" / "measures.md").read_text()
    assert committed == generated, (
        "docs/measures.md differs from `gpurisk measures --markdown`; regenerate it with "
        "`gpurisk measures --markdown > docs/measures.md` (with only gpurisk, "
        "plugins/gpurisk-classic and plugins/gpurisk-arx installed) and commit it")


def test_measures_reference_covers_every_measure_and_perturbation():
    text = run_cli("measures", "--markdown", check=True).stdout
    rows = json.loads(run_cli("measures", "--json", check=True).stdout)
    perturbations = json.loads(run_cli("perturbations", "--json", check=True).stdout)
    for d in rows:
        section = text.split(f"### `{d['name']}`\n", 1)[1].split("\n### ", 1)[0]
        assert d["reference"] in section and d["package"] in section and d["level"] in section
        for k, v in d["options"].items():
            assert f"`{k}` = `{json.dumps(v, ensure_ascii=False)}`" in section
        # the headline's fits run by default although their class says default = False (issue 41)
        assert ("runs by default: yes" in section) == (d["default"] or bool(d.get("headline")))
    for d in perturbations:
        assert f"### `{d['name']}`\n" in text and d["reference"] in text


def test_measures_cite_papers_not_the_spec():
    """Users do not have SPEC.md: a built-in measure's reference names a paper (author, year)."""
    rows = json.loads(run_cli("measures", "--json", check=True).stdout)
    rows += json.loads(run_cli("perturbations", "--json", check=True).stdout)
    for d in rows:
        assert "SPEC" not in d["reference"], (d["name"], d["reference"])
        assert re.search(r"[\w.] \(\d{4}\)", d["reference"]), (d["name"], d["reference"])
    help_text = run_cli("dis", "--help", check=True).stdout
    assert "SPEC §" not in help_text and "SPEC.md" not in help_text   # KEY=SPEC metavars are fine


# --- every command shown in the README and docs/ runs ----------------------------------------------
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BASH_BLOCK = re.compile(r"^```bash\n(.*?)^```", re.M | re.S)
ANY_BLOCK = re.compile(r"^```\w*\n(.*?)^```", re.M | re.S)
FILE_HEADER = re.compile(r"#\s*file:\s*(\S+)\s*\n")
#: the block of docs/plugins.md that installs the guide's example package: run by
#: test_plugin_guide_package_installs_and_runs, with that package installed
PLUGIN_INSTALL = "pip install ./my-package"
#: lines of bash blocks that are not gpurisk commands and are not run here, each with the reason
SKIP = {
    ("pip", "install"): "installs packages (the test environment is installed already)",
    ("python", "-m", "pytest"): "runs the test suite itself",
    ("docker", "build"): "builds a container image",
    ("docker", "run"): "runs a container image",
    ("bash", "bench/gpu_checks.sh"): "needs a GPU (tests/test_bench_register_scan.py runs it on a "
                                     "machine without one, where it says so and checks nothing)",
}


def doc_files(text: str) -> dict[str, str]:
    """The files a document shows in code blocks whose first line is ``# file: PATH``."""
    out = {}
    for block in ANY_BLOCK.findall(text):
        m = FILE_HEADER.match(block)
        if m:
            out[m.group(1)] = block
    return out


def block_lines(block: str) -> list[str]:
    """The command lines of a bash block, continuation lines joined."""
    return [ln.strip() for ln in block.replace("\\\n", " ").splitlines() if ln.strip()]


def doc_commands(text: str, blocks=None) -> list[list[str]]:
    """The gpurisk command lines of a document's bash blocks, as argument lists without "gpurisk"."""
    cmds = []
    for block in (BASH_BLOCK.findall(text) if blocks is None else blocks):
        if blocks is None and PLUGIN_INSTALL in block:
            continue
        for line in block_lines(block):
            for part in line.split("&&"):
                words = shlex.split(part, comments=True)
                if not words:
                    continue                                    # a comment line
                if words[0] == "gpurisk":
                    cmds.append(words[1:])
                    continue
                assert any(tuple(words[:len(k)]) == k for k in SKIP), (
                    f"{part.strip()!r} in a bash block is neither a gpurisk command nor a line of a "
                    f"kind that tests/test_docs.py skips ({', '.join(' '.join(k) for k in SKIP)})")
    return cmds


def docs_workdir(tmp: Path, text: str) -> Path:
    """A working directory where ``../shared/data`` is the real data and the document's files exist."""
    from conftest import DATA
    if not DATA.exists():
        pytest.skip(f"real data {DATA} is not present")
    (tmp / "shared").mkdir()
    (tmp / "shared" / "data").symlink_to(DATA, target_is_directory=True)
    work = tmp / "repo"
    work.mkdir()
    for rel, content in doc_files(text).items():
        (work / rel).parent.mkdir(parents=True, exist_ok=True)
        (work / rel).write_text(content)
    return work


@pytest.fixture(scope="module")
def doc_runs(tmp_path_factory):
    """Each document's commands, in order, in this process (a scan, then its report)."""
    from _driver import run_many
    out = {}
    for doc in DOCS:
        text = doc.read_text()
        cmds = doc_commands(text)
        if cmds:
            work = docs_workdir(tmp_path_factory.mktemp(doc.stem), text)
            out[doc.name] = list(zip(cmds, run_many(cmds, cwd=work)))
    return out


@pytest.mark.parametrize("doc", [d.name for d in DOCS])
def test_documented_commands_run(doc_runs, doc):
    for args, proc in doc_runs.get(doc, []):
        assert proc.returncode == 0, (f"{doc}: `gpurisk {shlex.join(args)}` exited {proc.returncode}:\n"
                                      f"{proc.stderr[-3000:]}")


def test_readme_shows_every_command(doc_runs):
    import click
    from gpurisk.cli import cli
    shown = {args[0] for args, _ in doc_runs["README.md"]}
    commands = set(cli.list_commands(click.Context(cli)))
    assert commands <= shown, f"README.md has no example of: {sorted(commands - shown)}"


def test_links_between_documents_resolve():
    for doc in DOCS:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", doc.read_text()):
            if "://" not in target:
                assert (doc.parent / target).exists(), f"{doc.name} links to missing {target}"


def test_readme_is_short():
    assert len((ROOT / "README.md").read_text().splitlines()) <= 250


# --- the plugin guide's package, built and installed as the guide says ------------------------------
def _build_backend_offline() -> str | None:
    """Why the guide's package cannot be built without the network here, or None when it can."""
    from importlib.metadata import PackageNotFoundError, version
    try:
        have = tuple(int(x) for x in version("setuptools").split(".")[:2])
    except PackageNotFoundError:
        return "setuptools is not installed (pip install -e '.[test]' installs it)"
    if have < (70, 1):
        try:
            version("wheel")
        except PackageNotFoundError:
            return f"setuptools {have} < 70.1 needs the wheel package to build a wheel"
    return None


def test_plugin_guide_package_installs_and_runs(tmp_path):
    import subprocess
    import sys
    from _driver import run_many
    why = _build_backend_offline()
    if why:
        pytest.skip(why)
    text = (ROOT / "docs" / "plugins.md").read_text()
    files = doc_files(text)
    pyprojects = [p for p in files if p.endswith("pyproject.toml")]
    assert len(pyprojects) == 1, f"the guide should show one pyproject.toml, shows {pyprojects}"
    package = Path(pyprojects[0]).parent
    src = tmp_path / "src"
    for rel, content in files.items():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_text(content)
    block = next(b for b in BASH_BLOCK.findall(text) if PLUGIN_INSTALL in b)
    pip_line = next(ln for ln in block_lines(block) if ln.startswith("pip install"))
    assert Path(shlex.split(pip_line)[-1]) == Path(".") / package, (pip_line, package)
    site = tmp_path / "site"
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation",
                           "--no-index", "--quiet", "--target", str(site), str(src / package)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"pip install of the guide's package failed:\n{proc.stderr[-3000:]}"

    name = re.search(r'^\s+name = "(\w+)"', files[next(p for p in files if p.endswith("plugin.py"))],
                     re.M).group(1)
    cmds = doc_commands("", blocks=[block])
    assert any(c[0] == "measures" for c in cmds) and any(c[0] == "assess" and name in " ".join(c)
                                                         for c in cmds), cmds
    check = [["measures", "--json"],
             ["assess", "example:adult", "--keys", "age,sex,race", "--measures", name, "--json"]]
    runs = run_many(cmds + check, cwd=src, pythonpath=[site])
    for args, p in zip(cmds + check, runs):
        assert p.returncode == 0, (args, p.stderr[-3000:])
    listed = {d["name"]: d for d in json.loads(runs[-2].stdout)}
    dist = re.search(r'^name = "([\w.-]+)"', files[pyprojects[0]], re.M).group(1)
    assert listed[name]["package"] == dist
    doc = json.loads(runs[-1].stdout)
    assert doc["measures"][name]["value"] == pytest.approx(doc["freq_of_freq"]["1"] / doc["n"])
    for args, p in zip(cmds, runs):
        if args[0] in ("measures", "assess"):
            assert name in p.stdout, (args, p.stdout[-2000:])


# --- the plugin guide's Python snippets, run as written ---------------------------------------------
PYTHON_BLOCK = re.compile(r"```python\n(.*?)```", re.S)
#: what marks an excerpt (part of a file, not run): "..." standing for the rest
EXCERPT = re.compile(r"\.\.\.")


def runnable_snippets(text: str) -> list[str]:
    """The Python blocks of a document meant to run as written: not a package's file (``# file:``,
    built and installed by test_plugin_guide_package_installs_and_runs) and no excerpt (``...``
    standing for what the excerpt leaves out)."""
    return [b for b in PYTHON_BLOCK.findall(text)
            if not FILE_HEADER.match(b) and not EXCERPT.search(b)]


def snippet_test_files(snippets: list[str], where: Path) -> list[Path]:
    """Each snippet as a test module in ``where``: a snippet with ``test_`` functions as it is; one
    that defines measures as a module plus a test running ``gpurisk.testing.check_measure`` on each."""
    out = []
    for i, code in enumerate(snippets):
        if re.search(r"^def test_", code, re.M):
            out.append(where / f"test_guide_snippet_{i}.py")
            out[-1].write_text(code)
            continue
        (where / f"guide_snippet_{i}.py").write_text(code)
        out.append(where / f"test_guide_snippet_{i}_measures.py")
        out[-1].write_text(
            "import inspect\n\nimport gpurisk\nfrom gpurisk.testing import check_measure\n\n"
            f"import guide_snippet_{i} as snippet\n\n\n"
            "def test_snippet_measures_pass_the_kit():\n"
            "    found = [c for c in vars(snippet).values() if inspect.isclass(c)\n"
            "             and issubclass(c, gpurisk.Measure) and c.__module__ == snippet.__name__]\n"
            "    assert found, 'the snippet defines no measure'\n"
            "    for cls in found:\n"
            "        check_measure(cls)\n")
    return out


def test_plugin_guide_snippets_run(tmp_path):
    """Issue 28: the guide's conformance snippet failed as written (no ``import pytest, json``)."""
    import subprocess
    import sys
    pytest.importorskip("gpurisk_classic")          # the conformance snippet imports the plugin
    text = (ROOT / "docs" / "plugins.md").read_text()
    snippets = runnable_snippets(text)
    assert any("check_measure(cls)" in s for s in snippets), "the conformance snippet is not run"
    assert any("reads = \"buckets\"" in s for s in snippets), "the bucket measure is not run"
    files = snippet_test_files(snippets, tmp_path)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "--rootdir", str(tmp_path), *map(str, files)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"the guide's snippets failed:\n{proc.stdout[-4000:]}{proc.stderr[-2000:]}"
    ran = re.search(r"(\d+) passed", proc.stdout)
    assert ran and int(ran.group(1)) >= 3, proc.stdout[-2000:]
