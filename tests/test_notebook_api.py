"""Issue 28, the Python API in a notebook: short reprs, ``_repr_html_``, ``to_frame()`` with real
columns, record_risk's result object and its warnings, messages phrased for where they appear."""
from __future__ import annotations

from html.parser import HTMLParser

import pandas as pd
import pytest

import gpurisk
from gpurisk.protect.workflow import protect

from conftest import data_path

ADULT_KEYS = "age,sex,race,education"


class _Page(HTMLParser):
    """Checks that every opened tag is closed in order; collects the text and the cells."""

    VOID = {"br", "hr", "img", "meta"}

    def __init__(self, html: str):
        super().__init__()
        self.stack, self.text, self.cells, self.tags = [], [], [], []
        self.feed(html)
        self.close()
        assert not self.stack, f"unclosed tags {self.stack}"

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        if tag not in self.VOID:
            self.stack.append(tag)
        if tag in ("td", "th"):
            self.cells.append("")

    def handle_endtag(self, tag):
        assert self.stack and self.stack[-1] == tag, f"</{tag}> closes {self.stack[-1:]}"
        self.stack.pop()

    def handle_data(self, data):
        self.text.append(data)
        if self.stack and self.stack[-1] in ("td", "th"):
            self.cells[-1] += data

    @property
    def all_text(self) -> str:
        return "".join(self.text)


@pytest.fixture(scope="module")
def adult_scan():
    return gpurisk.scan("example:adult", keys=ADULT_KEYS, fraction=0.1, max_size=3)


@pytest.fixture(scope="module")
def adult_assessment():
    return gpurisk.assess("example:adult", ADULT_KEYS, fraction=0.1)


def test_scan_repr_is_short_and_names_the_riskiest(adult_scan):
    s = adult_scan
    text = repr(s)
    assert len(s.results) == 14 and "\n" not in text and len(text) < 250
    # the riskiest combination and its figure, recomputed here from the frame with pandas
    by = "matches_ll"                 # the scan's ranking since issue 27: Ê, the estimate of E
    best = s.results.sort_values(by, ascending=False).iloc[0]
    assert text.startswith("<ScanResult 14 combination(s) of 4 key(s), n=48842")
    assert f"riskiest: {best['combo']} ({by}=" in text
    assert f"{best[by]:.4g}" in text


def test_scan_html_names_the_top_combinations(adult_scan):
    page = _Page(adult_scan._repr_html_())
    assert page.tags.count("tr") == 11            # header + the 10 riskiest
    # ranked by Ê (matches_ll) since issue 27
    top = adult_scan.results.sort_values("matches_ll", ascending=False).head(10)
    cells = page.cells
    for combo in top["combo"]:
        assert combo in cells
    assert "matches_ll" in cells and "n1" in cells


def test_assessment_html_is_escaped_and_shows_every_measure(adult_assessment):
    a = adult_assessment
    html = a._repr_html_()
    page = _Page(html)
    # a measure with a value has its row; the others are named in one line (issue 41)
    shown = [name for name, r in a.measures.items() if r.value is not None]
    for name in shown:
        assert name in page.cells
    for name, r in a.measures.items():
        assert name in html
    th = a.measures["theta_hat"].value
    assert f"{th:.4g}" in page.cells
    # counts print as integers, never 1.32e+03
    assert str(int(a.measures["sample_uniques"].value)) in page.cells
    body = page.cells[4:]
    figures = [c for i, c in enumerate(body) if i % 4 in (1, 2, 3)]   # value, s.e., upper
    assert len(figures) == 3 * len(shown) and not any("e+" in c for c in figures)
    assert "e+0" not in repr(a)
    # a key name from the user's file is escaped, not markup
    df = pd.DataFrame({"<b>x</b>": [1, 1, 2, 3], "y": [1, 2, 2, 2]})
    html = gpurisk.assess(df, ["<b>x</b>", "y"], fraction=0.5)._repr_html_()
    assert "<b>x</b>" not in html.replace("<b>Assessment", "") and "&lt;b&gt;x&lt;/b&gt;" in html
    assert "&lt;b&gt;x&lt;/b&gt;" in html and _Page(html).tags.count("b") == 1


