"""``gpurisk.assess``: one key combination, every applicable measure."""
from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from gpurisk.core.settings import Design, Reading, Run, inputs
from gpurisk.measures.headline import (EXACT_BESIDE, EXACT_HEADLINE, against_truth, default_names,
                                       scenario, truth_of, with_truths, BESIDE, HEADLINE)
from gpurisk.core.levels import level_fields, with_levels
from gpurisk.freq.guards import sample_categories
from gpurisk.inputs import resolve_fraction  # noqa: F401  (re-exported: gpurisk.workflows.assess.resolve_fraction)
from gpurisk.freq.table import FreqTable
from gpurisk.core.placement import place
from gpurisk.core.evaluate import can_run as _can_run, option_columns, run_measures  # noqa: F401 (re-exported)
from gpurisk.measure import Context, Result
from gpurisk.plugins import measure_registry


@dataclass(repr=False)
class Assessment:
    """What :func:`assess` returns. ``to_dict()`` is the JSON document of ``gpurisk assess --json``;
    ``to_frame()`` one row per measure (what ``--output FILE.csv`` writes, with the measures' other
    fields as columns rather than one JSON column)."""

    table: FreqTable
    context: Context
    measures: dict[str, Result]
    warnings: list[str] = field(default_factory=list)

    @property
    def n(self) -> int:
        return self.table.n

    @property
    def N(self) -> int | None:
        return self.table.N

    def to_frame(self, extra: str = "columns"):
        """One row per measure: keys, n, N, π, measure, value, se, upper, reason, and one column per
        other field of the measures (``extra.k``, ``extra.records_violating``, ...). ``extra="json"``
        gives the layout of the files ``--output`` writes (one JSON column ``extra``), see
        :func:`gpurisk.io.formats.result_rows`."""
        from gpurisk.io.formats import result_rows
        return result_rows(self.to_dict(), extra=extra)

    def __repr__(self) -> str:
        from gpurisk.core.display import fmt
        t = self.table
        shown = [f"{name}={fmt(r.value)}" for name, r in self.measures.items()
                 if isinstance(r.value, (int, float))][:6]
        idle = sum(1 for r in self.measures.values() if r.value is None)
        head = f"n={t.n}" + (f", N={t.N}" if t.N is not None else "")
        return (f"<Assessment {head}, keys={list(t.keys)}: {', '.join(shown)}"
                + (", ..." if len(shown) < len(self.measures) - idle else "")
                + (f"; {idle} not applicable>" if idle else ">"))

    def _repr_html_(self) -> str:
        """A notebook's view: the headline (its two-sided interval, one-sided bound and scenario,
        as the terminal prints it), one row per measure with a value, and the measures that did
        not run in one line."""
        from gpurisk.core.display import html_table
        from gpurisk.core.levels import bound_words, headline_lines
        t = self.table
        rows = [(name, r.value, r.se, r.upper) for name, r in self.measures.items()
                if r.value is not None]
        idle = [name for name, r in self.measures.items() if r.value is None]
        head = f"n={t.n}" + (f", N={t.N}" if t.N is not None else "")
        from html import escape
        first = "".join(f"<p>{escape(line)}</p>" for line in headline_lines(self.to_dict()["headline"]))
        notes = [f"upper: the {bound_words(self.context.alpha)}"]
        if idle:
            notes.append(f"not applicable here ({len(idle)}): {', '.join(idle)} (the reasons: "
                         "to_frame() or .measures[name].reason)")
        return html_table(f"Assessment of {', '.join(map(str, t.keys))} ({head}, "
                          f"{t.sample_cells} cells)", rows,
                          ["measure", "value", "s.e.", f"upper (one-sided {100 * (1 - self.context.alpha):.4g} %)"],
                          notes + [f"warning: {w}" for w in self.warnings[:5]]
                          ).replace('<div class="gpurisk-result">', '<div class="gpurisk-result">' + first, 1)

    def to_dict(self) -> dict[str, Any]:
        t = self.table
        doc = {
            "n": t.n,
            "N": t.N,
            "fraction": self.context.fraction,
            "keys": list(t.keys),
            "cells": t.sample_cells,
            "freq_of_freq": {str(r): c for r, c in sorted(t.freq_of_freq().items())},
            "measures": {name: r.to_dict() for name, r in self.measures.items()},
            "fraction_source": self.context.fraction_source,
            "categories": dict(zip(t.keys, sample_categories(t))),   # distinct values in the sample
            "backend": t.backend,
            "warnings": list(self.warnings),
            "headline": with_levels(headline_of(self.measures, self.context.alpha),
                                    self.measures, self.context.alpha),
            "scenarios": {name: scenario(name) for name in self.measures if scenario(name)},
        }
        doc["levels"] = level_fields(self.context.alpha)     # what "upper" and "interval" mean
        if t.N is not None:
            doc["population_cells"] = t.population_cells
            doc["pop_freq_of_freq"] = {str(r): c for r, c in sorted(t.pop_freq_of_freq().items())
                                       if r <= 10}
        return doc


