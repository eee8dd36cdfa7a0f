"""Which figure is the headline, and which intruder scenario each risk figure answers (issue 27).

``HEADLINE`` names the measure an office is told to act on: the expected number of correct matches
E = Σ_{f_j=1} 1/F_j, estimated from the sample by ``matches_ll`` (Skinner & Shlomo 2008's
log-linear estimator, with main effects plus a forest of smoothed interactions each kept by its
Bayes factor (issue 43), a gamma cell effect and a leave-one-out prior per sample unique; chosen on
the validation of docs/validation.md,
where θ̂·n1 was 13-85 % low and the two-way model 11-95 % low). ``BESIDE`` is
shown next to it (τ1, the sample uniques that are population uniques). ``SCENARIOS`` says in one
line, for each measure that counts or prices re-identifications, the intruder scenario it answers,
so a command can print it beside the figure (:func:`scenario`). Nothing here computes anything.
"""
from __future__ import annotations

#: the default headline measure: an estimate of E from the sample alone
HEADLINE = "matches_ll"
#: shown beside the headline
BESIDE = ("tau1_ll",)
#: the headline where the population counts are known: E counted, τ1 beside it
EXACT_HEADLINE = "matches"
EXACT_BESIDE = ("tau1",)
#: estimators whose ``Measure.estimates`` names no truth (they estimate a bound of it, so
#: ``validate`` does not pair them) but which a counted value makes redundant: measure -> the truth
#: shown instead
STANDS_IN_FOR = {"matches_hat": "matches"}

#: measure -> the intruder scenario it answers (one line each)
SCENARIOS = {
    "matches_ll": "E: expected correct matches if an intruder matches each sample unique to one "
                  "random population record of its key cell (estimated, log-linear model)",
    "matches": "E: expected correct matches if an intruder matches each sample unique to one random "
               "population record of its key cell (true value, from the population)",
    "matches_hat": "n1²/ΣF: sample uniques over their mean population count, a lower estimate of E "
                   "(θ̂·n1; scan ranks by it only where Ê cannot run)",
    "theta_hat": "θ: the share of correct matches among an intruder's unique matches, pooled over "
                 "all sample uniques",
    "theta": "θ: the share of correct matches among unique matches (true value)",
    "match_prob_a": "E / n1: the chance that one sample unique matched to a random population "
                    "record of its cell is right (true value)",
    "tau1_ll": "τ1: sample uniques that are unique in the population, so that a unique match on "
               "them is certainly right (estimated, log-linear model)",
    "tau1_hat": "τ1: sample uniques that are unique in the population (estimated, nonparametric "
                "series; withheld where unreliable)",
    "tau1": "τ1: sample uniques that are unique in the population (true value)",
    "pr_pu_su": "τ1 / n1: the chance that a sample unique is a population unique (true value)",
    "pop_uniques": "N1: people unique in the population on the keys (a spontaneous-recognition or "
                   "fishing intruder)",
    "pr_pu": "N1 / N: the share of the population unique on the keys",
    "sample_uniques": "n1: records alone in their cell of the release (the records an intruder can "
                      "try to match uniquely)",
    "r1": "Σ r1: expected correct identifications if each sample unique is searched for in the "
          "population and one matching person is picked at random (Skinner 2007, eq. 5)",
    "r1u": "Σ r1u: as r1, knowing the match is not one of the other sample records (≈ matches_ll "
           "with the two-way model)",
    "indiv_risk": "Benedetti-Franconi: expected re-identifications over every record (not only "
                  "sample uniques) if each is matched to a random population record of its cell, "
                  "F_k estimated from the weights",
    "theta_hat_dis": "θ: as theta_hat, from a Monte Carlo draw of populations given the sample "
                     "(a check of θ̂'s formula)",
    "k_anonymity": "k: the smallest cell of the release; an intruder who knows a person is in the "
                   "release (prosecutor) re-identifies them with probability at most 1/k",
    "dis_suda": "DIS: expected correct matches of a data intrusion simulation (remove a record, "
                "copy it back with probability π, match)",
}


def truth_of(name: str) -> str | None:
    """The measure holding the true value that measure ``name`` estimates (its class's
    ``estimates``, or :data:`STANDS_IN_FOR`), when that measure is registered; else None."""
    from gpurisk.plugins import measure_registry
    reg = measure_registry()
    r = reg.get(name)
    truth = (getattr(r.cls, "estimates", None) if r is not None else None) or STANDS_IN_FOR.get(name)
    return truth if truth in reg else None


def headline_names(exact: bool) -> tuple[str, ...]:
    """The headline measure and those beside it: counted where the population counts are known
    (``exact``), else estimated from the sample."""
    return (EXACT_HEADLINE, *EXACT_BESIDE) if exact else (HEADLINE, *BESIDE)


def default_names(candidates, exact: bool) -> list[str]:
    """``candidates`` (a command's default measures, in order) with the headline first; where the
    population counts are known (``exact``), without the estimators of values that are counted
    (:func:`truth_of`): they run only when named."""
    from gpurisk.plugins import measure_registry
    reg = measure_registry()
    head = [m for m in headline_names(exact) if m in reg]
    rest = [m for m in candidates if m not in head]
    if exact:
        rest = [m for m in rest if truth_of(m) is None]
    return head + rest


def with_truths(names, exact: bool) -> list[str]:
    """The measures ``names`` named, followed, where the population counts are known, by the truth
    of each estimator among them that is not named: a named estimator is shown against its truth."""
    names = list(names)
    if not exact:
        return names
    extra = [t for t in (truth_of(m) for m in names) if t is not None and t not in names]
    return names + list(dict.fromkeys(extra))


def against_truth(estimate, truth: float) -> dict:
    """An estimator's Result beside the true value: the truth, the error, and whether its interval
    (two-sided, ``interval_lower``/``interval_upper`` in its extra) or else its one-sided upper
    bound holds the truth (None: the estimate gives neither)."""
    extra = getattr(estimate, "extra", {}) or {}
    lo, hi = extra.get("interval_lower"), extra.get("interval_upper")
    if estimate.value is None:
        covered, by = None, None
    elif lo is not None and hi is not None:
        covered, by = bool(lo <= truth <= hi), "interval"
    elif estimate.upper is not None:
        covered, by = bool(truth <= estimate.upper), "upper"
    else:
        covered, by = None, None
    err = None if estimate.value is None else float(estimate.value) - float(truth)
    return {"truth": float(truth), "error": err, "covered": covered, "covered_by": by}


def scenario(name: str) -> str | None:
    """The one-line intruder scenario of measure ``name``: the measure class's own ``scenario``
    (how a plugin declares it), else the line written here, or None when none is written down."""
    from gpurisk.plugins import measure_registry
    reg = measure_registry().get(name)
    own = getattr(reg.cls, "scenario", None) if reg is not None else None
    return own or SCENARIOS.get(name)