def test_protection_repr_is_short_and_html_shows_before_after():
    p = protect("example:adult", ["age", "sex", "race"],
                ["age=bands:5", "age=bands:10", "age=bands:20"], ["theta_hat<=0.08"], fraction=0.1)
    text = repr(p)
    assert len(p.released) == 48842
    assert "\n" not in text and len(text) < 400 and "DataFrame" not in text
    assert "records released 48842" in text
    assert "node " + ", ".join(f"{k}={v}" for k, v in p.node.items()) in text
    page = _Page(p._repr_html_())
    row = p.before_after.iloc[0]
    assert any(c.startswith(f"scenario {row['scenario']}: {row['criterion']}") for c in page.cells)
    assert f"{row['before']:.4g} → {row['after']:.4g}" in page.all_text
    assert "48842" in page.cells


def test_validation_repr_and_html():
    v = gpurisk.validate(data_path("sdcmicro/testdata.csv"), "urbrur,water,sex,age",
                         fractions=[0.1], replicates=3)
    text = repr(v)
    assert "\n" not in text and len(text) < 300 and "DataFrame" not in text
    assert text.startswith("<Validation 5 estimator(s) on 1 fraction(s), 3 replicate(s) of N=4580")
    worst = v.summary.dropna(subset=["nmse"]).sort_values("nmse").iloc[-1]
    assert f"largest NMSE {worst['nmse']:.4g} ({worst['measure']}" in text
    page = _Page(v._repr_html_())
    for m in v.summary["measure"]:
        assert m in page.cells


def test_to_frame_has_a_column_per_extra_field(adult_assessment, tmp_path):
    a = adult_assessment
    f = a.to_frame()
    assert "extra" not in f.columns and list(f["measure"]) == list(a.measures)
    k = f.set_index("measure").loc["k_anonymity"]
    # the reference: cells of the four keys counted with pandas on the records
    df = gpurisk.read_table("example:adult")
    sizes = df.groupby(ADULT_KEYS.split(","), dropna=False).size()
    assert k["extra.k"] == 3
    assert k["extra.records_violating"] == int(sizes[sizes < 3].sum())
    assert k["extra.cells_violating"] == int((sizes < 3).sum())
    assert k["extra.k_achieved"] == int(sizes.min())
    assert str(f["extra.records_violating"].dtype) == "Int64"        # a count stays an integer
    # a field a measure lacks is empty, not 0
    assert f.set_index("measure")["extra.records_violating"].isna().sum() == len(f) - 1
    # the files --output writes keep one JSON column, the same whatever measures ran
    gpurisk.write_results(a.to_dict(), tmp_path / "r.csv")
    back = pd.read_csv(tmp_path / "r.csv")
    assert list(back.columns) == list(a.to_frame(extra="json").columns) and "extra" in back
    with pytest.raises(gpurisk.BadInput):
        a.to_frame(extra="wide")


# --- record_risk's result object ------------------------------------------------------------------
RR_KEYS = ["age", "sex", "race", "marital-status"]


@pytest.fixture(scope="module")
def adult_records():
    return gpurisk.read_table("example:adult").sample(n=3000, random_state=11).reset_index(drop=True)


def test_record_risk_result_object(adult_records):
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error", gpurisk.GpuriskWarning)     # a converged fit warns nothing
        rr = gpurisk.record_risk(adult_records, RR_KEYS, fraction=0.1, methods=["r1", "r1u"])
    assert isinstance(rr, gpurisk.RecordRisk) and not isinstance(rr, dict)
    sizes = adult_records.groupby(RR_KEYS).size()
    assert rr.n == 3000 and rr.N == pytest.approx(30000)
    assert rr.sample_uniques == int((sizes == 1).sum()) == rr["sample_uniques"]
    assert rr.methods["r1"]["records"] == rr.sample_uniques
    assert rr.expected("r1u") == rr["methods"]["r1u"]["sum"]
    assert [r["which"] for r in rr.table3] == ["minimum", "median", "maximum"]
    assert rr.warnings == [] and rr.ipf["converged"]
    doc = rr.to_dict()
    assert type(doc) is dict and doc["keys"] == RR_KEYS and dict(rr) == doc
    text = repr(rr)
    assert "\n" not in text and len(text) < 300 and text.startswith("<RecordRisk n=3000, N=30000")
    assert f"{rr.sample_uniques} sample uniques" in text
    page = _Page(rr._repr_html_())
    assert {"r1", "r1u"} <= set(page.cells)
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        rr.nope


