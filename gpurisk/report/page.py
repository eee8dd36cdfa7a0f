"""The release decision page (``gpurisk report``): one self-contained HTML page about a file whose
first screen a release board can sign (the file's identity, the date, the gpurisk version and the
command; the office's policy and a verdict per criterion in words with the numbers behind it; the
key variables that drive the risk; the recommended protection with its cost in utility), then the
detail (the scan's settings, what each number means, what to do next, plots, the top table).
Rendered from Jinja2 templates (``templates/``); plots inline as data: URIs; key NAMES only, no key
value of any record."""
from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import shlex

import pandas as pd

from gpurisk.errors import BadInput
from gpurisk.core.messages import bad_input
from gpurisk.report import plots
from gpurisk.report.drivers import key_contributions
from gpurisk.io.provenance import command_line, file_identity
from gpurisk.core.messages import phrase_frame
from gpurisk.report.policy import Policy, Verdict, evaluate, load_policy, overall
from gpurisk.report.style import CSS, environment
from gpurisk.report.text import fmt, meaning, next_steps, not_plotted
from gpurisk.scan.runner import rank_column, rank_meaning, top_combinations
from gpurisk.scan.sink import read_manifest, read_rows


def _policy(policy) -> Policy:
    if policy is None:
        return Policy()
    if isinstance(policy, Policy):
        return policy
    if isinstance(policy, dict):
        return load_policy(None, **policy)
    return load_policy(policy)


