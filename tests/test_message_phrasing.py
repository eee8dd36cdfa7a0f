"""Errors and reasons phrased for where they appear (issue 28): a message raised by code that the
Python API runs names the Python parameter (``sep='ab'``, ``max_size=1``), the same message on the
command line names the flag (``--sep``, ``--max-size``). Written once with placeholders
(``{arg:--flag|param}``, :mod:`gpurisk.core.messages`); no error, reason or warning text outside
the command line's own modules (``gpurisk/cli/``) quotes a bare ``--flag``."""
from __future__ import annotations

import ast
import re
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import gpurisk
from gpurisk.core.messages import phrase
from conftest import run_cli

ROOT = Path(__file__).resolve().parents[1]
#: calls whose first argument is a message a user reads
MESSAGE_CALLS = {"BadInput", "bad_input", "not_applicable", "failure", "warn", "Reason", "reason",
                 "GpuriskWarning"}
FLAG = re.compile(r"(?<![\w-])--[a-z][\w-]*")
PLACEHOLDER = re.compile(r"\{arg:[^{}|]*--[^{}|]*\|[^{}|]+\}|\{option:[^{}]*\}")


def _text(node) -> str:
    """The message as written: an f-string's values as ``V``, its literal braces as one brace."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "V" for v in node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _text(node.left) + _text(node.right)
    if isinstance(node, ast.IfExp):
        return _text(node.body) + " " + _text(node.orelse)
    return ""


def bare_flags(roots) -> list[str]:
    """``file:line: text`` for each message call whose text names a ``--flag`` outside a placeholder."""
    found = []
    for root in roots:
        for path in sorted(Path(root).rglob("*.py")):
            if "cli" in path.relative_to(root).parts[:1]:     # the command line's own modules
                continue
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for call in ast.walk(tree):
                if not (isinstance(call, ast.Call) and call.args):
                    continue
                f = call.func
                name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", None)
                if name not in MESSAGE_CALLS:
                    continue
                text = _text(call.args[0])
                if FLAG.search(PLACEHOLDER.sub("", text)):
                    found.append(f"{path.relative_to(Path(root).parent)}:{call.lineno}: {text[:80]!r}")
    return found


def test_no_message_outside_the_command_line_quotes_a_bare_flag():
    roots = [ROOT / "gpurisk", *sorted((ROOT / "plugins").glob("*/src"))]
    assert bare_flags(roots) == []


def raw_placeholders(roots) -> list[str]:
    """``file:line`` of each ``BadInput(text)`` whose text holds a placeholder: raised as it is, the
    user would read ``{arg:--sep|sep}`` (``bad_input(text)`` phrases it)."""
    from gpurisk.core.messages import has_placeholder
    found = []
    for root in roots:
        for path in sorted(Path(root).rglob("*.py")):
            for call in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if not (isinstance(call, ast.Call) and call.args):
                    continue
                f = call.func
                if (f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", None)) != "BadInput":
                    continue
                if has_placeholder(_text(call.args[0])):
                    found.append(f"{path.relative_to(Path(root).parent)}:{call.lineno}")
    return found


def test_no_error_shows_a_placeholder_unphrased():
    roots = [ROOT / "gpurisk", *sorted((ROOT / "plugins").glob("*/src"))]
    assert raw_placeholders(roots) == []


def test_the_check_finds_a_bare_flag(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "m.py").write_text(
        'def f(x):\n'
        '    raise BadInput(f"--sep {x!r}: give one character")\n'
        'def g(x):\n'
        '    raise BadInput("bad value: use "\n'
        '                   "--backend pandas")\n'
        'def h(x):\n'
        '    raise bad_input(f"{{arg:--sep|sep}} {x!r}: fine")\n'
        'def i(x):\n'
        '    return Result.not_applicable("needs {population}; --weights COL")\n')
    (pkg / "cli").mkdir()
    (pkg / "cli" / "c.py").write_text('raise BadInput("--sep is the command line\'s own")\n')
    found = bare_flags([pkg])
    assert [s.split(":")[1] for s in found] == ["2", "4", "9"]
    (pkg / "n.py").write_text('raise BadInput(f"{{arg:--sep|sep}} {x!r}: not phrased")\n'
                              'raise bad_input(f"{{arg:--sep|sep}} {x!r}: phrased")\n'
                              'raise BadInput(f"options map names to {{option: value}}")\n')
    assert [s.split(":")[1] for s in raw_placeholders([pkg])] == ["1"]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("phrasing")
    rng = np.random.default_rng(3)
    n = 400
    df = pd.DataFrame({"a": rng.integers(0, 5, n), "b": rng.integers(0, 3, n),
                       "c": rng.integers(0, 4, n), "ident": np.arange(n) * 7 + 1})
    df.to_csv(d / "s.csv", index=False)
    (d / "taken.csv").write_text("x\n")
    return d, df


def _api(fn, *args, **kw) -> str:
    with pytest.raises(gpurisk.BadInput) as err:
        fn(*args, **kw)
    return str(err.value)


def _cli(*args) -> str:
    run = run_cli(*map(str, args))
    assert run.returncode == 2, run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpurisk: error: "), run.stderr
    return lines[0][len("gpurisk: error: "):]


def test_errors_name_the_parameter_in_the_api_and_the_flag_on_the_command_line(files):
    d, df = files
    csv = d / "s.csv"
    # io/text.py: the separator
    assert _api(gpurisk.assess, str(csv), ["a", "b"], sep="ab") == \
        "sep 'ab': give one character (or \\t for a tab)"
    assert _cli("assess", csv, "--keys", "a,b", "--sep", "ab") == \
        "--sep 'ab': give one character (or \\t for a tab)"
    # freq/guards.py: a key that identifies every record
    py = _api(gpurisk.assess, df, ["a", "ident"])
    cli = _cli("assess", csv, "--keys", "a,ident")
    assert py.endswith("recode it into bands (recode=['ident=bands:WIDTH']) or pass "
                       "allow_high_cardinality=True")
    assert cli.endswith("recode it into bands (--recode ident=bands:WIDTH) or pass "
                        "--allow-high-cardinality")
    assert py.split(":")[0] == cli.split(":")[0] == "key column 'ident' has 400 distinct values in 400 records (an identifier? 100% of the records have a value of their own)"
    # inputs.py: a recode of a variable that is not a key
    assert _api(gpurisk.assess, df, ["a", "b"], recode=["ident=bands:5"]) == \
        "recode 'ident': not one of the key variables (a, b)"
    assert _cli("assess", csv, "--keys", "a,b", "--recode", "ident=bands:5") == \
        "--recode 'ident': not one of the key variables (a, b)"
    # scan/plan.py: sizes
    assert _api(gpurisk.scan, df, keys=["a", "b"], max_size=1, min_size=2) == \
        "max_size=1 is below min_size=2"
    assert _cli("scan", csv, "--keys", "a,b", "--max-size", "1", "--min-size", "2") == \
        "--max-size 1 is below --min-size 2"
    # scan/sink.py: an output named as a single file
    out = d / "taken.csv"
    assert _api(gpurisk.scan, df, keys=["a", "b"], output=out) == \
        "output 'taken.csv': a scan writes a Parquet dataset (a folder of part files); name it e.g. scan.parquet"
    assert _cli("scan", csv, "--keys", "a,b", "-o", out) == \
        "--output 'taken.csv': a scan writes a Parquet dataset (a folder of part files); name it e.g. scan.parquet"


def test_warnings_name_the_parameter_in_the_api_and_the_flag_on_the_command_line(files):
    d, df = files
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rr = gpurisk.record_risk(df, ["a", "b", "c"], fraction=0.1, max_iter=1, tol=1e-12)
    texts = [str(w.message) for w in caught if "IPF stopped" in str(w.message)]
    assert texts[0].endswith("raise the iteration limit (max_iter)")
    assert rr["warnings"] == texts
    run = run_cli("record-risk", d / "s.csv", "--keys", "a,b,c", "--fraction", "0.1",
                  "--max-iter", "1", "--tol", "1e-12")
    assert run.returncode == 0, run.stderr
    shown = " ".join((run.stdout + run.stderr).split())
    assert "warning: IPF stopped after 1 iterations" in shown
    assert "raise the iteration limit (--max-iter)" in shown and "max_iter)" not in shown


def test_a_reason_made_for_a_measure_left_out_is_phrased_both_ways():
    t = ("it fits a log-linear model; Name it ({arg:--measures matches_ll,...|measures=['matches_ll', ...]})")
    assert phrase(t, "cli").endswith("(--measures matches_ll,...)")
    assert phrase(t, "python").endswith("(measures=['matches_ll', ...])")


def test_a_page_says_what_to_give_where_it_was_written():
    """The report page's hints name ``policy=FILE`` when the Python API writes it and
    ``--policy FILE`` when ``gpurisk report`` does (the command runs under the command line's side)."""
    from gpurisk.core.messages import side
    from gpurisk.report.policy import overall
    assert overall([])[1] == ("No policy was given (policy=FILE or thresholds): the page shows the "
                              "numbers but no verdict.")
    with side("cli"):
        assert overall([])[1] == ("No policy was given (--policy FILE or thresholds): the page "
                                  "shows the numbers but no verdict.")
