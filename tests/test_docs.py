"""The documentation stays true: the generated measures reference, the references the measures cite."""
from __future__ import annotations

import json

import pytest

from conftest import ROOT, run_cli

#: the packages of the test environment: the built-ins and the bundled example plugin
DOC_PACKAGES = {"gpurisk", "gpurisk-classic"}


def test_measures_reference_is_the_registry_output():
    packages = {r["package"] for r in json.loads(run_cli("plugins", "--json", check=True).stdout)}
    if packages != DOC_PACKAGES:
        pytest.skip(f"docs/measures.md lists the measures of {sorted(DOC_PACKAGES)}; "
                    f"this environment has {sorted(packages)}")
    generated = run_cli("measures", "--markdown", check=True).stdout
    committed = (ROOT / "docs" / "measures.md").read_text()
    assert committed == generated, (
        "docs/measures.md differs from `gpurisk measures --markdown`; regenerate it with "
        "`gpurisk measures --markdown > docs/measures.md` (with only gpurisk and "
        "plugins/gpurisk-classic installed) and commit it")


def test_measures_reference_covers_every_measure_and_perturbation():
    text = run_cli("measures", "--markdown", check=True).stdout
    rows = json.loads(run_cli("measures", "--json", check=True).stdout)
    perturbations = json.loads(run_cli("perturbations", "--json", check=True).stdout)
    for d in rows:
        section = text.split(f"### `{d['name']}`\n", 1)[1].split("\n### ", 1)[0]
        assert d["reference"] in section and d["package"] in section and d["level"] in section
        for k, v in d["options"].items():
            assert f"`{k}` = `{json.dumps(v, ensure_ascii=False)}`" in section
        assert ("runs by default: yes" in section) == d["default"]
    for d in perturbations:
        assert f"### `{d['name']}`\n" in text and d["reference"] in text


def test_measures_cite_papers_not_the_spec():
    """Users do not have SPEC.md: a built-in measure's reference names a paper (author, year)."""
    import re
    rows = json.loads(run_cli("measures", "--json", check=True).stdout)
    rows += json.loads(run_cli("perturbations", "--json", check=True).stdout)
    for d in rows:
        assert "SPEC" not in d["reference"], (d["name"], d["reference"])
        assert re.search(r"[\w.] \(\d{4}\)", d["reference"]), (d["name"], d["reference"])
    help_text = run_cli("dis", "--help", check=True).stdout
    assert "SPEC" not in help_text