def model_text(extra: Mapping[str, Any]) -> str | None:
    """One line naming the log-linear model behind an estimate (matches_ll, tau1_ll): its margins,
    the interaction a split-sample test kept, and how each sample unique's λ is taken."""
    model = extra.get("model")
    if model not in ("auto_cv", "eb", "independence", "two_way"):
        return None
    if model == "two_way":
        margins = "main effects and every two-way interaction"
    elif model == "auto_cv" and extra.get("interaction"):
        tests = "held-out tests" if "," in extra["interaction"] else "a held-out test"
        margins = f"main effects + {extra['interaction'].replace(' x ', ' × ')} (kept by {tests})"
    elif model == "auto_cv":
        margins = "main effects (no interaction passed the held-out test)"
    elif model == "eb" and extra.get("arcs"):
        towards = ("its own, or where marked towards those among the parent's nearest categories"
                   if "(neighbours ±" in extra["arcs"] else "its own")
        margins = (f"main effects + {extra['arcs']} (each pair kept by its Bayes factor; a key's "
                   f"shares given its parent's shrunk towards {towards})")
    elif model == "eb" and extra.get("interaction"):
        margins = (f"main effects + {extra['interaction'].replace(' x ', ' × ')} (each kept by "
                   "its Bayes factor, shrunk towards independence)")
    elif model == "eb":
        margins = "main effects (no interaction's Bayes factor passed the BIC price)"
    else:
        margins = "main effects"
    prior = ("each sample unique's λ from the other records" if extra.get("prior") == "loo"
             else "plug-in λ̂")
    if extra.get("root_gammas"):    # root_prior=eb where a root key's fitted gamma is used
        prior += ("; " + ", ".join(f"{k}'s categories from a gamma fitted to its category counts "
                                   f"(shape {float(a):.3g})" for k, a in extra["root_gammas"])
                  + " in place of Jeffreys' ½")
    return f"log-linear, {margins}; {prior}"


