"""Data intrusion simulation for perturbed files: pr(cm|um) after swapping, PRAM, ... SPEC §6.

The released file B is the original A after a perturbation. Record r has original key x_r and
released key x'_r; f^B counts the released keys. The intruder knows x_r; removing r and copying it
back with probability f (the sampling fraction π):

- x'_r = x_r and f^B(x_r) = 1: copied back, a correct unique match (weight f)          -> T
- x'_r = x_r and f^B(x_r) = 2: not copied back, a false unique match (weight 1 − f)    -> P
- x'_r ≠ x_r and f^B(x_r) = 1: a unique match on another record whatever happens        -> F

    pr(cm|um) = T f / (T f + P (1 − f) + F)                          (Elliot 2001, §13)

With no perturbation T = n1, P = 2 n2, F = 0 and pr(cm|um) is θ̂ (Skinner & Elliot eq. 7) exactly.
This is the intruder's orientation (SPEC §6). ``orientation="release"`` follows the paper's text
literally instead (each released record matched against the original file); the two agree without
perturbation but not after it (see :func:`tpf_counts`).

:func:`run_dis` repeats perturb -> count until the running mean of pr(cm|um) is stable: the
running means of the last ``stable`` + 1 iterations lie within half a unit of the ``decimals``-th
decimal (0.0005 for 3), or ``max_iter`` iterations have run (Elliot's rule, §14: "stabilised to the
third decimal place over the previous 10 iterations or when 100 iterations had passed"; a spread is
used rather than equal rounding, which never settles when the mean sits on a rounding boundary).

Perturbations are drawn ``batch`` files at a time as (batch, n) arrays, and all T, P, F of a batch
come from one sort. Batch k uses the generator ``numpy.random.default_rng([seed, k])``, so a run is
a function of (data, keys, perturbations, seed, batch): repeatable, and resumable from a state file
that holds the T, P, F of the batches done.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np

from gpurisk.io.lock import locked
from gpurisk.errors import BadInput, PluginError
from gpurisk.freq import cellid
from gpurisk.freq.partial import count_ids, values_at
from gpurisk.xp import to_host

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


# --- counting ----------------------------------------------------------------------------------
def record_codes(table) -> list[np.ndarray]:
    """Each sample record's code per key, in record order, from a table that keeps its records."""
    rc = to_host(table.record_cell())
    return [to_host(c)[rc] for c in table.cell_codes()]


def _ids(orig: Sequence[np.ndarray], pert: Sequence[np.ndarray], cards) -> tuple[np.ndarray, np.ndarray, int]:
    """Cell ids of the original (n,) and perturbed (B, n) keys in one id space, and its size."""
    shape = np.shape(pert[0])
    flat = [np.ascontiguousarray(p).reshape(-1) for p in pert]
    if cellid.fits_radix(cards):
        o = cellid.mixed_radix_ids(list(orig), cards)
        p = cellid.mixed_radix_ids(flat, cards)
        space = cellid.radix_space(cards)
    else:
        o, p = cellid.surrogate_ids([list(orig), flat], cards)
        space = int(max(o.max(initial=0), p.max(initial=0))) + 1
    return o, p.reshape(shape), space


ORIENTATIONS = ("intruder", "release")


def tpf_counts(orig: Sequence[np.ndarray], pert: Sequence[np.ndarray], cards,
               orientation: str = "intruder") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """T, P, F (one value per perturbed file) of original codes (n,) and perturbed codes (B, n).

    ``orientation="intruder"`` (SPEC §6, the default) looks up each record's true key x_r in the
    released file's counts f^B. ``"release"`` is the paper's literal procedure (§13: "each record
    from B was then matched against file A"): each released key x'_r is looked up in the original
    counts f^A; T = x'_r = x_r with f^A = 1, P = x'_r = x_r with f^A = 2, F = x'_r ≠ x_r with
    f^A(x'_r) = 1. Without perturbation both give θ̂; under perturbation they differ.
    """
    if orientation not in ORIENTATIONS:
        raise BadInput(f"orientation={orientation!r} is not one of {', '.join(ORIENTATIONS)}")
    pert = [np.atleast_2d(p) for p in pert]
    B, n = pert[0].shape
    o, p, space = _ids(orig, pert, cards)
    if orientation == "release":
        cells, cnt = count_ids(o)
        fB = values_at(cells, cnt, p.astype(np.int64, copy=False))
    else:
        if space * B > cellid.INT64_LIMIT:  # densify the id space first
            o, p = cellid.surrogate_ids([[o], [p.ravel()]], [space])
            p = p.reshape(B, n)
            space = int(max(o.max(initial=0), p.max(initial=0))) + 1
        # the counts f^B of every released file at once: cells are (file, id) pairs
        rep = np.broadcast_to(np.arange(B, dtype=np.int64)[:, None], (B, n))
        cells, cnt = count_ids(cellid.mixed_radix_ids([rep, p], [B, space], dtype=np.int64).ravel())
        want = cellid.mixed_radix_ids([rep, np.broadcast_to(o, (B, n))], [B, space], dtype=np.int64)
        fB = values_at(cells, cnt, want)
    same = p == o[None, :]
    one = fB == 1
    T = np.count_nonzero(same & one, axis=1)
    P = np.count_nonzero(same & (fB == 2), axis=1)
    F = np.count_nonzero(~same & one, axis=1)
    return T, P, F


