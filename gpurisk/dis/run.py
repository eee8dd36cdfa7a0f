"""The perturb -> count loop until pr(cm|um) is stable, resumable from a state file (see :mod:`gpurisk.dis`)."""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np

from gpurisk.dis.counts import ORIENTATIONS, pr_cm_um, stop_point, tpf_counts
from gpurisk.errors import BadInput, PluginError


#: default budget of perturbed records held at once (batch x n). On a CPU the batched arrays
#: cost about what a loop over files costs (the sorts are n log n either way, and large batches
#: leave the cache: bench/bench_dis_swap.py times both), so the default keeps batches modest.
BATCH_CELLS = 250_000


@dataclass
class DISResult:
    """What :func:`run_dis` returns; ``to_dict()`` is the JSON of ``gpurisk dis --json``."""

    value: float                 # mean pr(cm|um) over the iterations
    se: float                    # standard error of that mean (sd across iterations / sqrt(k))
    theta_hat: float             # unperturbed pr(cm|um) = θ̂ (eq. 7)
    iterations: int
    converged: bool
    fraction: float
    values: list[float]
    T: list[int]
    P: list[int]
    F: list[int]
    perturbations: list[str]
    seed: int
    batch: int
    n: int
    keys: list[str]
    info: dict[str, Any] = field(default_factory=dict)
    reason: str | None = None
    orientation: str = "intruder"

    @property
    def ratio(self) -> float:
        return self.value / self.theta_hat if self.theta_hat else math.nan

    def to_dict(self) -> dict[str, Any]:
        from gpurisk.measure import _clean
        return _clean({
            "pr_cm_um": self.value, "se": self.se, "theta_hat": self.theta_hat,
            "ratio": self.ratio, "iterations": self.iterations, "converged": self.converged,
            "fraction": self.fraction, "keys": self.keys, "n": self.n,
            "perturbations": self.perturbations, "seed": self.seed, "batch": self.batch,
            "mean_T": float(np.mean(self.T)) if self.T else None,
            "mean_P": float(np.mean(self.P)) if self.P else None,
            "mean_F": float(np.mean(self.F)) if self.F else None,
            "values": self.values, "info": self.info, "reason": self.reason,
            "orientation": self.orientation,
        })


def _fingerprint(codes, extra, keys, cards, perts, seed, batch) -> str:
    from gpurisk.io.checkpoint import fingerprint
    return fingerprint({"keys": list(keys), "cards": [int(c) for c in cards],
                        "perturbations": [[p.name, p.opts] for p in perts],
                        "seed": int(seed), "batch": int(batch)}, codes, extra)


def _load_state(path: Path, fp: str) -> dict:
    from gpurisk.io.checkpoint import load_checked
    return load_checked(path, fp, unreadable=f"state file {path} is not readable JSON",
                        mismatch=f"state file {path} was written for another run (data, keys, "
                                 "perturbations, seed or batch differ); remove it or name another "
                                 "{arg:--state|state}")


def _save_state(path: Path, st: dict) -> None:
    from gpurisk.io import write_text_atomic
    write_text_atomic(path, json.dumps(st))


def _check_output(p, out, codes, cards, B, n) -> None:
    if not isinstance(out, (list, tuple)) or len(out) != len(codes):
        raise PluginError(f"perturbation {p.name!r} returned {type(out).__name__} of the wrong "
                          f"length; expected one array per key ({len(codes)})")
    for v, (a, k) in enumerate(zip(out, cards)):
        a = np.asarray(a)
        if a.shape != (B, n):
            raise PluginError(f"perturbation {p.name!r} returned shape {a.shape} for key {v}; "
                              f"expected {(B, n)}")
        if a.size and (a.min() < 0 or a.max() >= k):
            raise PluginError(f"perturbation {p.name!r} returned codes outside 0..{k - 1} for key {v}")


