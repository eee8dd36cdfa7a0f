"""gpurisk report: a self-contained HTML page that a headless browser renders (not blank)."""
from __future__ import annotations

import re
import shutil
import subprocess

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
    imgs = re.findall(r"src='data:image/png;base64,([A-Za-z0-9+/=]+)'", page)
    assert len(imgs) == 3                                # by size, top, theta_hat vs threshold
    assert not re.search(r"(src|href)=['\"](?!data:)", page)   # nothing loaded from elsewhere
    for k in ("race", "marital-status", "education"):
        for v in df[k].unique():
            assert str(v) not in page, v
    assert "sex, age, race" in page                     # key names are shown


def test_report_renders_in_headless_chromium(scan_dir, tmp_path):
    browser = _browser()
    if browser is None:
        pytest.skip("no chromium in PATH (apt-get install -y chromium)")
    _, _, html_path = scan_dir
    shot = tmp_path / "shot.png"
    proc = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu",
                           "--disable-background-networking", "--hide-scrollbars",
                           f"--screenshot={shot}", "--window-size=1000,1400",
                           html_path.resolve().as_uri()], capture_output=True, timeout=120)
    assert shot.exists() and shot.stat().st_size > 0, proc.stderr.decode()[-2000:]
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
    p = run_cli("report", out, "-o", tmp_path / "r.html", "--measure", "nope")
    assert p.returncode == 2 and "'nope'" in p.stderr
    with pytest.raises(gpurisk.BadInput, match="threshold"):
        write_report(out, tmp_path / "r.html", threshold=2)
