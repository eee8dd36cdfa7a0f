"""pr_cm_um: Pr(correct match | unique match) of a perturbed file by data intrusion simulation. SPEC §6.

    pr(cm|um) = T f / (T f + P (1 − f) + F)                                  (Elliot 2001, §13)

T: records whose released key is their own and unique in the released file; P: the same in a pair;
F: records whose released key differs and whose true key is unique in the released file (a false
unique match). Options: ``perturb`` — a perturbation spec (``"swap:fraction=0.1,geo=state"``) or a
list of them; without one the file is released as it is and the value is θ̂ (eq. 7) exactly.
``max_iter``, ``stable``, ``decimals``, ``batch``, ``orientation`` as in :func:`gpurisk.dis.run_dis`.

The measure sees only the key variables; a perturbation that reads other columns (pairing
variables outside the keys, a higher region) needs ``gpurisk dis``, which reads them from the file.
"""
from __future__ import annotations

import math

from gpurisk.hookspecs import hookimpl
from gpurisk.measure import Context, Measure, Result
from gpurisk.options import Option


class PrCmUm(Measure):
    name = "pr_cm_um"
    description = "pr(cm|um) after a perturbation (swap, PRAM), by iterated data intrusion simulation"
    needs = frozenset({"fraction", "records"})
    default = False  # needs a perturbation to say anything θ̂ does not: run when named
    reference = "Elliot (2001), paras. 11-14 (pr(cm|um) of para. 13)"
    options = {
        "perturb": Option(None, None, help="perturbation spec NAME:OPT=V,... or a list of them"),
        "max_iter": Option(int, 100, min=1, help="largest number of DIS iterations"),
        "stable": Option(int, 10, min=1, help="iterations the rounded value must stay the same"),
        "decimals": Option(int, 3, min=0, help="decimals of the stability check"),
        "batch": Option(int, None, min=1, help="perturbed files drawn at once"),
        "orientation": Option(str, "intruder", choices=("intruder", "release")),
    }

    def compute(self, table, ctx: Context) -> Result:
        from gpurisk.dis import pr_cm_um, record_codes, run_dis, tpf_counts
        from gpurisk.plugins import make_perturbation

        spec = ctx.option(self.name, "perturb", None)
        specs = [] if spec in (None, "", []) else ([spec] if isinstance(spec, str) else list(spec))
        codes = record_codes(table)
        if not specs:
            T, P, F = tpf_counts(codes, [c[None, :] for c in codes], table.cards)
            v = float(pr_cm_um(T, P, F, ctx.fraction)[0])
            if math.isnan(v):
                return Result(value=math.nan, reason="no sample cell has f_j = 1 or 2: no unique "
                              "match can happen")
            return Result(value=v, extra={"T": int(T[0]), "P": int(P[0]), "F": int(F[0]),
                                          "perturbations": []})
        perts = [make_perturbation(s) for s in specs]
        outside = sorted({c for p in perts for c in p.columns(table.keys)})
        if outside:
            return Result.not_applicable(f"the perturbation reads column(s) {', '.join(outside)} "
                                         "outside the keys: use gpurisk dis")
        opt = {k: ctx.option(self.name, k, d) for k, d in self.options.items() if k != "perturb"}
        r = run_dis(codes, table.categories, table.keys, ctx.fraction, perts, seed=ctx.seed, **opt)
        return Result(value=r.value, se=r.se, reason=r.reason,
                      extra={"theta_hat": r.theta_hat, "ratio": r.ratio,
                             "iterations": r.iterations, "converged": r.converged,
                             "perturbations": r.perturbations})


@hookimpl
def gpurisk_register_measures():
    return [PrCmUm]
