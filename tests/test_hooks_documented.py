"""Meta-test: every hook in gpurisk/hookspecs.py has a docstring, is documented in the plugin guide
(README.md or docs/*.md: the guide is moving into docs/), and is implemented by at least one test."""
from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

from gpurisk import hookspecs

ROOT = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve()
HOOKS = sorted(n for n, f in vars(hookspecs).items()
               if callable(f) and hasattr(f, f"{hookspecs.PROJECT}_spec"))


def guide_text() -> str:
    files = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    return "\n".join(p.read_text(encoding="utf-8") for p in files if p.exists())


def test_hooks_are_found():
    assert {"gpurisk_register_measures", "gpurisk_register_perturbations",
            "gpurisk_register_commands"} <= set(HOOKS)


@pytest.mark.parametrize("hook", HOOKS)
def test_hook_has_a_docstring(hook):
    doc = inspect.getdoc(getattr(hookspecs, hook))
    assert doc and len(doc.split()) >= 8, f"{hook} has no real docstring"


@pytest.mark.parametrize("hook", HOOKS)
def test_hook_is_in_the_plugin_guide(hook):
    assert re.search(rf"`{hook}\b", guide_text()), \
        f"{hook} is not documented in README.md or docs/*.md (write it as `{hook}(...)`)"


@pytest.mark.parametrize("hook", HOOKS)
def test_hook_is_implemented_by_a_test(hook):
    # an implementation, not a mention: "def HOOK(" or "HOOK=hookimpl(" in a test (or plugin test)
    pattern = re.compile(rf"def {hook}\(|{hook}\s*=\s*(gpurisk\.)?hookimpl\(")
    files = [p for p in [*ROOT.glob("tests/**/*.py"), *ROOT.glob("plugins/*/tests/**/*.py")]
             if p.resolve() != HERE]
    users = [p.name for p in files if pattern.search(p.read_text(encoding="utf-8"))]
    assert users, f"no test implements {hook}"
