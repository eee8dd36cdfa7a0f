"""gpurisk report: a self-contained HTML page that a headless browser renders (not blank)."""
from __future__ import annotations

import re
import shutil
import subprocess
from html.parser import HTMLParser

import numpy as np
import pandas as pd
import pytest

import gpurisk
from gpurisk.report import write_report

from conftest import data_path, run_cli


def _browser():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


@pytest.fixture(scope="module")
def scan_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("r") / "scan.parquet"
    df = pd.read_csv(data_path("arx/adult.csv"), sep=";")
    df["s"] = np.random.default_rng(1).random(len(df)) < 0.1
    gpurisk.scan(df, keys=["sex", "age", "race", "marital-status", "education"], max_size=3,
                 sample_flag="s", output=out, measures=["theta_hat", "pr_pu", "sample_uniques"])
    html_path = out.parent / "report.html"
    write_report(out, html_path, threshold=0.2)
    return out, df, html_path


def test_report_html_is_self_contained_and_shows_no_key_values(scan_dir):
    out, df, html_path = scan_dir
    page = html_path.read_text(encoding="utf-8")
    imgs = re.findall(r"src=[\"']data:image/png;base64,([A-Za-z0-9+/=]+)", page)
    assert len(imgs) == 3                                # by size, top, theta_hat vs threshold
    assert not re.search(r"(src|href)=['\"](?!data:)", page)   # nothing loaded from elsewhere
    text = re.sub(r"data:image/png;base64,[A-Za-z0-9+/=]+", "", page)   # "9th" may occur in base64
    for k in ("race", "marital-status", "education"):
        for v in df[k].unique():
            assert str(v) not in text, v
    assert "sex, age, race" in page                     # key names are shown


class _Refs(HTMLParser):
    """Every URL the parsed page would load: src/href/srcset/poster/data attributes and CSS url()."""

    def __init__(self):
        super().__init__()
        self.urls, self.in_style, self.text = [], False, []

    def handle_starttag(self, tag, attrs):
        for name, value in attrs:
            if name in ("src", "href", "srcset", "poster", "data", "action", "formaction") and value:
                self.urls.append(value)
            if name == "style" and value:
                self.urls += re.findall(r"url\(\s*['\"]?([^'\")]+)", value)
        self.in_style = tag == "style"

    def handle_endtag(self, tag):
        self.in_style = False

    def handle_data(self, data):
        if self.in_style:
            self.urls += re.findall(r"url\(\s*['\"]?([^'\")]+)", data)
            self.urls += re.findall(r"@import\s+['\"]([^'\"]+)", data)
        self.text.append(data)


def _external(urls):
    return [u for u in urls if not u.startswith(("data:", "#"))]


def test_report_loads_nothing_from_outside_itself(scan_dir):
    parser = _Refs()
    parser.feed(scan_dir[2].read_text(encoding="utf-8"))
    assert parser.urls and not _external(parser.urls), _external(parser.urls)[:5]
    # the parser's teeth: an http(s) src, a protocol-relative href and a CSS url() are all caught
    bad = _Refs()
    bad.feed("<img src='https://x.org/a.png'><a href='//cdn.x/b'>b</a>"
             "<div style=\"background:url('http://x/c.png')\"></div><style>@import 'http://x/d.css';</style>")
    assert len(_external(bad.urls)) == 4


def test_report_says_what_the_numbers_mean_what_drives_the_risk_and_what_to_do(scan_dir):
    out, df, html_path = scan_dir
    parser = _Refs()
    parser.feed(html_path.read_text(encoding="utf-8"))
    text = " ".join(" ".join(parser.text).split())
    for h in ("What the numbers mean", "Which key variables drive the risk", "What to do next",
              "Not plotted"):
        assert h in text, h
    assert "the estimated probability that a match an intruder finds on a unique key value is correct" in text
    assert "sample uniques: records that are the only one in the release" in text
    assert "Start with " in text
    assert not re.search(r"<code>[^<]*\b(DATA|WIDTH|PI|FILE)\b", html_path.read_text(encoding="utf-8"))


def test_key_contributions_are_measured_in_the_riskiest_combinations():
    """The drop when a key is left out, in the riskiest combinations (hand-made scan rows, drops
    by hand): the largest combination, (a, b, c), is only second; in the riskiest, (b, d) with 30
    expected matches, leaving out d removes 29 and b 27, so d and b lead although the largest
    combination (the old rule) would show b 8.9, c 8.5, a 8.0 and d nothing."""
    from gpurisk.report import key_contributions
    nan = float("nan")
    rows = [(["a"], 0.0), (["b"], 1.0), (["c"], 0.0), (["d"], 3.0), (["a", "b"], 0.5),
            (["a", "c"], 0.1), (["b", "c"], 1.0), (["b", "d"], 30.0), (["a", "d"], nan),
            (["c", "d"], 4.0), (["a", "b", "c"], 9.0)]
    df = pd.DataFrame({"keys": [r[0] for r in rows], "size": [len(r[0]) for r in rows],
                       "order": range(len(rows)), "matches_hat": [r[1] for r in rows],
                       "n1": [10 * i for i in range(len(rows))]})
    c = key_contributions(df, "matches_hat", top=3).set_index("key")
    # ranking: (b, d) 30, (a, b, c) 9, (c, d) 4
    assert list(c.index) == ["d", "b", "c", "a"]
    assert c.loc["d", "drop"] == 29.0 and c.loc["d", "combination"] == "b, d" and c.loc["d", "rank"] == 1
    assert c.loc["d", "combinations"] == 2 and c.loc["d", "mean_drop"] == (29.0 + 4.0) / 2
    assert c.loc["b", "drop"] == 27.0 and c.loc["b", "n1_drop"] == 70 - 30
    assert c.loc["b", "mean_drop"] == pytest.approx((27.0 + 8.9) / 2)
    assert c.loc["a", "drop"] == 8.0 and c.loc["a", "rank"] == 2        # (a,b,c) − (b,c)
    assert c.loc["c", "drop"] == 8.5 and c.loc["c", "rank"] == 2        # (a,b,c) − (a,b)
    assert c.loc["c", "mean_drop"] == pytest.approx((8.5 + 1.0) / 2)     # and (c,d) − (d)
    # only the top combinations count: with top=1, only (b, d)'s keys
    assert list(key_contributions(df, "matches_hat", top=1)["key"]) == ["d", "b"]