def pr_cm_um(T, P, F, f: float) -> np.ndarray:
    """T f / (T f + P (1 − f) + F), NaN where no unique match can happen."""
    T, P, F = (np.asarray(x, dtype=np.float64) for x in (T, P, F))
    num = T * f
    den = num + P * (1.0 - f) + F
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)


def stop_point(values: np.ndarray, max_iter: int, stable: int, decimals: int) -> tuple[int, bool] | None:
    """(iterations, converged) once the rule is met within ``values``, else None."""
    v = np.asarray(values, dtype=np.float64)[:max_iter]
    k = v.size
    tol = 0.5 * 10.0 ** (-decimals)
    if k >= stable + 1 and not np.isnan(v).any():
        m = np.cumsum(v) / np.arange(1, k + 1)
        win = np.lib.stride_tricks.sliding_window_view(m, stable + 1)
        ok = np.flatnonzero(win.max(axis=1) - win.min(axis=1) < tol)
        if ok.size:
            return int(ok[0]) + stable + 1, True
    if k >= max_iter:
        return max_iter, False
    return None


# --- the loop ----------------------------------------------------------------------------------
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
                                 "--state")


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


def _distributed_codes(inp, frames, keys, extra_cols):
    """(codes per key, categories, codes of the extra columns) of a Dask input: the keys and the
    columns the perturbations read are counted on the workers, and each record's codes (narrow
    integers, records × columns bytes) are encoded there with that count's plan and brought here,
    where the perturbations redraw the whole file (a swap pairs records across partitions). The
    codes equal the pandas backend's, so a seed gives the same pr(cm|um) on both."""
    from gpurisk.freq._dask import record_codes_dask
    if inp.recode:
        raise BadInput(f"dis with --recode on the {inp.backend} backend: the records' codes are "
                       "taken before recoding; recode the data, or use --backend pandas (or cudf)")
    table = inp.count(frames, also=extra_cols).table
    cols = list(table.keys)
    allc = record_codes_dask(frames.sample, table, gpu=inp.backend == "dask-cudf", sep=inp.sep)
    pos = {c: v for v, c in enumerate(cols)}
    return ([allc[pos[k]] for k in keys], [table.categories[pos[k]] for k in keys],
            {c: allc[pos[c]] for c in extra_cols})


@locked("state", "the state file")
def dis(frame, keys: Sequence[str], fraction: float, perturb: Iterable, *, max_iter: int = 100,
        stable: int = 10, decimals: int = 3, batch: int | None = None, seed: int = 0,
        missing: str = "category", state: str | Path | None = None, sep: str | None = None,
        encoding: str = "utf-8", orientation: str = "intruder", recode=None,
        backend: str | None = None, allow_high_cardinality: bool = False) -> DISResult:
    """:func:`run_dis` on a frame (or a CSV / Parquet path): ``gpurisk dis``. Read, checked and
    counted by :class:`gpurisk.inputs.Inputs`, as every command.

    ``perturb`` is a list of perturbations: instances, spec strings such as
    ``"swap:fraction=0.1,geo=state,pairing=age+sex"``, or (name, options) pairs.
    """
    from gpurisk.freq.encode import encode_keys
    from gpurisk.inputs import Inputs, check_fraction, key_list
    from gpurisk.plugins import make_perturbation

    keys = key_list(keys)
    perts = [make_perturbation(p) for p in ([perturb] if isinstance(perturb, str) else perturb)]
    extra_cols = list(dict.fromkeys(c for p in perts for c in p.columns(keys)))
    f = check_fraction(fraction, "sampling fraction f")
    if f is None:
        raise BadInput("dis needs the sampling fraction f (--fraction)")
    inp = Inputs(frame, keys, fraction=f, missing=missing, recode=recode, backend=backend, sep=sep,
                 encoding=encoding, allow_high_cardinality=allow_high_cardinality,
                 columns=extra_cols)
    if state is not None:
        from gpurisk.io import check_output_file
        check_output_file(state, None, "--state")   # before the work
    frames = inp.read()
    if inp.distributed:
        codes, categories, extra = _distributed_codes(inp, frames, keys, extra_cols)
    else:
        table = inp.count(frames, records="dis (it perturbs the records)").table
        codes, categories = record_codes(table), table.categories
        extra = {}
        if extra_cols:
            extra = {e.name: e.sample for e in encode_keys(frames.sample, extra_cols, missing=missing)}
    return run_dis(codes, categories, keys, f, perts, extra=extra,
                   max_iter=max_iter, stable=stable, decimals=decimals, batch=batch, seed=seed,
                   state=state, orientation=orientation)
