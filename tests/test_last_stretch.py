"""Issue 42, "trust, the last stretch": the ten faults it lists, each on pandas and (where the
command reads records there) on Dask, and the further cases of the same kinds (docs/bad-input.md).

Each test fails on the code before the issue: a truncated SAS transport file read as whole, a
record's value in an internal error on Dask, a scan folder left empty on a full disk, a plugin
measure changing other measures through the table, a closed stdout ending the run, a blocked
plugin listed as loaded, a KeyboardInterrupt in a measure ending the run and ``gpurisk`` alone as
an error, a lost scheduler and SIGTERM, a report plan on other keys, and names that print the same
but differ, Excel's ``sep=`` line and a ragged row without its line number."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import unicodedata

import numpy as np
import pandas as pd
import pytest

from conftest import ROOT, run_cli
from _driver import run_many


def _one_error(p, *needles):
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    assert lines[0].startswith("gpurisk: error: "), p.stderr
    for s in needles:
        assert s in lines[0], (s, lines[0])
    return lines[0]


def _frame(n=300, seed=1):
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"age": rng.integers(18, 80, n), "sex": rng.choice(["m", "f"], n),
                         "reg": rng.integers(1, 6, n), "w": rng.uniform(1, 5, n)})


def _dask(backend, request):
    return (["--backend", "dask", "--scheduler", request.getfixturevalue("dask_scheduler")]
            if backend == "dask" else [])


def _json(p):
    assert p.returncode == 0, (p.returncode, p.stderr)
    return json.loads(p.stdout)


# --- 1. a SAS transport file cut at an 80-byte boundary ---------------------------------------

def _xpt(tmp_path, version):
    pyreadstat = pytest.importorskip("pyreadstat")
    p = tmp_path / f"v{version}.xpt"
    pyreadstat.write_xport(_frame(), str(p), file_format_version=version)
    return p


def _data_start(b: bytes) -> int:
    i = b.index(b"HEADER RECORD*******OBS")
    return i + 80


@pytest.mark.parametrize("backend", ["pandas", "dask"])
def test_xport_cut_at_a_record_boundary_is_refused(tmp_path, backend, request):
    """The first half of a 300-record XPORT version 8 file (cut at an 80-byte boundary) was read as
    n = 136, exit 0. Its header declares 300 records: refused, on pandas and Dask alike."""
    b = _xpt(tmp_path, 8).read_bytes()
    half = tmp_path / "half.xpt"
    half.write_bytes(b[: len(b) // 2 // 80 * 80])
    [p] = run_many([["assess", half, "--keys", "age,sex", *_dask(backend, request)]])
    _one_error(p, "not a readable SAS xport file", "truncated", "declares 300 records")


def test_every_xport_cut_is_refused_or_whole(tmp_path):
    """Every cut at an 80-byte boundary in the data: a version 8 file always refused (its header
    counts the records); a version 5 file (no count) refused unless the cut falls where a record
    also ends (then the part is indistinguishable from a whole file of fewer records: read, and
    its records are the first ones of the file, exactly)."""
    from gpurisk.errors import BadInput
    from gpurisk.io.formats import read_sas
    for version in (8, 5):
        full = _xpt(tmp_path, version)
        b = full.read_bytes()
        whole = read_sas(full)
        start = _data_start(b)
        row = 8 + 1 + 8 + 8                      # age, sex (1 byte), reg, w
        refused = read = 0
        for cut in range(start + 80, len(b), 80):
            q = tmp_path / "cut.xpt"
            q.write_bytes(b[:cut])
            try:
                got = read_sas(q)
            except BadInput as exc:
                assert "truncated" in str(exc)
                refused += 1
                continue
            read += 1
            assert version == 5 and (cut - start) % row == 0, (version, cut)
            pd.testing.assert_frame_equal(got, whole.head(len(got)))
        assert refused > 0
        if version == 8:
            assert read == 0


def test_stata_file_cut_inside_its_header_is_one_line(tmp_path):
    """New case of the same kind: a .dta cut inside its header ended in ``internal error: error:
    unpack requires a buffer of 10 bytes`` (struct.error); now one line at every cut."""
    from gpurisk.errors import BadInput
    from gpurisk.io.formats import read_stata
    full = tmp_path / "f.dta"
    _frame().to_stata(full, write_index=False)
    b = full.read_bytes()
    for cut in list(range(1, 1200, 13)) + list(range(1200, len(b), 97)):
        q = tmp_path / "cut.dta"
        q.write_bytes(b[:cut])
        with pytest.raises(BadInput, match="not a readable Stata file"):
            read_stata(q)
    [p] = run_many([["assess", tmp_path / "cut.dta", "--keys", "age,sex"]])
    _one_error(p, "not a readable Stata file")


# --- 2. a word late in a column of numbers, on Dask ---------------------------------------------

SECRET = "ZZSECRETWORD"


@pytest.fixture(scope="module")
def late_text(tmp_path_factory):
    d = tmp_path_factory.mktemp("late")
    rng = np.random.default_rng(0)
    n = 60_000
    num = rng.integers(0, 50, n).astype(object)
    num[58_999:] = SECRET
    sex = rng.choice(["m", "f"], n)
    p = d / "late_text.csv"
    pd.DataFrame({"num": num, "sex": sex}).to_csv(p, index=False)
    # and the other way round: words in the head, numbers only in the later blocks
    words = np.where(np.arange(n) < 30_000, np.array([f"w{i % 9}" for i in range(n)]),
                     rng.integers(0, 40, n).astype(str))
    q = d / "late_numbers.csv"
    pd.DataFrame({"num": words, "sex": sex}).to_csv(q, index=False)
    return p, q


def test_late_text_on_dask_reads_as_on_pandas(late_text, dask_scheduler):
    """``assess late_text.csv --backend dask`` ended in ``internal error: ValueError: Unable to
    parse string "<the word>" at position 58999``; Dask now reads the column as pandas does (text),
    and the counts are pandas'. The word appears nowhere."""
    for path in late_text:
        common = ["assess", path, "--keys", "num,sex", "--fraction", "0.1", "--json",
                  "--measures", "sample_uniques,theta_hat"]
        pandas_run, dask_run = run_many([common, common + ["--backend", "dask", "--scheduler",
                                                           dask_scheduler]])
        a, b = _json(pandas_run), _json(dask_run)
        for k in ("n", "cells", "freq_of_freq", "measures"):
            assert a[k] == b[k], k
        ref = pd.read_csv(path, dtype=str).value_counts(["num", "sex"])     # independent count
        assert b["cells"] == len(ref) and b["n"] == 60_000
        assert SECRET not in dask_run.stdout + dask_run.stderr