def interval_text(extra: Mapping[str, Any]) -> str | None:
    """One line saying how a log-linear estimate's interval is made (matches_ll, tau1_ll): from
    the model alone (``interval=model``) or with factors fitted on real populations."""
    how = extra.get("interval")
    if how == "model":
        parts = ["the fitted model's own variance"]
        if extra.get("alpha_interval") is not None:
            parts.append("α̂'s uncertainty")
        if extra.get("se_choice"):
            parts.append("the model choice's spread")
        if extra.get("se_shared"):
            parts.append("the covariance the uniques share through the margins")
        if extra.get("se_root"):
            parts.append("the root gamma's shape and its choice over Jeffreys' prior")
        text = ", ".join(parts) + ", no fitted factor"
        if extra.get("skewness"):
            text += (f"; the upper ends for the sum's skewness {extra['skewness']:.2g} "
                     "(Cornish-Fisher)")
        if extra.get("estimate_jeffreys") is not None:
            text += ("; the upper ends from the larger of the gamma's and Jeffreys' prior's "
                     "estimates, the lower from the smaller")
        if extra.get("misfit_bias") is not None:
            bias = float(extra["misfit_bias"])
            text += (f"; its {'upper' if bias < 0 else 'lower'} end moved by the risk score's "
                     f"bias estimate {bias:.3g} (the model still misfits where sample uniques "
                     f"are made, T = {extra.get('misfit_T', float('nan')):.2f})")
        lone, n1 = extra.get("lone_uniques"), extra.get("n1")
        if lone and n1:
            from gpurisk.models.loglinear_risk import LONE_NOTE_SHARE
            if lone > LONE_NOTE_SHARE * n1:
                text += (f"; {lone} of the {n1} sample uniques are alone in a category of some "
                         "key, where such bounds hold less often than their level (its note)")
        return text
    if how == "calibrated":
        return (f"the model's Poisson s.e. × {extra.get('se_factor', 0):g} with a "
                f"{100 * extra.get('model_error', 0):g} % model error (factors fitted on real "
                "populations)")
    return None


def headline_of(measures: Mapping[str, Result], alpha: float = 0.01) -> dict | None:
    """The headline figure of an assessment: the expected number of correct matches E with the
    intruder scenario it answers, and the figures shown beside it; None when no headline measure
    was run. Where the population counts are known (``matches`` ran and has a value) E is counted
    (``exact``: no interval) and every estimator that was named is listed under ``against_truth``
    with its interval, the truth and whether the interval holds it; else E is ``HEADLINE``'s
    estimate with its interval."""
    exact = EXACT_HEADLINE in measures and measures[EXACT_HEADLINE].value is not None
    head, beside = (EXACT_HEADLINE, EXACT_BESIDE) if exact else (HEADLINE, BESIDE)
    if head not in measures:
        return None

    def entry(name):
        r = measures[name]
        return {"measure": name, "value": r.value, "se": r.se,
                "interval": ([r.extra.get("interval_lower"), r.extra.get("interval_upper")]
                             if r.value is not None and not exact else None),
                "reason": r.reason, "scenario": scenario(name), "model": model_text(r.extra),
                "interval_how": None if exact else interval_text(r.extra), "exact": exact}
    out = {**entry(head), "level": 1.0 - float(alpha),
           "beside": [entry(m) for m in beside if m in measures]}
    if exact:
        checks = []
        for name, r in measures.items():
            t = truth_of(name)
            if t is None or t not in measures or measures[t].value is None:
                continue
            lo, hi = r.extra.get("interval_lower"), r.extra.get("interval_upper")
            checks.append({"measure": name, "truth_measure": t, "value": r.value, "se": r.se,
                           "upper": r.upper, "interval": [lo, hi] if r.value is not None
                           and lo is not None and hi is not None else None, "reason": r.reason,
                           **against_truth(r, measures[t].value)})
        out["against_truth"] = checks
    return out


