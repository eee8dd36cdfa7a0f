"""``prosecutor``, ``journalist``, ``marketer``: ARX's re-identification risk models (SPEC §10).

Equivalence classes j of the sample on the keys, sizes f_j (J classes, n records), population sizes
F_j when a population is given. Record risk is 1/f_j (prosecutor: the intruder knows the person is
in the release) or 1/F_j (journalist: the release is a sample of a known population):

    highest risk          = 1 / min_j f_j                  (journalist: 1 / min_j F_j)
    lowest risk           = 1 / max_j f_j                  (journalist: 1 / max_j F_j)
    records above t       = Σ_{j : 1/f_j > t} f_j          (journalist: 1/F_j > t; share: / n)
    records at highest    = Σ_{j : f_j = min f} f_j        (journalist: F_j = min F; share: / n)
    average risk          = J / n                          (journalist: max(J / Σ_j F_j, Σ_j (f_j/F_j) / n))
    marketer              = Σ_j (f_j / F_j) / n            (= J / n without a population)

Without a population ARX takes F_j = f_j, so journalist = prosecutor and marketer = J/n. That is a
different intruder (one who knows the person is in the release), so gpurisk does NOT do it by
default: without population counts journalist and marketer are not applicable, with the reason
(issue 28: ``marketer 0.768`` for a 0.03 % sample was the prosecutor's J/n under another name). The
option ``sample_as_population=true`` reproduces ARX (a warning and ``population_used = False`` say
so).
Sums over classes with f_j > 0 only (population cells the sample misses hold no record).
Source: ARX ``RiskModelSampleSummary`` / ``RiskModelSampleRisks``; El Emam (2013).

journalist and marketer read the classes bucket by bucket (``reads = "buckets"``): every number above
is a sum, a minimum or a maximum over classes, and the records at the highest risk are summed over
the buckets whose smallest F_j is the overall one. On a Dask cluster the classes stay on the workers.
"""
from __future__ import annotations

import warnings

import numpy as np

from gpurisk import BadInput, Context, Measure, Option, Result
from gpurisk.core.messages import phrase
from gpurisk.xp import scalar

THRESHOLD = Option(float, 0.2, min=0.0, max=1.0,
                   help="record risk above which a record counts as at risk (ARX's suggestion 0.2)")
REFERENCE = ("El Emam (2013), Guide to the De-Identification of Personal Health Information; "
             "ARX RiskModelSampleSummary (Prasser et al. 2014)")
NO_POPULATION = ("no population table: F_j = f_j as in ARX, so the {name} risk equals the "
                 "prosecutor risk; give {{population}} or {{sample_flag}} for the {name} model")
NEEDS_POPULATION = ("needs population counts F_j (the {name} intruder matches against the "
                    "population): give {{population}} or {{sample_flag}}; without them ARX takes "
                    "F_j = f_j, the prosecutor's scenario ({{option:{name}.sample_as_population=true}})")
AS_ARX = Option(bool, False, help="without a population take F_j = f_j as ARX does (the prosecutor "
                                  "scenario under this measure's name)")


def as_arx(name: str, ctx: Context) -> bool:
    v = ctx.option(name, "sample_as_population", False)
    if not isinstance(v, bool):
        raise BadInput(f"{name}.sample_as_population={v!r} is not true or false")
    return v


def threshold(name: str, ctx: Context) -> float:
    t = ctx.option(name, "threshold", 0.2)
    if isinstance(t, bool) or not isinstance(t, (int, float)) or not 0.0 <= float(t) <= 1.0:
        raise BadInput(f"{name}.threshold={t!r} is not a number in [0, 1]")
    return float(t)


def summary_risks(Z: np.ndarray, n: int, t: float) -> dict:
    """The prosecutor's numbers from the frequencies of frequencies Z (Z[r] = #{j : f_j = r})."""
    r = np.flatnonzero(Z)                      # class sizes present (Z[0] = 0)
    Zr = Z[r]
    lo, hi = int(r[0]), int(r[-1])
    at_risk = (1.0 / r) > t
    above, at_highest = int((r * Zr)[at_risk].sum()), int(lo * Zr[0])
    return {"highest": 1.0 / lo, "lowest": 1.0 / hi,
            "records_above_threshold": above, "share_above_threshold": above / n,
            "records_at_highest": at_highest, "share_at_highest": at_highest / n,
            "average": float(Zr.sum()) / n,
            "sample_uniqueness": float(Z[1]) / n if Z.size > 1 else 0.0,
            "classes": int(Zr.sum()), "smallest_class": lo, "threshold": t}


def _result(d: dict) -> Result:
    return Result(value=d["highest"], extra=d)


class Prosecutor(Measure):
    name = "prosecutor"
    scenario = ("1/min f: the highest risk of a record when the intruder knows the person is in the "
                "release (prosecutor) and matches on the keys")
    description = "ARX prosecutor model: highest record risk 1/min f_j (extras: average J/n, share above threshold)"
    needs = frozenset()
    level = "file"
    reference = REFERENCE
    options = {"threshold": THRESHOLD}
    default = False
    reads = "summary"     # the frequencies of frequencies only

    def compute(self, table, ctx: Context) -> Result:
        t = threshold(self.name, ctx)
        n = table.n
        if n == 0:
            return Result.not_applicable("the sample has no records")
        return _result(summary_risks(table.fof_vector(), n, t))