def test_a_parse_failure_never_quotes_the_value():
    """If a block still fails to convert (a type the whole-file pass could not foresee), the line
    says what happened, never the value; an unexpected error's quoted parts are withheld too."""
    from gpurisk.cli.app import _withheld
    from gpurisk.errors import BadInput
    from gpurisk.freq import _dask

    class Client:
        def compute(self, obj, sync):
            raise ValueError(f'Unable to parse string "{SECRET}" at position 58999')
    with pytest.raises(BadInput) as info:
        _dask._compute(Client(), [])
    assert SECRET not in str(info.value) and "differs between blocks" in str(info.value)
    text = _withheld(ValueError(f'Unable to parse string "{SECRET}" at position 3 in \'x\''))
    assert SECRET not in text and "<withheld>" in text


def test_an_internal_error_says_where_it_was_raised(tmp_path, monkeypatch):
    """A library's bare ``assert`` has no message: a one-off seen once in a test run ended in
    ``internal error: AssertionError:`` and nothing else, and could not be traced. The line now
    names the file (under its package's folder) and the line it came from; never a value."""
    from gpurisk.cli.app import _raised_at
    code = compile("def close(status):\n    pass\n    assert status == 'closed'\n",
                   "/opt/venv/lib/python3.11/site-packages/distributed/client.py", "exec")
    space: dict = {}
    exec(code, space)
    with pytest.raises(AssertionError) as info:
        space["close"]("closing")
    assert _raised_at(info.value) == " (at distributed/client.py:3)"
    import json
    with pytest.raises(TypeError) as info:
        json.loads(5)
    import re
    assert re.fullmatch(r" \(at python3\.\d+/json/(__init__|decoder)\.py:\d+\)",
                        _raised_at(info.value)), _raised_at(info.value)
    from gpurisk.workflows import assess as wf
    csv = tmp_path / "s.csv"
    pd.DataFrame({"a": [1, 2, 2], "b": [SECRET, "x", "x"]}).to_csv(csv, index=False)

    def broken(*a, **k):
        raise AssertionError            # as a bare assert does: no message
    monkeypatch.setattr(wf, "assess_with", broken)
    monkeypatch.delenv("GPURISK_DEBUG", raising=False)     # else the traceback, as asked
    from _driver import run_many
    [p] = run_many([["assess", csv, "--keys", "a,b"]])
    assert p.returncode == 1, p.stderr
    assert re.fullmatch(r"gpurisk: internal error: AssertionError \(at [^/ ]+/tests/test_last_stretch"
                        r"\.py:\d+\) \(set GPURISK_DEBUG=1 for the traceback\)\n", p.stderr), p.stderr


# --- 3. a scan onto a full disk -------------------------------------------------------------------

def test_a_dask_scan_whose_output_fails_closes_its_client(tmp_path, monkeypatch, dask_scheduler):
    """A Dask scan whose output could not be made (a full disk: the manifest's write failed) left
    its combinations open, and with them a running client, to the garbage collector. That closed
    the client at some later moment of the process, e.g. inside the next command's own client's
    start: in 10 runs of test_bad_input.py the full-disk test on Dask hung once (py-spy:
    ``Client.close`` called from the scan's generator inside ``Client.__init__`` of ``record-risk``)
    and 3 times ended in "internal error: AssertionError" (distributed's ``assert loop is not
    None``: the late close had stopped the loop the new client started on); 0 of 10 with the fix.
    Now the client is closed before the error line."""
    import gc

    import distributed.client as dc

    from gpurisk.errors import BadInput
    from gpurisk.workflows import scan as wf

    def full(*a, **k):
        raise BadInput("cannot write 's.parquet/_scan.json': No space left on device")
    monkeypatch.setattr(wf, "ParquetSink", full)
    csv = tmp_path / "s.csv"
    rng = np.random.default_rng(0)
    pd.DataFrame({k: rng.integers(0, 4 + i, 2_000) for i, k in enumerate("abc")}).to_csv(
        csv, index=False)
    before = {id(c) for c in dc.Client._instances}
    gc.disable()                 # the collector would hide the leak by closing it
    try:
        from _driver import run_many
        [p] = run_many([["scan", csv, "--keys", "a,b,c", "--fraction", "0.1", "-o",
                         tmp_path / "s.parquet", "--backend", "dask", "--scheduler", dask_scheduler]])
        left = [c.status for c in dc.Client._instances if id(c) not in before]
    finally:
        gc.enable()
    assert p.returncode == 2 and "No space left on device" in p.stderr, p.stderr
    assert left, "the scan made no client of its own: nothing was checked"
    assert all(st == "closed" for st in left), left