def run_dis(codes: Sequence[np.ndarray], categories: Sequence[Sequence], keys: Sequence[str],
            fraction: float, perturbations: Iterable, *, extra: dict | None = None,
            max_iter: int = 100, stable: int = 10, decimals: int = 3, batch: int | None = None,
            seed: int = 0, state: str | Path | None = None, orientation: str = "intruder"
            ) -> DISResult:
    """pr(cm|um) of files perturbed by ``perturbations`` (applied in turn), until stable.

    ``codes`` are the records' codes per key (n,), ``categories`` the keys' categories, ``extra``
    the codes of other columns the perturbations read. See the module docstring for the rule;
    ``orientation`` as in :func:`tpf_counts`.
    """
    from gpurisk.plugins import make_perturbation

    keys = list(keys)
    codes = [np.asarray(c) for c in codes]
    categories = [list(c) for c in categories]
    cards = [len(c) for c in categories]
    extra = {k: np.asarray(v) for k, v in (extra or {}).items()}
    n = int(codes[0].shape[0])
    f = float(fraction)
    if not (0.0 < f <= 1.0):
        raise BadInput(f"sampling fraction f={fraction!r} is outside (0, 1]")
    for name, val, lo in (("max_iter", max_iter, 1), ("stable", stable, 1), ("decimals", decimals, 0)):
        if int(val) != val or int(val) < lo:
            raise BadInput(f"{name}={val!r} must be an integer >= {lo}")
    perts = [make_perturbation(p) for p in perturbations]
    for p in perts:
        p.check(keys, categories, codes)
        miss = [c for c in p.columns(keys) if c not in extra]
        if miss:
            raise BadInput(f"perturbation {p.name!r} reads column(s) {', '.join(map(repr, miss))}, "
                           "which were not supplied")
    if batch is None:
        batch = max(1, min(int(stable), BATCH_CELLS // max(n, 1)))
    batch = int(batch)
    if batch < 1:
        raise BadInput(f"batch={batch!r} must be a positive integer")

    # the unperturbed file: T = n1, P = 2 n2, F = 0, so this is θ̂ of eq. 7
    T0, P0, F0 = tpf_counts(codes, [c[None, :] for c in codes], cards)
    th = float(pr_cm_um(T0, P0, F0, f)[0])

    if orientation not in ORIENTATIONS:
        raise BadInput(f"orientation={orientation!r} is not one of {', '.join(ORIENTATIONS)}")
    fp = _fingerprint(codes, extra, keys, cards, perts, seed, batch)
    fp = f"{fp}:{orientation}"
    st = {"fingerprint": fp, "T": [], "P": [], "F": [], "info": {}}
    spath = Path(state) if state else None
    if spath is not None and spath.exists():
        st = _load_state(spath, fp)
    Ts, Ps, Fs = list(st["T"]), list(st["P"]), list(st["F"])
    info: dict[str, Any] = dict(st.get("info", {}))
    while True:
        stop = stop_point(pr_cm_um(Ts, Ps, Fs, f), int(max_iter), int(stable), int(decimals))
        if stop is not None:
            break
        k = len(Ts) // batch
        rng = np.random.default_rng([int(seed), k])
        cur = codes
        for p in perts:
            cur = p.perturb_batch(cur, categories, rng, keys=keys, extra=extra, size=batch)
            _check_output(p, cur, codes, cards, batch, n)
            for name, val in (getattr(p, "last_info", None) or {}).items():
                if isinstance(val, (int, float)):
                    info[f"{p.name}.{name}"] = info.get(f"{p.name}.{name}", 0) + val
        T, P, F = tpf_counts(codes, cur, cards, orientation)
        Ts += T.tolist()
        Ps += P.tolist()
        Fs += F.tolist()
        if spath is not None:
            _save_state(spath, {"fingerprint": fp, "T": Ts, "P": Ps, "F": Fs, "info": info})
    iters, conv = stop
    vals = pr_cm_um(Ts[:iters], Ps[:iters], Fs[:iters], f)
    reason = None
    if np.isnan(vals).any():
        reason = "some perturbed file has no unique match: pr(cm|um) is undefined there"
    mean = float(np.mean(vals))
    se = float(np.std(vals, ddof=1) / math.sqrt(iters)) if iters > 1 else math.nan
    return DISResult(mean, se, th, iters, conv, f, vals.tolist(), Ts[:iters], Ps[:iters],
                     Fs[:iters], [repr(p) for p in perts], int(seed), batch, n, keys, info, reason,
                     orientation)


