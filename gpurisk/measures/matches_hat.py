"""matches_hat: θ̂·n1, a LOWER estimate of the expected number of correct matches E.

    matches_hat = θ̂ · n1        s.e. = n1 · v̂^½        upper = n1 · (θ̂'s upper bound)

θ̂ (Skinner & Elliot 2002, eq. 7) estimates θ = n1 / Σ_{f_j=1} F_j, the share of correct matches
when the intruder's unique matches are pooled; so θ̂·n1 estimates n1²/Σ_{f_j=1} F_j, the number of
sample uniques over their mean population count. That is NOT the expected number of correct matches
E = Σ_{f_j=1} 1/F_j (each sample unique matched to a random population record of its cell; the
measure ``matches``, estimated by ``matches_ll``): by Jensen's inequality (the harmonic mean is at
most the arithmetic mean) n1²/ΣF ≤ E, and on real populations it was 20-78 % below E
(docs/validation.md). Read it as a lower estimate of E, and its ``upper`` as the upper bound of
n1²/ΣF, not of E. As a ranking of key combinations it works: on four real populations
(bench/validate_trust.py, every combination of 1-3 keys of six, π = 5 %, 100 samples), ranking by
matches_hat had a Spearman correlation of 0.92-0.97 with the truth τ1 (the number of sample uniques
that are population uniques) and its top 10 caught 98-100 % of the τ1 attainable by any 10; θ̂ alone
0.38-0.68 and 48-87 %, with a combination without sample pairs on top in 41-74 % of the samples.
A scan ranks by ``matches_ll`` (Ê) since issue 27 (at π = 1 % its top 10 caught more of the true E
and τ1 than θ̂·n1's: docs/validation.md), and by matches_hat only when it has no Ê.

It reads theta_hat's options (``theta_hat.bound``, ``theta_hat.few_pairs``, ``theta_hat.min_pairs``). Where θ̂ is not
estimable (no sample pair: eq. 7 would give θ̂ = 1, so θ̂·n1 = n1 however few the uniques), the count
is estimated with half a sample pair, n2 = ½ (a continuity correction), and flagged
(``estimable: false``, a note); its upper bound is then n1, the most there can be. This keeps a
combination with one sample unique and no pair near the bottom of a ranking, and one whose keys
identify nearly everyone (n1 ≈ n, n2 = 0) near the top. n1 = 0 gives 0.
"""
from __future__ import annotations

import math

from gpurisk.hookspecs import hookimpl
from gpurisk.measure import Context, Measure, Result
from gpurisk.measures.theta_hat import ThetaHat, bound_of, not_estimable, theta_hat


class MatchesHat(Measure):
    name = "matches_hat"
    description = ("theta_hat * n1 = n1^2 / sum F over sample uniques: a LOWER estimate of the "
                   "expected correct matches E (a scan ranks by it only where matches_ll is not run)")
    needs = frozenset({"fraction"})
    reference = "Skinner & Elliot (2002), eq. (7), times the number of sample uniques n1"
    reads = "summary"

    def compute(self, table, ctx: Context) -> Result:
        n1, n2, n3 = table.n_r(1), table.n_r(2), table.n_r(3)
        pi = ctx.fraction
        opts = ThetaHat.options
        bound = str(ctx.option("theta_hat", "bound", opts["bound"]))
        min_pairs = int(ctx.option("theta_hat", "min_pairs", opts["min_pairs"]))
        extra = {"n1": n1, "n2": n2, "n3": n3, "bound": bound}
        if n1 == 0:
            return Result(value=0, se=0.0, upper=0.0, extra=extra)
        why = not_estimable(n1, n2, n3, min_pairs) if pi < 1.0 else None
        if why and n2 == 0:
            # half a sample pair (a continuity correction): small where n1 is small, near n1 where
            # nearly every record is a sample unique (a key set that identifies everyone)
            th, _ = theta_hat(n1, 0.5, n3, pi)
            return Result(value=th * n1, upper=float(n1), extra=extra | {
                "estimable": False, "continuity_correction": True,
                "note": f"θ̂ not estimable (n2 = 0): estimated with half a sample pair; at most "
                        f"n1 = {n1}"})
        th, v = theta_hat(n1, n2, n3, pi)
        se = math.sqrt(v)
        few = int(ctx.option("theta_hat", "few_pairs", opts["few_pairs"]))
        extra["note"] = "a lower estimate of the expected correct matches E (it estimates n1²/ΣF)"
        up = bound_of(th, se, n1, n2, pi, ctx.alpha, bound, few)
        extra |= {"theta_hat": th}
        if why:                                           # 0 < n2 < min_pairs
            extra |= {"estimable": False, "note": f"θ̂ from {n2} sample pair(s), fewer than "
                                                  f"theta_hat.min_pairs = {min_pairs}"}
        return Result(value=th * n1, se=se * n1, upper=up * n1, extra=extra)


@hookimpl
def gpurisk_register_measures():
    return [MatchesHat]