def test_scan_on_a_full_disk_leaves_no_folder(tmp_path, monkeypatch):
    """The manifest could not be written (ENOSPC): one line, and no ``s.parquet/`` under the final
    name (an empty folder was left, which the next run took for a scan)."""
    import errno

    from gpurisk.errors import BadInput
    from gpurisk.scan import sink

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(sink.os, "fsync", full)
    out = tmp_path / "s.parquet"
    with pytest.raises(BadInput, match="No space left on device"):
        sink.ParquetSink(out, {"keys": ["a"]}, ["sample_uniques"])
    assert not out.exists()
    assert [f.name for f in tmp_path.iterdir()] == []


@pytest.mark.parametrize("backend", ["pandas", "dask"])
def test_scan_on_a_real_full_filesystem_leaves_no_folder(tmp_path, backend, request):
    """The same on a full tmpfs (root only), on pandas and Dask."""
    from test_bad_input import _mount_tmpfs, _umount
    full = tmp_path / "full"
    if not _mount_tmpfs(full, "size=64k"):
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        (full / "filler").write_bytes(b"\0" * 62_000)
        _frame().to_csv(tmp_path / "d.csv", index=False)
        [p] = run_many([["scan", tmp_path / "d.csv", "--keys", "age,sex,reg", "-o", full / "s.parquet",
                         "--no-progress", *_dask(backend, request)]])
        _one_error(p, "No space left on device")
        assert sorted(f.name for f in full.iterdir()) == ["filler"]
    finally:
        _umount(full)


# --- 4, 5, 7: plugins that reach shared state ------------------------------------------------------

TOYS = '''
import os, sys
import numpy as np
import gpurisk

class EditCells(gpurisk.Measure):
    name = "toy_edit_cells"
    description = "turns the cells of two records into sample uniques, in the table"
    def compute(self, table, ctx):
        f = table.f
        f.flags.writeable = True
        f[f == 2] = 1
        if table.F is not None:
            table.F.flags.writeable = True
            table.F[:] = 1
        return gpurisk.Result(value=float(int((f == 1).sum())))

class EditMore(gpurisk.Measure):
    name = "toy_edit_more"
    description = "edits the categories, the context, the caches and the record cells"
    def compute(self, table, ctx):
        table.categories[0].append("zzz")
        ctx.fraction = 0.9
        ctx.options.setdefault("theta_hat_dis", {})["K"] = 2
        z = table.fof_vector()
        z.flags.writeable = True
        z[1] = 999
        for name in ("cell_id", "w"):
            a = getattr(table, name)
            if a is not None:
                a.flags.writeable = True
                a[:] = 0
        return gpurisk.Result(value=1.0)

class EditSummary(gpurisk.Measure):
    name = "toy_edit_summary"
    description = "edits a summary table's frequencies of frequencies"
    reads = "summary"
    def compute(self, table, ctx):
        s = getattr(table, "summary", None)
        if s is not None:
            s.freq_of_freq[1] = 999_999
            s.joint.clear()
        return gpurisk.Result(value=1.0)

class EditBucket(gpurisk.Measure):
    name = "toy_edit_bucket"
    description = "edits its bucket's counts and weights"
    needs = frozenset({"weights"})
    reads = "buckets"
    def map_bucket(self, bucket, ctx):
        for a in (bucket.f, bucket.w):
            a.flags.writeable = True
            a[:] = 1
        return {"k": 1}
    def reduce_buckets(self, parts, table, ctx):
        return gpurisk.Result(value=1.0)

class CloseStdout(gpurisk.Measure):
    name = "toy_close_stdout"
    description = "closes sys.stdout"
    def compute(self, table, ctx):
        sys.stdout.close()
        return gpurisk.Result(value=1.0)

class CloseStreams(gpurisk.Measure):
    name = "toy_close_streams"
    description = "closes and replaces the other streams, then fd 1"
    def compute(self, table, ctx):
        sys.stderr.close()
        sys.stdout.buffer.close()
        if sys.stdin is not None:
            sys.stdin.close()
        sys.stdout = None
        os.close(1)
        return gpurisk.Result(value=1.0)

class CloseOriginals(gpurisk.Measure):
    name = "toy_close_originals"
    description = "closes sys.__stdout__ and sys.__stderr__, fd 2 through open(2) and fd 1 in C"
    def compute(self, table, ctx):
        import ctypes
        sys.__stdout__.close()
        sys.__stderr__.close()
        open(2, "w").close()
        ctypes.CDLL(None).close(1)
        return gpurisk.Result(value=1.0)

class Fdopen(gpurisk.Measure):
    name = "toy_fdopen"
    description = "closes fd 1 through os.fdopen"
    def compute(self, table, ctx):
        os.fdopen(1, "w").close()
        return gpurisk.Result(value=1.0)

class Interrupts(gpurisk.Measure):
    name = "toy_interrupts"
    description = "raises KeyboardInterrupt"
    def compute(self, table, ctx):
        raise KeyboardInterrupt

@gpurisk.hookimpl
def gpurisk_register_measures():
    return [EditCells, EditMore, EditSummary, EditBucket, CloseStdout, CloseStreams,
            CloseOriginals, Fdopen, Interrupts]
'''

OTHERS = "sample_uniques,theta_hat,indiv_risk,theta_hat_dis,tau1_hat,pr_pu,k_anonymity"


@pytest.fixture(scope="module")
def toy_site(tmp_path_factory):
    from _fake_plugin import install
    d = tmp_path_factory.mktemp("site")
    return install(d, "gpurisk-toys42", "toys42", "gpurisk_toys42", TOYS, "0.1")


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    d = tmp_path_factory.mktemp("sample")
    df = _frame(2000, seed=5)
    df.to_csv(d / "s.csv", index=False)
    pd.concat([df] * 4).to_csv(d / "pop.csv", index=False)
    return d


def _values(doc):
    return {k: (v["value"], v.get("reason")) for k, v in doc["measures"].items()}