def test_key_drivers_on_a_planted_file_name_the_planted_key_first():
    """Planted: p (300 values) is harmless with the binary keys c and d (the first combinations of
    the largest size in scan order, (c, d, p)) but decisive with x and y (8 values each, harmless
    together): (p, x, y) is the riskiest combination and leaving p out of it removes the most."""
    rng = np.random.default_rng(7)
    n = 4000
    df = pd.DataFrame({"c": rng.integers(0, 2, n), "d": rng.integers(0, 2, n),
                       "p": rng.integers(0, 300, n), "x": rng.integers(0, 8, n),
                       "y": rng.integers(0, 8, n)})
    from gpurisk.report import key_contributions
    rows = gpurisk.scan(df, keys=["c", "d", "p", "x", "y"], max_size=3, fraction=0.05).results
    top = rows.sort_values("matches_hat", ascending=False).iloc[0]
    assert sorted(top["keys"]) == ["p", "x", "y"]
    value = {frozenset(k): v for k, v in zip(rows["keys"], rows["matches_hat"])}
    # in the first size-3 combination of the scan p hardly matters: (c, d, p) is near 2 matches
    assert value[frozenset("cdp")] - value[frozenset("cd")] < 0.01 * top["matches_hat"]
    c = key_contributions(rows, "matches_hat")
    assert c["key"].iloc[0] == "p" and c["combination"].iloc[0] == "p, x, y"
    assert c["drop"].iloc[0] == pytest.approx(value[frozenset("pxy")] - value[frozenset("xy")])
    assert c["drop"].iloc[0] > c["drop"].iloc[1]


def test_report_says_why_combinations_are_not_plotted(scan_dir, tmp_path):
    out, _, _ = scan_dir
    from gpurisk.scan import read_scan
    rows = read_scan(out)
    page = write_report(rows, tmp_path / "r.html", top=3).read_text(encoding="utf-8")
    section = page.split("<h2>Not plotted</h2>", 1)[1]
    shown = int(rows["theta_hat"].notna().sum())
    assert f"show the 3 highest of {shown} combinations" in section
    missing = int(rows["theta_hat"].isna().sum())
    if missing:       # one line per kind of reason: not estimable (no pair), undefined, ...
        counts = re.findall(r"(\d+) combination\(s\) have no theta_hat", section)
        assert sum(map(int, counts)) == missing, section


def test_report_renders_in_headless_chromium(scan_dir, tmp_path):
    browser = _browser()
    if browser is None:
        pytest.skip("no chromium in PATH (apt-get install -y chromium)")
    _, _, html_path = scan_dir
    shot = tmp_path / "report.png"       # kept as an artifact in pytest's temporary folder
    # no network at all: a page that tried to load something from outside would miss it
    proc = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu",
                           "--disable-background-networking", "--hide-scrollbars",
                           "--proxy-server=127.0.0.1:9", "--host-resolver-rules=MAP * ~NOTFOUND",
                           f"--screenshot={shot}", "--window-size=1000,5000",
                           html_path.resolve().as_uri()], capture_output=True, timeout=120)
    assert shot.exists() and shot.stat().st_size > 0, proc.stderr.decode()[-2000:]
    print(f"report screenshot: {shot}")
    import matplotlib.image as mpimg
    img = mpimg.imread(shot)
    assert img.shape[0] >= 1000 and img.shape[1] >= 900
    gray = img[..., :3].mean(axis=2)
    assert gray.std() > 0.05                              # not a blank page
    assert (gray < 0.5).mean() > 0.005                    # some dark ink: text and plot lines
    colourful = (img[..., :3].max(axis=2) - img[..., :3].min(axis=2)) > 0.3
    assert colourful.mean() > 0.001                       # the coloured plots were drawn


def test_report_cli_and_errors(scan_dir, tmp_path):
    out, _, _ = scan_dir
    p = run_cli("report", out, "-o", tmp_path / "r.html", "--measure", "nope", subprocess=True)
    assert p.returncode == 2 and "'nope'" in p.stderr
    with pytest.raises(gpurisk.BadInput, match="threshold"):
        write_report(out, tmp_path / "r.html", threshold=2)