def test_record_risk_warnings_go_through_warnings(adult_records):
    with pytest.warns(gpurisk.GpuriskWarning, match=r"IPF stopped after 1 iterations") as got:
        rr = gpurisk.record_risk(adult_records, RR_KEYS, fraction=0.1, max_iter=1, tol=1e-9)
    assert not rr.ipf["converged"] and len(rr.warnings) == 1
    assert [str(w.message) for w in got if w.category is gpurisk.GpuriskWarning] == rr.warnings
    assert issubclass(gpurisk.GpuriskWarning, UserWarning)
    assert "NOT converged" in repr(rr) and "1 warning(s)" in repr(rr)
    pop = gpurisk.read_table("example:adult")
    reg = pop.assign(s=pop.index.isin(adult_records.index))
    with pytest.warns(gpurisk.GpuriskWarning, match="given N = 50000 differs from the population's size 48842"):
        gpurisk.record_risk(reg, RR_KEYS, sample_flag="s", population_size=50000)


def test_record_risk_cli_prints_each_warning_once(adult_records, tmp_path):
    import json
    from conftest import run_cli
    src = tmp_path / "s.csv"
    adult_records.to_csv(src, index=False)
    args = ["record-risk", str(src), "--keys", ",".join(RR_KEYS), "--fraction", "0.1",
            "--max-iter", "1", "--tol", "1e-9"]
    out = run_cli(*args)
    assert out.returncode == 0, out.stderr
    both = out.stdout + out.stderr
    assert both.count("IPF stopped after 1 iterations") == 1
    assert "--max-iter" in both and "GpuriskWarning" not in both
    js = run_cli(*args, "--json")
    doc = json.loads(js.stdout)
    assert len(doc["warnings"]) == 1 and "GpuriskWarning" not in js.stderr
    assert set(doc) >= {"n", "N", "methods", "table3", "ipf", "keys", "categories", "warnings"}


# --- messages phrased for where they appear -------------------------------------------------------
def _missing_file(tmp_path):
    df = pd.DataFrame({"a": [1.0, None, 2.0, 2.0], "b": ["x", "y", "y", "x"]})
    src = tmp_path / "m.csv"
    df.to_csv(src, index=False)
    return df, src


def test_missing_message_names_the_parameter_in_python_and_the_flag_on_the_cli(tmp_path):
    from conftest import run_cli
    df, src = _missing_file(tmp_path)
    with pytest.raises(gpurisk.BadInput) as e:
        gpurisk.assess(df, "a,b", fraction=0.5, missing="error")
    assert "use missing='category'" in str(e.value) and "--missing" not in str(e.value)
    out = run_cli("assess", str(src), "--keys", "a,b", "--fraction", "0.5", "--missing", "error")
    assert out.returncode == 2
    line, = out.stderr.strip().splitlines()
    assert line.startswith("gpurisk: error: key column 'a' has 1 missing value(s)")
    assert "use --missing category" in line and "missing='category'" not in line


def test_record_risk_messages_name_parameters_in_python_and_flags_on_the_cli(tmp_path):
    from conftest import run_cli
    df = pd.DataFrame({"a": [1, 2, 2, 3, 3, 3], "b": list("xyxyxy")})
    src = tmp_path / "r.csv"
    df.to_csv(src, index=False)
    with pytest.raises(gpurisk.BadInput) as e:
        gpurisk.record_risk(df, "a,b")
    assert "population_size=" in str(e.value) and "--" not in str(e.value)
    with pytest.raises(gpurisk.BadInput) as e:
        gpurisk.record_risk(df, "a,b", fraction=0.5, methods=["r3"])
    assert "(y=)" in str(e.value) and "--y" not in str(e.value)
    out = run_cli("record-risk", str(src), "--keys", "a,b")
    assert out.returncode == 2 and "give --population-size" in out.stderr
    assert "population_size=" not in out.stderr
    out = run_cli("record-risk", str(src), "--keys", "a,b", "--fraction", "0.5", "--methods", "r3")
    assert out.returncode == 2 and "(--y)" in out.stderr and "y=" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
