"""Which figure is the headline, and which intruder scenario each risk figure answers (issue 27).

``HEADLINE`` names the measure an office is told to act on: the expected number of correct matches
E = Σ_{f_j=1} 1/F_j, estimated from the sample by ``matches_ll`` (Skinner & Shlomo 2008's
log-linear estimator, with main effects plus the interactions held-out tests keep, a gamma cell
effect and a leave-one-out prior per sample unique; chosen on the validation of docs/validation.md,
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


def scenario(name: str) -> str | None:
    """The one-line intruder scenario of measure ``name``: the measure class's own ``scenario``
    (how a plugin declares it), else the line written here, or None when none is written down."""
    from gpurisk.plugins import measure_registry
    reg = measure_registry().get(name)
    own = getattr(reg.cls, "scenario", None) if reg is not None else None
    return own or SCENARIOS.get(name)
