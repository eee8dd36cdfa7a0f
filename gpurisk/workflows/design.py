"""``gpurisk design``: θ̂ under complex designs (SPEC §2; Skinner & Elliot 2002, §§5.2-5.4).
:func:`design_report_with` is the workflow on the settings objects (what the command calls);
:func:`design_report` the convenience that takes them as keywords. The estimators (weights from
strata, the stratified θ̂, the cluster-pair share) are in :mod:`gpurisk.models.design`, and
handed on here (``gpurisk.design.stratified``).
"""
from __future__ import annotations

import math
import warnings
from typing import Any, Sequence

from gpurisk.core.messages import bad_input
from gpurisk.core.settings import Design, Reading, inputs
from gpurisk.core.weights import design_cell_weights, normalised_reason, weight_rule
from gpurisk.errors import BadInput
from gpurisk.models.design import (CLUSTER_WARN, _estimable_theta_hat, cluster_pair_share,  # noqa: F401
                                   cluster_pairs, parse_fractions, stratified, stratum_weights)
from gpurisk.xp import scalar

__all__ = ["design_report", "design_report_with", "stratified", "stratum_weights", "cluster_pairs",
           "cluster_pair_share", "parse_fractions", "CLUSTER_WARN"]


def design_report(frame, keys: Sequence[str], *, fraction: float | None = None,
                  weights: str | None = None, stratum: str | None = None, fractions=None,
                  cluster: str | None = None, threshold: float = CLUSTER_WARN,
                  missing: str = "category", recode=None, backend: str | None = None,
                  allow_high_cardinality: bool = False, sep: str | None = None,
                  encoding: str = "utf-8") -> dict[str, Any]:
    """What ``gpurisk design`` prints: θ̂ (given π), θ̂_w, per-stratum θ̂, the cluster diagnostic.

    ``frame`` is a frame or a path, read, checked and counted by :class:`gpurisk.inputs.Inputs`."""
    reading = Reading(missing=missing, recode=recode, backend=backend, sep=sep, encoding=encoding,
                      allow_high_cardinality=allow_high_cardinality)
    return design_report_with(frame, keys, Design(fraction=fraction, weights=weights), reading,
                              stratum=stratum, fractions=fractions, cluster=cluster,
                              threshold=threshold)


def design_report_with(frame, keys: Sequence[str], design: Design, reading: Reading | None = None,
                       *, stratum: str | None = None, fractions=None, cluster: str | None = None,
                       threshold: float = CLUSTER_WARN) -> dict[str, Any]:
    """:func:`design_report` on the settings objects: the :class:`gpurisk.core.settings.Design`
    gives π and the weight column (no population or sample flag), the
    :class:`~gpurisk.core.settings.Reading` how the records are read; the strata (with a π per
    stratum) and the clusters are the command's own."""
    from gpurisk.measures.theta_hat_weighted import theta_hat_weighted, weighted_result
    reading = reading or Reading()
    missing, fraction, weights = reading.missing, design.fraction, design.weights
    if design.population is not None or design.sample_flag is not None:
        raise BadInput("design takes a sampling fraction or design weights (no population or "
                       "sample flag)")
    if weights and stratum:
        raise bad_input("give either {arg:--weights|weights} or {arg:--strata|stratum} with "
                        "{arg:--fractions|fractions}, not both")
    if stratum and fractions is None:
        raise bad_input(f"{{arg:--strata|stratum}} {stratum} needs {{arg:--fractions|fractions}} "
                        "(STRATUM=PI,... or one PI)")
    if not (fraction or weights or stratum or cluster):
        raise bad_input("nothing to report: give {arg:--fraction|fraction}, {arg:--weights|weights}, "
                        "{arg:--strata|stratum} or {arg:--cluster|cluster}")
    inp = inputs(frame, keys, design, reading, columns=[c for c in (stratum, cluster) if c])
    keys = list(inp.keys)
    frames = inp.read()
    frame = frames.sample
    counted = inp.count(frames, records="{arg:design --cluster|design_report(cluster=...)}" if cluster else None)
    table = counted.table
    doc: dict[str, Any] = {"n": table.n, "keys": keys, "n1": table.n_r(1), "n2": table.n_r(2),
                           "warnings": list(counted.notes)}
    if inp.fraction is not None:
        f = inp.fraction
        th, v, why = _estimable_theta_hat(table.n_r(1), table.n_r(2), table.n_r(3), f)
        doc["theta_hat"] = {"value": th, "se": math.sqrt(v) if v == v else math.nan, "pi": f,
                            **({"reason": why} if why else {})}
    if weights:
        # the one rule for weights (gpurisk.core.weights), as assess's theta_hat_weighted reads them
        f, w = table.f, table.w
        rule = weight_rule(table.n, float(scalar(w.sum())), fraction)
        if not rule.usable:
            raise bad_input(f"{{arg:--weights|weights}} {weights}: {normalised_reason(rule)}")
        dw, low = design_cell_weights(f, w, rule.scale, table.xp)
        th, n1, d = theta_hat_weighted(f, dw)
        res = weighted_result(n1, table.n_r(2), table.n_r(3), d, rule, int(scalar(low.sum())))
        doc["theta_hat_weighted"] = {**res.extra, "value": res.value, "se": None,
                                     **({"reason": res.reason} if res.reason else {})}
    if stratum:
        doc["stratified"] = stratified(frame, keys, stratum, fractions, missing, inp.recode)
    if cluster:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            doc["cluster"] = cluster_pairs(frame, keys, cluster, threshold, missing, table=table)
        doc["warnings"] += [str(c.message) for c in caught]
    return doc