def assess(frame, keys: Iterable[str], fraction: float | None = None, population=None,
           sample_flag: str | None = None, weights: str | None = None,
           measures: Iterable[str] | None = None, missing: str = "category", alpha: float = 0.01,
           seed: int = 0, options: Mapping[str, Mapping[str, Any]] | None = None,
           backend: str | None = None, sep: str | None = None, recode=None,
           allow_high_cardinality: bool = False, measure_timeout: float | None = None,
           encoding: str = "utf-8", cells_on_workers: bool | None = None) -> Assessment:
    """Risk measures of one release for one set of key variables.

    ``frame`` is a pandas, Dask or cuDF DataFrame or a path (CSV, Parquet, Stata, SPSS, SAS,
    ``example:adult``); ``keys`` a list or ``"a,b,c"``. Everything is read, checked and counted by
    :class:`gpurisk.inputs.Inputs`, as in every command. ``population`` is a frame (or path)
    holding the population's records; ``sample_flag`` names a boolean column of ``frame`` marking the
    released records (``frame`` then being the whole register). ``fraction`` is π; with a population
    it defaults to n/N. ``recode`` regroups categories (``["age=bands:5", ...]``, see
    :mod:`gpurisk.freq.recode`) on the counted table, never on the records. A key with more than 1000
    distinct values and more than n/2 is refused unless ``allow_high_cardinality`` (see
    :mod:`gpurisk.freq.guards`). ``measure_timeout`` (seconds) reports a measure that runs longer as not
    applicable and goes on (see :func:`run_measures`).
    """
    design = Design(fraction=fraction, population=population, sample_flag=sample_flag,
                    weights=weights)
    run = Run(measures=measures, options=options, alpha=alpha, seed=seed,
              measure_timeout=measure_timeout)          # checked before anything is read
    reading = Reading(missing=missing, recode=recode, backend=backend, sep=sep, encoding=encoding,
                      allow_high_cardinality=allow_high_cardinality)
    return assess_with(frame, keys, design, run, reading, cells_on_workers=cells_on_workers)


def assess_with(frame, keys: Iterable[str], design: Design, run: Run,
                reading: Reading | None = None, *,
                cells_on_workers: bool | None = None) -> Assessment:
    """:func:`assess` on the settings objects: a :class:`gpurisk.core.settings.Design` (π, population,
    sample flag, weights), a :class:`gpurisk.core.settings.Run` (measures, options, α, seed, time
    limit) and a :class:`gpurisk.core.settings.Reading` (missing values, recodes, backend, CSV
    separator and encoding; None: the defaults), each checked when built. ``cells_on_workers``
    (Dask backends): where the table is made, by :func:`gpurisk.core.placement.place` (None: kept
    on the workers when every measure reads summaries or buckets; True: kept there, default
    measures that read cells left out with their reason; False: brought here)."""
    measures = None if run.measures is None else list(run.measures)
    options, alpha, seed, measure_timeout = run.options, run.alpha, run.seed, run.measure_timeout
    extra_cols = option_columns(measures, options)
    inp = inputs(frame, keys, design, reading, columns=extra_cols)
    frames = inp.read()
    reg = measure_registry()
    exact = design.population_counts
    defaults = measures is None
    if defaults:
        # the default set, with the headline figures first (issue 27: one figure an office acts on);
        # with population counts the exact E and τ1, and no estimator of a counted value (issue 40)
        measures = default_names([m for m, r in reg.items() if getattr(r.cls, "default", True)],
                                 exact)
    else:
        measures = with_truths(measures, exact)     # a named estimator is shown against its truth
    # where the table is made (here, or kept on the workers): one rule for every command
    where = place([m for m in measures if m in reg], inp, options, defaults=defaults,
                  keep=cells_on_workers, exact=exact)
    kept_out = {m: Result.not_applicable(why) for m, why in where.kept_out.items()}
    measures = [m for m in measures if m not in kept_out]
    chosen = [m for m in measures if m in reg]
    if where.on_workers:
        # the cells stay on the workers: summaries and the bucket measures' maps come back
        counted = inp.summarize(frames, bucket_measures=[reg[m].cls for m in chosen
                                                         if reg[m].cls.reads == "buckets"
                                                         and _can_run(reg[m].cls, inp)],
                                context=Context(alpha=float(alpha), seed=int(seed),
                                                options=dict(options or {})))
    else:
        counted = inp.count(frames)
    ctx = Context(fraction=counted.fraction, fraction_source=counted.fraction_source,
                  alpha=float(alpha), seed=int(seed), options=dict(options or {}),
                  columns=inp.column_values(frames, extra_cols))
    notes = list(counted.notes)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        results = {**kept_out, **run_measures(counted.table, ctx, measures, timeout=measure_timeout)}
    notes += [str(w.message) for w in caught]
    return Assessment(counted.table, ctx, results, notes)