def population_bucket(bucket, t: float) -> dict:
    """One bucket of classes' share of the journalist's numbers: the smallest F_j of the sample's
    classes and the records of the classes of that size, the largest F_j, Σ f_j/F_j, Σ F_j, the
    records of classes with 1/F_j > t (None for the extremes of a bucket without a sample class)."""
    xp, f, F = bucket.xp, bucket.f, bucket.F
    seen = f > 0
    if not scalar(seen.any()):
        return {"minF": None, "at_min": 0, "maxF": None, "ratio": 0.0, "sumF": 0, "above": 0}
    fs = xp.where(seen, f, 0).astype(xp.float64)
    Fs = xp.where(seen, F, 1).astype(xp.float64)      # F_j >= f_j >= 1 on the sample's classes
    big = scalar(F.max()) + 1
    minF = scalar(xp.where(seen, F, big).min())
    return {"minF": minF, "at_min": int(scalar(xp.where(seen & (F == minF), f, 0).sum())),
            "maxF": scalar(xp.where(seen, F, 0).max()),
            "ratio": scalar((fs / Fs).sum()), "sumF": scalar(xp.where(seen, F, 0).sum()),
            "above": int(scalar(xp.where((1.0 / Fs > t) & seen, f, 0).sum()))}


def population_reduce(parts: list, n: int, J: int, t: float) -> dict:
    """The journalist's numbers from the buckets' :func:`population_bucket` (n records, J classes)."""
    have = [p for p in parts if p["minF"] is not None]
    minF = min(p["minF"] for p in have)
    maxF = max(p["maxF"] for p in have)
    at_highest = int(sum(p["at_min"] for p in have if p["minF"] == minF))
    ratio = sum(p["ratio"] for p in parts)
    sumF = sum(p["sumF"] for p in parts)
    above = int(sum(p["above"] for p in parts))
    return {"highest": 1.0 / minF, "lowest": 1.0 / maxF,
            "records_above_threshold": above, "share_above_threshold": above / n,
            "records_at_highest": at_highest, "share_at_highest": at_highest / n,
            "average": max(J / sumF, ratio / n), "marketer": ratio / n,
            "classes": J, "smallest_class": int(minF), "threshold": t}


class Journalist(Measure):
    name = "journalist"
    scenario = ("1/min F: the highest risk of a record when the intruder does not know who is in "
                "the release and matches it to the population (journalist)")
    description = "ARX journalist model: highest record risk 1/min F_j (extras: average, share above threshold)"
    needs = frozenset()
    level = "file"
    reference = REFERENCE
    options = {"threshold": THRESHOLD, "sample_as_population": AS_ARX}
    default = False
    reads = "buckets"     # with a population: Σ f_j/F_j, min F_j over the sample's classes, by bucket

    def map_bucket(self, bucket, ctx: Context) -> dict:
        if bucket.F is None:
            return {}
        return population_bucket(bucket, threshold(self.name, ctx))

    def reduce_buckets(self, parts, table, ctx: Context) -> Result:
        t = threshold(self.name, ctx)
        n = table.n
        if n == 0:
            return Result.not_applicable("the sample has no records")
        if table.N is None:
            if not as_arx(self.name, ctx):
                return Result.not_applicable(NEEDS_POPULATION.format(name=self.name))
            warnings.warn(phrase(NO_POPULATION.format(name=self.name)))
            return _result({**summary_risks(table.fof_vector(), n, t), "population_used": False})
        return _result({**population_reduce(parts, n, table.sample_cells, t), "population_used": True})


class Marketer(Measure):
    name = "marketer"
    scenario = ("Σ f/F / n: the share of the release an intruder re-identifies on average by "
                "matching every record to a random population record of its cell (marketer)")
    description = "ARX marketer model: expected share of records re-identified, Σ (f_j/F_j) / n"
    needs = frozenset()
    level = "file"
    reference = REFERENCE
    options = {"sample_as_population": AS_ARX}
    default = False
    reads = "buckets"     # with a population: Σ f_j/F_j over the sample's classes, by bucket

    def map_bucket(self, bucket, ctx: Context) -> dict:
        if bucket.F is None:
            return {}
        xp, f, F = bucket.xp, bucket.f, bucket.F
        return {"ratio": scalar((xp.where(f > 0, f, 0).astype(xp.float64)
                                 / xp.where(f > 0, F, 1)).sum())}

    def reduce_buckets(self, parts, table, ctx: Context) -> Result:
        n = table.n
        if n == 0:
            return Result.not_applicable("the sample has no records")
        if table.N is None:
            if not as_arx(self.name, ctx):
                return Result.not_applicable(NEEDS_POPULATION.format(name=self.name))
            warnings.warn(phrase(NO_POPULATION.format(name=self.name)))
            return Result(value=table.sample_cells / n, extra={"population_used": False})
        ratio = sum(p["ratio"] for p in parts)
        return Result(value=ratio / n, extra={"population_used": True})