@pytest.mark.parametrize("backend", ["pandas", "dask"])
def test_a_plugin_cannot_change_other_measures(toy_site, sample, backend, request):
    """A measure that turns the table's counts writeable and edits them (cells of 2 into sample
    uniques: sample_uniques 31 -> 118 in the issue), its categories, the context, the cached
    frequencies of frequencies, a summary table's dictionaries, or its bucket's arrays: every other
    measure gives what it gives without it."""
    dask = _dask(backend, request)
    base = ["assess", sample / "s.csv", "--keys", "age,sex,reg", "--json", *dask]
    runs = {
        "file": (["--fraction", "0.1"], OTHERS),
        "pop": (["--population", sample / "pop.csv"], OTHERS),
        "weights": (["--weights", "w"], "sample_uniques,theta_hat_weighted"),
    }
    toys = "toy_edit_cells,toy_edit_more,toy_edit_summary,toy_edit_bucket"
    for name, (extra, others) in runs.items():
        plain, edited = run_many([base + extra + ["--measures", others],
                                  base + extra + ["--measures", f"{toys},{others}"]],
                                 pythonpath=[toy_site])
        a, b = _json(plain), _json(edited)
        got = {k: v for k, v in _values(b).items() if not k.startswith("toy_")}
        assert got == _values(a), name
        assert b["cells"] == a["cells"] and b["freq_of_freq"] == a["freq_of_freq"], name


def test_a_plugin_closing_stdout_does_not_end_the_run(toy_site, sample):
    """``sys.stdout.close()`` in a measure ended the run with ``internal error: ValueError: I/O
    operation on closed file``, every result lost; closing or replacing the other streams, and
    ``os.close(1)``, likewise. In a real process: the JSON document parses, every other measure
    is there."""
    env = {"PYTHONPATH": str(toy_site)}
    for toy in ("toy_close_stdout", "toy_close_streams", "toy_close_originals", "toy_fdopen"):
        p = run_cli("assess", sample / "s.csv", "--keys", "age,sex,reg", "--fraction", "0.1",
                    "--json", "--measures", f"{toy},sample_uniques,theta_hat", env=env,
                    subprocess=True)
        doc = _json(p)
        assert doc["measures"]["sample_uniques"]["value"] > 0, toy
        assert doc["measures"]["theta_hat"]["value"] is not None, toy
        assert p.stderr == "", p.stderr
        if toy in ("toy_close_streams", "toy_fdopen"):
            assert "refused while measures run" in doc["measures"][toy]["reason"], toy
    # scan: its table and closing lines are printed after the measures ran
    p = run_cli("scan", sample / "s.csv", "--keys", "age,sex,reg", "--fraction", "0.1",
                "--measures", "toy_close_stdout,theta_hat", "--no-progress", env=env, subprocess=True)
    assert p.returncode == 0 and p.stderr == "", p.stderr
    assert "theta_hat" in p.stdout


@pytest.mark.parametrize("backend", ["pandas", "dask"])
def test_keyboard_interrupt_in_a_measure_is_its_row(toy_site, sample, backend, request):
    """A measure raising KeyboardInterrupt ended the run: exit 130, "aborted", the other measures
    lost. It is that measure's row now, exit 0."""
    [p] = run_many([["assess", sample / "s.csv", "--keys", "age,sex,reg", "--fraction", "0.1",
                     "--json", "--measures", "toy_interrupts,sample_uniques,theta_hat",
                     *_dask(backend, request)]], pythonpath=[toy_site])
    doc = _json(p)
    assert doc["measures"]["toy_interrupts"]["reason"] == "measure raised KeyboardInterrupt"
    assert doc["measures"]["theta_hat"]["value"] is not None


# --- 6. a blocked plugin --------------------------------------------------------------------------

def test_plugins_lists_a_blocked_plugin_as_blocked(toy_site):
    """``gpurisk plugins`` listed a blocked plugin as "loaded" (``evil_broken (registered at run
    time) loaded``): blocked, with its package where it is installed; a name matching no plugin
    says so; registering a blocked name from Python is refused (pluggy ignored it silently)."""
    from gpurisk import plugins
    from gpurisk.errors import PluginError
    env = {"GPURISK_BLOCK_PLUGINS": "toys42,evil_broken"}
    # run_many sets only PYTHONPATH: the block list goes through the environment of this process
    os.environ.update(env)
    try:
        table, js = run_many([["plugins"], ["plugins", "--json"]], pythonpath=[toy_site])
        rows = {r["plugin"]: r for r in json.loads(js.stdout)}
        assert rows["toys42"]["status"] == "blocked" and rows["toys42"]["package"] == "gpurisk-toys42"
        assert rows["evil_broken"]["status"] == "blocked"
        assert rows["evil_broken"]["package"] == "(not installed)"
        line = next(ln for ln in table.stdout.splitlines() if ln.startswith("toys42"))
        assert "blocked" in line and "loaded" not in line
        assert not any(ln.startswith("evil_broken") and "loaded" in ln for ln in table.stdout.splitlines())
        plugins.reset()
        with pytest.raises(PluginError, match="blocked"):
            plugins.register(object(), name="evil_broken")
    finally:
        for k in env:
            os.environ.pop(k, None)
        plugins.reset()


# --- 7. gpurisk with no arguments -------------------------------------------------------------------

def test_gpurisk_alone_prints_its_help():
    """``gpurisk`` alone printed "gpurisk: error: Usage: ..." and 20 more lines, exit 2: its help
    on stdout, nothing on stderr, exit 0."""
    p = run_cli(subprocess=True)
    assert p.returncode == 0 and p.stderr == ""
    assert p.stdout.startswith("Usage: gpurisk") and "Commands:" in p.stdout


# --- 8. a lost scheduler, SIGTERM -------------------------------------------------------------------