def _suda(suda) -> dict | None:
    if suda is None or isinstance(suda, dict):
        return suda
    import json
    try:
        doc = json.loads(Path(suda).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise bad_input(f"{{arg:--suda|suda}} {str(suda)!r}: no such file") from None
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        raise bad_input(f"{{arg:--suda|suda}} {Path(suda).name!r} is not readable JSON ({type(exc).__name__})") from None
    if not isinstance(doc, dict) or "dis_max" not in doc:
        raise bad_input(f"{{arg:--suda|suda}} {Path(suda).name!r} is not the summary {{arg:gpurisk suda --json|gpurisk.suda(...).to_dict()}} gives")
    return doc


#: the policy's criteria judged over the scan's combinations (the per-record risk is not)
_BY_COMBINATION = ("expected correct matches", "k-anonymity", "θ̂'s upper bound")


def uncovered(verdicts: list, df: pd.DataFrame, settings: dict) -> list:
    """The verdicts, with every "met" on a criterion judged over the combinations turned into "not
    checked" when the scan left out the full key set (a scan up to size 3 of 6 keys): an intruder
    holding every key may match more (Ê and θ̂ are not bounded by those of the subsets, k only
    falls), so a "met" there would be one that was never checked. The words say so and give the
    command that checks the full key set. A "fails" stays."""
    from gpurisk.report.text import _common
    keys = list(settings.get("keys") or [])
    combos = {frozenset(k) for k in df["keys"]}
    named = "scenario" in df.columns and df["scenario"].notna().any()   # named key sets: each scanned
    if not keys or frozenset(keys) in combos or named:
        return verdicts
    data = settings.get("data")
    cmd = (shlex.join(["gpurisk", "assess", str(data), "--keys", ",".join(keys), *_common(settings)])
           if isinstance(data, str) and not data.startswith("<") else None)
    largest = int(df["size"].max())
    out = []
    for v in verdicts:
        if v.status == "met" and v.criterion.startswith(_BY_COMBINATION):
            v = Verdict(v.criterion, "not checked",
                        f"Not checked on the full key set: the scan covered combinations of at most "
                        f"{largest} of the {len(keys)} key variables, not all {len(keys)} "
                        f"({', '.join(keys)}), where an intruder holding every key matches best. On "
                        f"the combinations scanned: {v.words}"
                        + (f" Check it: {cmd}" if cmd else " Assess the full key set."), v.value)
        out.append(v)
    return out


def page_headline(df: pd.DataFrame, col: str, settings: dict) -> dict | None:
    """The headline for the page's first screen, as ``assess`` prints it (the keys of
    :func:`gpurisk.workflows.assess.headline_of` and the level fields): E on the full key set when
    the scan holds it, else on the riskiest combination scanned; the exact E (``matches``) where
    the scan has population counts, else the estimate with its two-sided interval and one-sided
    bound; τ1 beside it; the scenario it answers."""
    from gpurisk.core.levels import NORMAL_INTERVAL, level_fields, two_sided
    from gpurisk.measures.headline import scenario
    keys = list(settings.get("keys") or [])
    full = df[df["keys"].map(frozenset) == frozenset(keys)] if keys else df.iloc[0:0]
    if len(full):
        row, where = full.iloc[0], "the full key set"
    else:
        top = top_combinations(df, 1, col)
        if not len(top):
            return None
        row, where = top.iloc[0], f"the riskiest combination scanned (by {col})"
    alpha = float(settings.get("alpha") or 0.01)

    def num(v):
        return None if v is None or (isinstance(v, float) and v != v) or pd.isna(v) else float(v)

    def has(m):
        return m in df.columns and num(row.get(m)) is not None
    measure = next((m for m in ("matches", "matches_ll") if has(m)), col)
    beside = [m for m in (("tau1",) if measure == "matches" else ("tau1_ll",)) if has(m)]

    def entry(m):
        v, se = num(row.get(m)), num(row.get(f"{m}_se"))
        lo, hi = num(row.get(f"{m}_interval_lower")), num(row.get(f"{m}_interval_upper"))
        if lo is not None and hi is not None:          # the measure's own two-sided interval
            interval = [lo, hi]
        else:                                          # a scan written before rows kept it
            interval = (two_sided(v, se, alpha, num(row.get("n1"))) if m in NORMAL_INTERVAL
                        and v is not None and se is not None else None)
        why = row.get(f"{m}_reason")
        return {"measure": m, "value": v, "se": se, "interval": interval,
                "upper": num(row.get(f"{m}_upper")),
                "reason": why if isinstance(why, str) else None, "scenario": scenario(m),
                "model": None, "note": _note(row, m)}
    exact = measure == "matches"         # counted from the population counts: no interval
    return {**entry(measure), "level": 1.0 - alpha, **level_fields(alpha), "exact": exact,
            # the first screen shows the headline's own note; τ1 beside it is in the tables below
            "beside": [{**entry(b), "note": None} for b in beside],
            "where": f"on {where}: {', '.join(row['keys'])}"}


def _note(row, col: str) -> str | None:
    """The note the ranking's measure gives on a row's figure (none in a scan written before
    rows kept notes)."""
    note = row.get(f"{col}_note")
    return note if isinstance(note, str) and note else None


def _identity(prov: dict, settings: dict, now: str) -> list[tuple[str, str]]:
    from gpurisk.io.provenance import gpurisk_version
    __version__ = gpurisk_version()
    f = prov.get("file")
    later = ""
    if f is None and settings.get("data"):
        f = file_identity(settings["data"])          # a scan written before the scan recorded it
        later = " (computed when this page was written: the scan did not record it)"
    rows = []
    if f:
        rows += [("file", f["name"] + (f" ({f['files']} files)" if f.get("files", 1) > 1 else "")),
                 ("sha256", f["sha256"] + later), ("size", f"{fmt(f['bytes'], 'n')} bytes")]
    else:
        rows.append(("file", "a data frame in memory (no file, no checksum)"))
    rows.append(("records in the release", fmt(settings.get("n"), "n")))
    if settings.get("N") is not None:
        rows.append(("population (N)", fmt(settings.get("N"), "N")))
    rows.append(("scanned", prov.get("created") or "not recorded (an older scan)"))
    rows.append(("this page written", now))
    version = prov.get("gpurisk")
    rows.append(("gpurisk version", __version__ if version in (None, __version__)
                 else f"{version} (scan), {__version__} (this page)"))
    rows.append(("scan command", prov.get("command") or
                 ("the Python API (gpurisk.scan)" if prov else "not recorded (an older scan)")))
    page = command_line()
    if page:
        rows.append(("page command", page))
    return rows


def _settings_rows(settings: dict, df: pd.DataFrame) -> list[tuple[str, str]]:
    rows = []
    if settings:
        pi = settings.get("fraction")
        rows.append(("records in the release (n)", fmt(settings.get("n"), "n")))
        if settings.get("N") is not None:
            rows.append(("population (N)", fmt(settings.get("N"), "N")))
        source = f" ({settings['fraction_source']})" if settings.get("fraction_source") else ""
        rows += [("sampling fraction π", "not given" if pi is None else f"{pi:.4g}{source}"),
                 ("key variables", ", ".join(settings.get("keys", []))),
                 ("recodes", "; ".join(settings.get("recode", [])) or "none"),
                 ("seed", str(settings.get("seed")))]
    if "scenario" in df.columns and df["scenario"].notna().any():
        sc = df[df["scenario"].notna()].drop_duplicates("scenario")
        rows.append(("scenarios", "; ".join(f"{s} ({', '.join(k)})"
                                            for s, k in zip(sc["scenario"], sc["keys"]))))
    return rows


def _protection(protection, settings: dict, prov: dict) -> dict | None:
    if protection is None:
        return None
    from gpurisk.report.protection import check_plan_keys, summary
    check_plan_keys(protection, settings.get("keys"))
    p = summary(protection, settings.get("n"))
    share = p["suppressed_share"]
    p["suppressed_records_text"] = fmt(p["suppressed_records"], "n")
    p["suppressed_share_text"] = None if share is None else f"{share:.1%}"
    p["suppressed_values_text"] = ", ".join(f"{k} {fmt(v, 'n')}" for k, v in p["suppressed_values"].items())
    p["loss_value"] = fmt(p["loss_value"])
    p["loss_scaled"] = None if p["loss_scaled"] is None else fmt(p["loss_scaled"])
    p["criteria"] = [{"criterion": c["criterion"], "value": fmt(c["value"])} for c in p["criteria"]]
    mine = (prov.get("file") or {}).get("sha256")
    p["other_file"] = bool(mine and p["data_sha256"] and mine != p["data_sha256"])
    return p


def _suda_rows(s: dict | None) -> list[tuple[str, str]]:
    if not s:
        return []
    return [("key variables", ", ".join(s.get("keys", []))),
            ("records with a SUDA score > 0", fmt(s.get("records_scored"), "n")),
            ("maximum SUDA score", fmt(s.get("max_score"))),
            ("expected correct matches (sum of DIS-SUDA probabilities)", fmt(s.get("dis_sum"))),
            ("largest DIS-SUDA probability of a record", fmt(s.get("dis_max")))]


def write_report(scan, html_path, measure: str | None = None, threshold: float = 0.1,
                 top: int = 20, title: str | None = None, policy=None, protection=None,
                 suda=None, drivers_top: int = 10, release=None) -> Path:
    """Write the decision page of ``scan`` (a scan output path, or a DataFrame of scan rows) to
    ``html_path``. ``policy``: a :class:`Policy`, a TOML/JSON file or a dict of thresholds;
    ``protection``: a :class:`gpurisk.protect.Protection`, its plan or a plan JSON file;
    ``suda``: the summary ``gpurisk suda --json`` prints (a dict or a JSON file); ``release``: the
    released file or records (``Protection.released``), scanned here with the scan's settings so
    that the policy is judged on the release after protection too (without it, the plan's own
    figures judge what they can: :mod:`gpurisk.report.release`)."""
    try:
        import matplotlib
    except ModuleNotFoundError:
        raise BadInput("gpurisk report draws its plots with matplotlib: pip install 'gpurisk[plot]'") from None
    matplotlib.use("Agg")
    settings, prov = {}, {}
    if isinstance(scan, (str, Path)):
        df = phrase_frame(read_rows(scan))      # stored reasons, phrased for who writes the page
        if Path(scan).is_dir():
            man = read_manifest(scan)
            settings, prov = man.get("settings", {}), man.get("provenance", {})
    else:
        df = getattr(scan, "results", scan)       # a ScanResult or its rows
        settings = dict(getattr(scan, "settings", None) or {})
    if df.empty:
        raise BadInput("the scan has no rows to report")
    if isinstance(release, (str, Path)) and not str(release).startswith("example:") \
            and not Path(str(release)).exists():
        raise bad_input(f"{{arg:--release|release}} {str(release)!r}: no such file")
    if not 0.0 < float(threshold) <= 1.0:
        raise bad_input(f"{{arg:--threshold|threshold}} {threshold!r} must lie in (0, 1]")
    col = measure or rank_column(df)
    if col not in df.columns:
        raise bad_input(f"{{arg:--measure|measure}} {col!r} is not a column of the scan")
    if df[col].notna().sum() == 0:
        raise bad_input(f"{{arg:--measure|measure}} {col!r} has no values in this scan (not applicable)")
    from gpurisk.io.provenance import gpurisk_version
    __version__ = gpurisk_version()
    pol = _policy(policy)
    suda_doc = _suda(suda)
    if suda_doc:                    # a SUDA of other keys would be judged as this scan's
        from gpurisk.report.protection import check_keys_of
        check_keys_of("{arg:--suda|suda}", "the SUDA summary is of", suda_doc.get("keys"),
                      settings.get("keys"), "run suda on this scan's keys")
    prot = _protection(protection, settings, prov)
    verdicts = uncovered(evaluate(pol, df, suda_doc), df, settings)
    status, sentence = overall(verdicts)
    from gpurisk.report.protection import load_plan
    from gpurisk.report.release import release_verdicts
    rel = release_verdicts(pol, load_plan(protection) if protection is not None else None,
                           release, settings, df)
    if rel is not None and release is not None:      # the release was scanned on the same rows
        rel["verdicts"] = uncovered(rel["verdicts"], df, settings)
        rel["status"], rel_sentence = overall(rel["verdicts"])
        rel["sentence"] = rel_sentence.replace("The release", "The release after protection", 1)
    if rel is not None:               # two verdicts side by side: say which file each is about
        sentence = sentence.replace("The release", "The file as it is", 1)
    threshold = pol.max_theta_upper if pol.max_theta_upper is not None else float(threshold)
    now = datetime.now(timezone.utc).isoformat(timespec="seconds")
    contrib = key_contributions(df, col, drivers_top)
    from gpurisk.core.display import note_lines
    from gpurisk.core.levels import bound_words, headline_lines, upper_legend
    head = page_headline(df, col, settings)
    drivers = [{"key": r["key"], "drop": fmt(r["drop"]), "combination": r["combination"],
                "rank": int(r["rank"]), "n1_drop": fmt(r["n1_drop"], "n1"),
                "mean_drop": fmt(r["mean_drop"]), "combinations": int(r["combinations"])}
               for _, r in contrib.iterrows()]
    t = top_combinations(df, top, col)
    cols = [c for c in dict.fromkeys(["size", "cells", "n1", "n2", "N1", col, f"{col}_upper",
                                      "theta_hat", "theta_hat_upper", "pr_pu", "bethlehem_flag"])
            if c in t.columns and t[c].notna().any()]          # no all-"—" column
    present = [c for c in dict.fromkeys(["size", "cells", "n1", "n2", "N1", col, "theta_hat",
                                          "pr_pu"]) if c in df.columns and df[c].notna().any()]
    theta_img = plots.theta(df, threshold, top)
    up = None
    if theta_img:
        up = (df["theta_hat_upper"].fillna(df["theta_hat"]) if "theta_hat_upper" in df.columns
              else df["theta_hat"])
    sizes = f"{int(df['size'].min())}–{int(df['size'].max())}"
    scope = (f"Checked on the {len(df)} scanned combinations ({sizes} key variables"
             + (f" of {len(settings['keys'])}" if settings.get("keys") else "") + ").")
    ctx = {
        "title": title or "gpurisk release decision page", "css": CSS,
        "overall": {"status": status, "sentence": sentence}, "release": rel,
        "bound_words": bound_words(float(settings.get("alpha") or 0.01)),
        "upper_legend": ("*_upper: the " + upper_legend(float(settings.get("alpha") or 0.01))
                         .split("upper: the ", 1)[1] + " (the scan's --alpha)"),
        "headline": [x for x in headline_lines(head) if not x.strip().startswith("beside it")]
        if head else [],       # τ1 beside it is in the tables below: the first screen stays short
        "headline_where": head["where"] if head else "",
        "identity": _identity(prov, settings, now),
        "policy": {"name": pol.name, "source": pol.source if not pol.empty else "nowhere"},
        "verdicts": verdicts, "scope": scope if verdicts else "",
        "col": col, "drivers": drivers, "drivers_top": drivers_top,
        "show_n1": any(d["n1_drop"] != "—" for d in drivers),
        "protection": prot,
        "settings_rows": _settings_rows(settings, df), "combos": len(df), "size_range": sizes,
        "rank_meaning": rank_meaning(col), "theta_beside": col != "theta_hat" and "theta_hat" in df.columns,
        "suda": _suda_rows(suda_doc),
        "meanings": [(c, meaning(c)) for c in present],
        "steps": next_steps(df, col, contrib, settings, status, plan=protection, release=release,
                            release_status=rel["status"] if rel else None),
        "img_size": plots.by_size(df, col), "img_top": plots.top(df, col, top),
        "img_theta": theta_img, "threshold": f"{threshold:g}",
        "theta_over": int((up > threshold).sum()) if up is not None else 0,
        "theta_count": int(df["theta_hat"].notna().sum()) if up is not None else 0,
        "table_cols": cols,
        "table_rows": [{"label": plots.label(r),
                        "values": [fmt(r[c], c) + (" †" if c == col and _note(r, col) else "")
                                   for c in cols]} for _, r in t.iterrows()],
        "table_notes": note_lines(col, ((i, _note(r, col)) for i, (_, r)
                                        in enumerate(t.iterrows(), 1))),
        "left_out": not_plotted(df, col, top),
        "version": __version__, "written": now,
    }
    page = environment().get_template("page.html.j2").render(**ctx)
    out = Path(html_path)
    from gpurisk.io import write_text_atomic
    write_text_atomic(out, page)
    return out