def _wait_for(pred, timeout=120.0, step=0.2):
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if pred():
            return True
        time.sleep(step)
    return False


def _env():
    return dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="200")


def test_sigterm_to_validate_resume_is_one_line_and_releases_its_lock(tmp_path):
    """SIGTERM to a running ``validate --resume DIR`` died without a word and left ``.DIR.lock``;
    now one line saying how to go on, exit 143, the lock gone, and the same command finishes to
    the output of an uninterrupted run."""
    rng = np.random.default_rng(3)
    pop = pd.DataFrame({f"k{i}": rng.integers(0, 6 + 4 * i, 60_000) for i in range(4)})
    pop.to_csv(tmp_path / "pop.csv", index=False)
    args = ["validate", str(tmp_path / "pop.csv"), "--keys", "k0,k1,k2,k3", "--fractions",
            "0.05,0.1", "--replicates", "30", "--resume", str(tmp_path / "v"), "-o"]
    proc = subprocess.Popen([sys.executable, "-m", "gpurisk", *args, str(tmp_path / "a.csv")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(),
                            preexec_fn=_signals_default)
    assert _wait_for(lambda: any((tmp_path / "v").glob("part-*"))), proc.communicate()
    os.kill(proc.pid, signal.SIGTERM)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, (proc.returncode, err)
    assert err.strip().splitlines() == ["gpurisk: terminated (SIGTERM); the chunks finished so far "
                                        "are kept: run the same command again to go on"], err
    assert not (tmp_path / ".v.lock").exists()
    assert not (tmp_path / "a.csv").exists()
    again = run_cli(*args, tmp_path / "a.csv", subprocess=True)
    assert again.returncode == 0, again.stderr
    fresh = run_cli(*args[:-3], "--resume", tmp_path / "w", "-o", tmp_path / "b.csv", subprocess=True)
    assert fresh.returncode == 0, fresh.stderr
    assert (tmp_path / "a.csv").read_bytes() == (tmp_path / "b.csv").read_bytes()


def test_sighup_to_scan_is_one_line_and_releases_its_lock(tmp_path):
    """The same kind of fault by another signal: SIGHUP (the terminal closed) to ``scan -o``,
    whose default would end the process where it stands."""
    rng = np.random.default_rng(4)
    pd.DataFrame({f"k{i}": rng.integers(0, 4 + 3 * i, 60_000) for i in range(9)}).to_csv(
        tmp_path / "d.csv", index=False)
    out = tmp_path / "s.parquet"
    proc = subprocess.Popen([sys.executable, "-m", "gpurisk", "scan", str(tmp_path / "d.csv"),
                             "--keys", ",".join(f"k{i}" for i in range(9)), "--max-size", "4",
                             "--fraction", "0.1", "-o", str(out), "--no-progress",
                             "--batch-rows", "5"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(),
                            preexec_fn=_signals_default)
    assert _wait_for(lambda: any(out.glob("part-*.parquet"))), proc.communicate()
    os.kill(proc.pid, signal.SIGHUP)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 129, (proc.returncode, err)
    assert err.strip().splitlines() == ["gpurisk: terminated (SIGHUP); the rows finished so far are "
                                        "kept: run the same command with --resume to finish the "
                                        "scan"], err
    assert not (tmp_path / ".s.parquet.lock").exists()
    assert not [f for f in out.iterdir() if f.name.startswith(".")]


def _signals_default():
    """In the child, before exec: SIGINT, SIGTERM and SIGHUP at their defaults and unblocked, as
    at a terminal. A child inherits an ignored or blocked signal (a test worker's SIGINT may be,
    depending on what ran in it before; every signal of a run started under ``nohup`` ignores
    SIGHUP), and gpurisk then keeps it so, as it should under nohup: the run ignored Ctrl-C, and a
    ``.ci/run`` started with nohup saw the scan ignore SIGHUP and finish (exit 0)."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM, signal.SIGHUP})


def test_ctrl_c_is_one_line_without_clicks_empty_line(tmp_path):
    """Ctrl-C (SIGINT) printed an empty line, then "gpurisk: aborted": one line with how to go on,
    exit 130, the lock released."""
    rng = np.random.default_rng(5)
    pd.DataFrame({f"k{i}": rng.integers(0, 6 + 4 * i, 60_000) for i in range(4)}).to_csv(
        tmp_path / "pop.csv", index=False)
    # 300 replicates (a chunk of 5 about every 0.25 s, 30 s in all): the run cannot finish between
    # its first chunk and the signal, however loaded the machine (with 30, the whole run took 5 s
    # and under load it once ended before the signal came: exit 0)
    proc = subprocess.Popen([sys.executable, "-m", "gpurisk", "validate", str(tmp_path / "pop.csv"),
                             "--keys", "k0,k1,k2,k3", "--fractions", "0.05,0.1", "--replicates", "300",
                             "--resume", str(tmp_path / "v")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(),
                            preexec_fn=_signals_default)
    assert _wait_for(lambda: any((tmp_path / "v").glob("part-*"))), proc.communicate()
    os.kill(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, (proc.returncode, err)
    assert err == ("gpurisk: interrupted; the chunks finished so far are kept: run the same command "
                   "again to go on\n"), err
    assert not (tmp_path / ".v.lock").exists()


@pytest.mark.slow
def test_ctrl_c_to_a_dask_scans_process_group_is_one_line(tmp_path):
    """Ctrl-C at a terminal reaches the whole foreground process group, the local cluster's worker
    processes included: each printed its KeyboardInterrupt traceback after gpurisk's line (67
    lines for two workers), and the client logged the gather it cut short. Now gpurisk's one line
    alone, exit 130; the same command with --resume then finishes every combination."""
    pytest.importorskip("distributed")
    import signal
    rng = np.random.default_rng(2)
    pd.DataFrame({f"k{i}": rng.integers(0, 5 + 3 * i, 100_000) for i in range(10)}).to_csv(
        tmp_path / "big.csv", index=False)
    out = tmp_path / "s"
    scan = [sys.executable, "-m", "gpurisk", "scan", str(tmp_path / "big.csv"), "--keys",
            ",".join(f"k{i}" for i in range(10)), "--max-size", "3", "--fraction", "0.1",
            "--backend", "dask", "--workers", "2", "-o", str(out), "--no-progress",
            "--batch-rows", "5", "--measures", "sample_uniques,theta_hat,indiv_risk,matches_ll"]
    # indiv_risk maps each combination's buckets, so each combination is a graph of its own and
    # the rows arrive combination by combination (the test of a lost scheduler says more)
    proc = subprocess.Popen(scan, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=_env(), start_new_session=True, preexec_fn=_signals_default)
    try:
        assert _wait_for(lambda: any(out.glob("part-*.parquet")), timeout=300, step=0.05), \
            proc.communicate()
        os.killpg(proc.pid, signal.SIGINT)           # as a terminal's Ctrl-C: the whole group
        _, err = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 130, err
    assert err == ("gpurisk: interrupted; the rows finished so far are kept: run the same command "
                   "with --resume to finish the scan\n"), err
    done = subprocess.run(scan + ["--resume"], capture_output=True, text=True, env=_env(),
                          timeout=300)
    assert done.returncode == 0, done.stderr
    from gpurisk.scan import read_scan
    assert len(read_scan(out).results) == 10 + 45 + 120


LOST_INTERRUPT = r"""
import gc, os, signal, sys, time
from gpurisk.cli import app
if sys.argv[1] == "fixed":
    app._redeliver_lost_interrupts()
sent = []

def callback(phase, info):          # as distributed's scheduler hooks every full collection
    if phase == "start" and not sent:
        sent.append(1)
        os.kill(os.getpid(), signal.SIGINT)   # Ctrl-C lands while the callback runs
        sum(range(10_000))                   # the handler runs here: "Exception ignored in"
gc.callbacks.append(callback)
try:
    gc.collect()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        sum(range(1000))
    print("ran on to the end")
except KeyboardInterrupt:
    print("interrupted")
"""


def test_an_interrupt_that_lands_in_a_gc_callback_is_not_lost():
    """Ctrl-C that landed while a garbage-collection callback ran (the local cluster's scheduler,
    in gpurisk's process, hooks every full collection) was printed as "Exception ignored in ...
    KeyboardInterrupt" and dropped: the scan ran on to the end, exit 0 (3 of 11 runs of the test
    below with the interrupt sent the moment the first rows were written). It is now raised again
    outside the callback, and nothing is printed."""
    runs = {how: subprocess.run([sys.executable, "-c", LOST_INTERRUPT, how], capture_output=True,
                                text=True, env=_env(), timeout=120, preexec_fn=_signals_default)
            for how in ("plain", "fixed")}          # SIGINT as at a terminal (a CI job's may be ignored)
    plain, fixed = runs["plain"], runs["fixed"]
    assert plain.stdout == "ran on to the end\n" and "Exception ignored" in plain.stderr, plain
    assert fixed.stdout == "interrupted\n" and fixed.stderr == "", fixed


def test_a_dask_run_beside_another_cluster_says_nothing_of_the_port(tmp_path):
    """Port 8787 taken (another Dask cluster's dashboard on the machine): the local cluster's
    scheduler put its HTTP routes on another port and Dask warned on stderr at every run, four
    lines about nothing the user asked. Now the run's output alone."""
    pytest.importorskip("distributed")
    import socket
    rng = np.random.default_rng(4)
    pd.DataFrame({f"k{i}": rng.integers(0, 4 + i, 2_000) for i in range(3)}).to_csv(
        tmp_path / "s.csv", index=False)
    holder = socket.socket()
    try:
        try:
            holder.bind(("", 8787))
            holder.listen()
        except OSError:           # taken already: as good for this test
            pass
        run = subprocess.run([sys.executable, "-m", "gpurisk", "assess", str(tmp_path / "s.csv"),
                              "--keys", "k0,k1,k2", "--fraction", "0.1", "--backend", "dask",
                              "--workers", "1", "--measures", "theta_hat", "--json"],
                             capture_output=True, text=True, env=_env(), timeout=300)
    finally:
        holder.close()
    assert run.returncode == 0, run.stderr
    assert run.stderr == "", run.stderr


@pytest.mark.slow
def test_lost_scheduler_is_one_line_with_how_to_resume(tmp_path):
    """The external scheduler killed mid-scan: 37 lines of chained tracebacks and ``internal
    error: FutureCancelledError ... scheduler-connection-lost``, exit 1. Now one line naming the
    scheduler and ``--resume``, exit 2; then --resume on a new cluster finishes to the rows of an
    uninterrupted scan."""
    pytest.importorskip("distributed")
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    address = f"tcp://127.0.0.1:{port}"
    dask = [sys.executable, "-m", "distributed.cli.dask_scheduler"]
    rng = np.random.default_rng(2)
    pd.DataFrame({f"k{i}": rng.integers(0, 5 + 3 * i, 100_000) for i in range(10)}).to_csv(
        tmp_path / "big.csv", index=False)
    out = tmp_path / "s.parquet"
    scan = ["scan", str(tmp_path / "big.csv"), "--keys", ",".join(f"k{i}" for i in range(10)),
            "--max-size", "3", "--fraction", "0.1", "--backend", "dask", "--scheduler", address,
            "-o", str(out), "--no-progress", "--measures", "sample_uniques,theta_hat,indiv_risk",
            "--cells-on-workers", "--batch-rows", "5"]     # each combination on the cluster
    # indiv_risk maps the buckets of each combination: each is merged by a graph of its own, so the
    # rows arrive combination by combination (about 4 s of them left after the first are written,
    # one worker); measures of summaries alone merge a batch of up to 256 combinations whole, and
    # these 175 would come back at once, the scan over before the scheduler is killed
    procs = []
    try:
        sched = subprocess.Popen([*dask, "--host", "127.0.0.1", "--port", str(port),
                                  "--no-dashboard"], stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL, env=_env())
        procs.append(sched)
        worker = subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_worker", address,
                                   "--nthreads", "1", "--no-dashboard", "--memory-limit", "1GiB"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=_env())
        procs.append(worker)
        run = subprocess.Popen([sys.executable, "-m", "gpurisk", *scan], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env=_env())
        procs.append(run)
        assert _wait_for(lambda: any(out.glob("part-*.parquet")), timeout=300), run.communicate()
        sched.kill()                     # mid-scan: rows written, more to come
        _, err = run.communicate(timeout=180)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    lines = err.strip().splitlines()
    assert run.returncode == 2, err
    assert len(lines) == 1 and "Traceback" not in err, err
    assert f"the Dask scheduler at '{address}' went away" in lines[0]
    assert "--resume" in lines[0]
    # resumed on a local cluster: the rows of one uninterrupted scan
    local = [a for a in scan if a not in ("--scheduler", address)] + ["--workers", "1"]
    resumed = run_cli(*local, "--resume", subprocess=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr
    whole = run_cli(*[a if a != str(out) else str(tmp_path / "w.parquet") for a in local],
                    subprocess=True, timeout=600)
    assert whole.returncode == 0, whole.stderr
    from gpurisk.scan import read_scan
    cols = ["combo", "n", "cells", "n1", "sample_uniques", "theta_hat"]
    a = read_scan(out).to_frame()[cols].sort_values("combo").reset_index(drop=True)
    b = read_scan(tmp_path / "w.parquet").to_frame()[cols].sort_values("combo").reset_index(drop=True)
    pd.testing.assert_frame_equal(a, b)


def test_cluster_lost_is_recognised():
    """distributed's ways of saying the scheduler went away, and not other errors."""
    from gpurisk.backends.cluster import _lost

    class FutureCancelledError(Exception):
        pass

    class CommClosedError(OSError):
        pass
    assert _lost(FutureCancelledError("x cancelled for reason: scheduler-connection-lost."))
    assert _lost(CommClosedError("in <TCP>: ConnectionRefusedError"))
    assert not _lost(ValueError("something else"))


# --- 9. a report whose plan protects other keys -----------------------------------------------------

def test_report_refuses_a_plan_on_other_keys(tmp_path):
    """``report --plan`` with a plan of other keys recommended that plan's protection without a
    word: one line naming both sets of keys; the plan of the scan's keys still works."""
    df = _frame(600)
    df.to_csv(tmp_path / "d.csv", index=False)
    s, other, mine = tmp_path / "s.parquet", tmp_path / "other.json", tmp_path / "mine.json"
    runs = run_many([
        ["scan", tmp_path / "d.csv", "--keys", "age,sex", "--fraction", "0.1", "-o", s,
         "--no-progress"],
        ["protect", tmp_path / "d.csv", "--keys", "reg,w", "--hierarchy", "w=bands:1",
         "--criterion", "k_anonymity>=2", "--plan", other, "-o", tmp_path / "p1.csv",
         "--allow-high-cardinality"],
        ["protect", tmp_path / "d.csv", "--keys", "age,sex", "--hierarchy", "age=bands:10",
         "--criterion", "k_anonymity>=2", "--plan", mine, "-o", tmp_path / "p2.csv"],
    ])
    assert [p.returncode for p in runs] == [0, 0, 0], [p.stderr for p in runs]
    bad, good = run_many([["report", s, "--plan", other, "-o", tmp_path / "r1.html"],
                          ["report", s, "--plan", mine, "-o", tmp_path / "r2.html"]])
    _one_error(bad, "--plan", "reg, w", "none of them is among the scan's keys (age, sex)")
    assert not (tmp_path / "r1.html").exists()
    assert good.returncode == 0, good.stderr
    from gpurisk.report.protection import check_plan_keys
    from gpurisk.errors import BadInput
    with pytest.raises(BadInput, match="'reg' is not among"):
        check_plan_keys({"gpurisk_protect_plan": 1, "node": {}, "keys": ["age", "reg"]}, ["age", "sex"])


def test_report_refuses_a_suda_summary_of_other_keys(tmp_path):
    """The same for ``--suda``: a SUDA summary of other keys would be judged as the scan's."""
    _frame(600).to_csv(tmp_path / "d.csv", index=False)
    s = tmp_path / "s.parquet"
    scan, suda = run_many([["scan", tmp_path / "d.csv", "--keys", "age,sex", "--fraction", "0.1",
                            "-o", s, "--no-progress"],
                           ["suda", tmp_path / "d.csv", "--keys", "sex,reg", "--json"]])
    assert scan.returncode == 0 and suda.returncode == 0, (scan.stderr, suda.stderr)
    (tmp_path / "suda.json").write_text(suda.stdout)
    [p] = run_many([["report", s, "--suda", tmp_path / "suda.json", "-o", tmp_path / "r.html"]])
    _one_error(p, "--suda", "'reg' is not among the scan's keys (age, sex)")


# --- 10. names that print the same, Excel's sep= line, the line of a ragged row ---------------------

@pytest.fixture(scope="module")
def spelled(tmp_path_factory):
    d = tmp_path_factory.mktemp("names")
    df = _frame(800)
    nfd = unicodedata.normalize("NFD", "Région")
    assert nfd != "Région"
    df.rename(columns={"reg": nfd}).to_csv(d / "nfd.csv", index=False)
    df.rename(columns={"reg": nfd}).to_parquet(d / "nfd.parquet")
    text = df.to_csv(index=False, sep=";")
    (d / "excel.csv").write_text("sep=;\n" + text)
    (d / "plain.csv").write_text(text)
    return d, df


@pytest.mark.parametrize("backend", ["pandas", "dask"])
def test_decomposed_column_names_match_composed_keys(spelled, backend, request):
    """A header "Région" written decomposed (NFD) and ``--keys Région`` typed composed: "column(s)
    'Région' not in ... (its columns: age, sex, Région, ...)". Names are compared in NFC: the
    same counts as the column under a plain name, in CSV and Parquet, as key and as weights."""
    d, df = spelled
    dask = _dask(backend, request)
    runs = run_many([["assess", d / name, "--keys", "age,Région", "--fraction", "0.1", "--json",
                      "--measures", "sample_uniques", *dask] for name in ("nfd.csv", "nfd.parquet")])
    counts = df.value_counts(["age", "reg"])                              # independent count
    for p in runs:
        doc = _json(p)
        assert doc["cells"] == len(counts)
        assert doc["measures"]["sample_uniques"]["value"] == int((counts == 1).sum())
    nfd = unicodedata.normalize("NFD", "Région")
    [p] = run_many([["assess", d / "nfd.csv", "--keys", f"age,{nfd}", "--weights", "w", "--json",
                     "--measures", "sample_uniques", *dask]])
    assert _json(p)["cells"] == len(counts)


def test_decomposed_names_in_the_other_options(spelled):
    """The other places a column is named: ``--recode``, ``protect --hierarchy`` and
    ``record-risk --id`` typed decomposed, the header composed (a CSV rewritten by another
    program): the same results as spelled alike (``--id`` was an internal KeyError)."""
    d, df = spelled
    nfd = unicodedata.normalize("NFD", "Région")
    df.rename(columns={"reg": "Région"}).to_csv(d / "nfc.csv", index=False)
    runs = run_many([
        ["assess", d / "nfc.csv", "--keys", "age,Région", "--recode", f"{nfd}=bands:2",
         "--json", "--measures", "sample_uniques"],
        ["assess", d / "nfc.csv", "--keys", "age,Région", "--recode", "Région=bands:2",
         "--json", "--measures", "sample_uniques"],
        ["protect", d / "nfc.csv", "--keys", "age,Région", "--hierarchy", "age=bands:10",
         "--hierarchy", f"{nfd}=bands:4", "--criterion", "k_anonymity>=2", "-o", d / "p1.csv"],
        ["protect", d / "nfc.csv", "--keys", "age,Région", "--hierarchy", "age=bands:10",
         "--hierarchy", "Région=bands:4", "--criterion", "k_anonymity>=2", "-o", d / "p2.csv"],
        ["record-risk", d / "nfc.csv", "--keys", "age,sex", "--population-size", "5000", "--id",
         nfd, "-o", d / "r.parquet", "--threshold", "0"],
    ])
    for p in runs:
        assert p.returncode == 0, p.stderr
    assert _json(runs[0])["measures"] == _json(runs[1])["measures"]
    assert (d / "p1.csv").read_bytes() == (d / "p2.csv").read_bytes()
    rows = pd.read_parquet(d / "r.parquet")
    assert rows["Région"].tolist() == df["reg"].iloc[rows["row"]].tolist()


@pytest.mark.parametrize("backend", ["pandas", "dask"])
def test_excel_sep_line_is_honoured(spelled, backend, request):
    """A CSV whose first line is Excel's ``sep=;`` was read as columns "sep=" and "Unnamed: 1":
    the line names the separator and is not the header."""
    d, df = spelled
    dask = _dask(backend, request)
    a, b = run_many([["assess", d / name, "--keys", "age,sex,reg", "--json", "--measures",
                      "sample_uniques", *dask] for name in ("excel.csv", "plain.csv")])
    assert _json(a)["n"] == len(df)
    assert {k: _json(a)[k] for k in ("cells", "freq_of_freq")} == \
        {k: _json(b)[k] for k in ("cells", "freq_of_freq")}


@pytest.mark.parametrize("backend", ["pandas", "dask"])
def test_ragged_row_of_a_large_csv_names_its_line(tmp_path, backend, request):
    """A malformed row far into a CSV of several tokenizer blocks was reported as "a row": its
    line now, counting the lines of a quoted value that spans two before it."""
    p = tmp_path / "big.csv"
    with open(p, "w") as fh:
        fh.write('a,b,c\n1,"two\nlines",3\n')
        for i in range(400_000):
            fh.write(f"{i % 50},x,{i % 3}\n" if i != 300_000 else f"{i},y,1,9\n")
    assert p.stat().st_size > 2 << 20          # several of pyarrow's 1 MiB blocks
    [r] = run_many([["assess", p, "--keys", "a,c", *_dask(backend, request)]])
    _one_error(r, "malformed CSV", "the row on line 300004 has 4")


def test_an_abandoned_measure_does_not_put_back_stale_streams():
    """A measure past its time limit finishes later, in its own thread, while the next command
    has its own stdout: putting back the streams saved before it ran would send that command's
    output to the old one (seen as a rare empty stdout under pytest-xdist)."""
    import contextlib
    import io
    import time

    from gpurisk.core.contain import run_contained
    first = io.StringIO()
    with contextlib.redirect_stdout(first):
        (finished, _, _), = run_contained([lambda: time.sleep(1.0)], timeout=0.2)
    assert finished is False
    second = io.StringIO()
    with contextlib.redirect_stdout(second):
        time.sleep(1.5)                 # the abandoned call ends meanwhile
        print("mine")
    assert second.getvalue() == "mine\n" and first.getvalue() == ""
