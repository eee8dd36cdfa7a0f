"""Everything τ̂1 and Ê read of their sample uniques, both measures in one pass over the uniques,
each unique's prior made a slice at a time and no per-unique array kept but a byte of E's
variance (issue 43: Ê's memory).

Per sample unique j each measure's term t_j, its variance Var_j and, for the covariance the terms
share through the margins, its slope d_j in ln μ (:func:`gpurisk.models.terms.nb_terms` at the
unique's prior: :class:`gpurisk.models.prior.LooPrior`) are read only through

- Σ_j t_j and Σ_j Var_j: the estimate and the model's own variance;
- per fitted margin and category g, Σ_{j in g} d_j and Σ_{j in g} d_j²
  (:class:`gpurisk.models.prior.SharedSums`, :func:`gpurisk.models.prior.shared_variance`);
- τ1's Σ_j κ3_j = Σ_j t_j (1 − t_j)(1 − 2 t_j), the skewed bound's third cumulant;
- E's Var_j, by which its skewed bound leaves out the uniques of the smallest variances: each
  unique's variance is kept as its bin (:func:`variance_bins`, four an octave: one byte a unique)
  with each bin's Σ Var_j, and :func:`skew_sum` leaves out whole bins, the smallest first, as many
  as the budget allows (the uniques of a sort by variance would be left out up to the budget:
  whole bins leave out at most a bin's worth fewer, never more), then sums κ3 over the others,
  their priors made again;
- the other sums the interval reads at the same prior (α̂'s profile ends, the root keys' gammas:
  :class:`Reader`), each a few numbers per slice.

:func:`unique_pass` takes all of them in one pass, a window of WINDOW_SLICES slices of
:data:`gpurisk.models.terms.CHUNK` uniques at a time (at least four times a margin's categories,
as shared_variance's slices, at most WINDOW_MAX): the slices shared among the CPUs as
:func:`gpurisk.models.terms.by_chunks` shares them (one pool of threads for the pass, where there
are at least THREADED_CHUNKS slices), then the window's categories looked up once per margin, the
margins side by side, and both measures' slopes added. Each slice's sums are kept apart and added
in the slices' order, as :func:`gpurisk.models.terms.sums_by_chunks` adds them, so the numbers do
not depend on the threads, and each is the number the same sum taken by sums_by_chunks over the
kept prior would be (they may differ from one ``np.sum`` of a whole array in the last digits:
another order of the same additions); the margins' sums are added a window at a time.
"""
from __future__ import annotations

from typing import Callable, NamedTuple

import numpy as np

from gpurisk.models import terms
from gpurisk.models.slice_memo import SliceMemo

#: the two measures: τ̂1's terms and Ê's
KINDS = ("tau1", "inverse")
#: a window holds at least this many slices of terms.CHUNK uniques (the slices shared among threads)
WINDOW_SLICES = 4
#: and at most this many uniques (both measures' slopes are kept while the margins' sums are added)
WINDOW_MAX = 1 << 20
#: E's variances are kept as bins, four an octave (:func:`variance_bins`): BINS of them, the last
#: holding every variance below about 2^(−BINS/4) (10⁻¹⁹: their sum is at most n1 times that) and 0
BINS = 256


class Sums(NamedTuple):
    """One measure's sums over the sample uniques: Σ t_j (``value``), Σ Var_j (``variance``), the
    shared margins' cross terms (``shared``, None where not asked), τ1's Σ κ3_j (``kappa3``, None
    for E)."""
    value: float
    variance: float
    shared: float | None
    kappa3: float | None


class Reader(NamedTuple):
    """Further sums at each unique's prior: ``read(μ, α, start, stop)`` gives ``width`` numbers
    for the slice of uniques start..stop (their prior μ̃, α̃), each a sum over the slice; the pass
    adds them over the slices in order. With ``own``, ``read`` is also given the pass's own terms
    of the slice, per measure of KINDS (term, slope in ln μ̃ or None where the pass forms none), so
    it need not form them again."""
    width: int
    read: Callable
    own: bool = False


class Pass(NamedTuple):
    """What :func:`unique_pass` gives: per measure its :class:`Sums`; per reader its summed numbers
    (an array of its width); E's variances' bins per unique and each bin's Σ Var_j (None where
    not asked)."""
    sums: dict
    read: list
    bins: np.ndarray | None
    bin_sums: np.ndarray | None


class FixedPrior:
    """A prior given per unique (``prior=plugin``: the fitted μ̂ and α̂), read as
    :class:`gpurisk.models.prior.LooPrior` is: ``at(where)`` (a slice or positions)."""

    def __init__(self, mu, alpha):
        # an array, or means made where read (gpurisk.models.forest.CellMeans)
        self.mu, self.alpha = (mu if hasattr(mu, "shape") else np.asarray(mu)), alpha
        self.size = int(self.mu.shape[0])

    def at(self, where):
        return self.mu[where], (self.alpha[where] if np.ndim(self.alpha) else self.alpha)


def variance_bins(v) -> np.ndarray:
    """Each variance's bin (uint8): 4·(−e) + ⌊(1 − m)·8⌋ (the last of the four where m = ½) for
    v = m·2^e, m in [½, 1): a smaller variance, a larger bin; 0 and the variances below the last
    bin's edge in the last (BINS − 1)."""
    m, e = np.frexp(v)
    b = 4 * (-e.astype(np.int64)) + np.minimum(np.floor((1.0 - m) * 8.0), 3.0).astype(np.int64)
    b = np.where(v > 0.0, np.clip(b, 0, BINS - 1), BINS - 1)
    return b.astype(np.uint8)


def unique_pass(prior, pi: float, exact: bool, shared=None, bins: bool = False,
                readers=()) -> Pass:
    """:class:`Pass` of both measures' terms at ``prior`` (``.size`` uniques, ``.at(where)`` their
    μ̃ on the sample scale and α̃), each term :func:`gpurisk.models.terms.nb_terms` at (1 − π) μ̃/π
    with ``exact``'s variance. ``shared``: a factory of :class:`gpurisk.models.prior.SharedSums`
    (called once per measure), None for no shared terms (then no slope is computed); ``bins``:
    E's variances' bins are kept (for the skewed bound: :func:`skew_sum`); ``readers``: further
    :class:`Reader` sums at the same prior."""
    size = int(prior.size)
    slope = shared is not None
    acc = {k: shared() for k in KINDS} if slope else {}
    margins = len(acc["tau1"]) if slope else 0
    chunk = terms.CHUNK
    groups = max((acc["tau1"].groups(k) for k in range(margins)), default=0)
    # a whole number of slices, so the windows' slices are the pass's
    window = min(max(WINDOW_SLICES, -(-4 * groups // chunk)), max(WINDOW_MAX // chunk, 1)) * chunk
    starts = range(0, max(size, 1), chunk)
    # per slice: τ1's Σ t, Σ Var, Σ κ3, E's Σ t, Σ Var, then each bin's Σ Var, then the readers'
    at_bins = 5
    at_readers = at_bins + (BINS if bins else 0)
    width = at_readers + sum(r.width for r in readers)
    out = np.zeros((len(starts), width))
    kept_bins = np.empty(size, dtype=np.uint8) if bins else None
    buffers = {k: np.empty(min(window, size)) for k in KINDS} if slope else {}

    def one(start, w0):
        with SliceMemo():    # each key's codes at the slice's uniques gathered once
            one_slice(start, w0)

    def one_slice(start, w0):
        stop = min(start + chunk, size)
        m, a = prior.at(slice(start, stop))
        lam_m = (1.0 - pi) * m / pi
        row = out[start // chunk]
        own = []
        for i, kind in enumerate(KINDS):
            got = terms.nb_terms(lam_m, a, pi, kind, exact, slope=slope)
            t, v = got[0], got[1]
            own.append((t, got[2] if slope else None))
            row[3 * i] = float(np.sum(t))
            row[3 * i + 1] = float(np.sum(v))
            if kind == "tau1":
                row[2] = float(np.sum(t * (1.0 - t) * (1.0 - 2.0 * t)))
            elif bins:
                b = variance_bins(v)
                kept_bins[start:stop] = b
                row[at_bins:at_readers] = np.bincount(b, weights=v, minlength=BINS)
            if slope:
                buffers[kind][start - w0:stop - w0] = got[2]
        col = at_readers
        for r in readers:
            row[col:col + r.width] = (r.read(m, a, start, stop, own) if r.own else
                                      r.read(m, a, start, stop))
            col += r.width

    def margin(k, w0, w1):
        ids, rows = acc["tau1"].ids(k, w0, w1)
        for kind in KINDS:
            acc[kind].add(k, ids, rows, buffers[kind][:w1 - w0])
    from gpurisk.freq.schedule import usable_cpus
    threads = min(terms.TERMS_THREADS, usable_cpus())
    pool = None
    if threads > 1 and len(starts) >= terms.THREADED_CHUNKS:     # one pool for the pass
        from concurrent.futures import ThreadPoolExecutor
        pool = ThreadPoolExecutor(threads, thread_name_prefix="gpurisk-terms")
    run = (lambda fn, items: list(pool.map(fn, items))) if pool else \
        (lambda fn, items: [fn(i) for i in items])
    try:
        for w0 in range(0, size, window):
            w1 = min(w0 + window, size)
            run(lambda s, w0=w0: one(s, w0), range(w0, w1, chunk))
            if margins:
                run(lambda k, w0=w0, w1=w1: margin(k, w0, w1), range(margins))
    finally:
        if pool is not None:
            pool.shutdown()
    total = out.sum(axis=0)
    sums = {kind: Sums(float(total[3 * i]), float(total[3 * i + 1]),
                       acc[kind].total() if slope else None,
                       float(total[2]) if kind == "tau1" else None)
            for i, kind in enumerate(KINDS)}
    read, col = [], at_readers
    for r in readers:
        read.append(total[col:col + r.width])
        col += r.width
    return Pass(sums, read, kept_bins, total[at_bins:at_readers] if bins else None)


def skew_sum(prior, pi: float, exact: bool, bins, bin_sums, budget: float) -> float | None:
    """E's Σ κ3 over the sample uniques the skewed bound keeps (None where all are left out):
    whole bins of the smallest variances are left out while their Σ Var stays within ``budget``
    (a term lies in [0, 1], so |κ3_j| ≤ Var_j and the part left out moves Σ κ3 by at most the
    budget), and each kept unique's prior, term, variance and κ3
    (:func:`gpurisk.models.terms.third_cumulants`) are made again, a slice of uniques at a time."""
    sums = np.asarray(bin_sums, dtype=np.float64)
    tail = np.cumsum(sums[::-1])[::-1]             # Σ Var over the bins b and above
    if float(tail[0]) <= budget:
        return None
    cut = int(np.flatnonzero(tail > budget)[-1]) + 1      # the bins from cut on are left out
    size = int(bins.shape[0])
    starts = range(0, max(size, 1), terms.CHUNK)
    out = np.zeros(len(starts))

    def one(start):
        idx = start + np.flatnonzero(bins[start:start + terms.CHUNK] < cut)
        if idx.shape[0]:
            m, a = prior.at(idx)
            lam_m = (1.0 - pi) * m / pi
            t, v = terms.nb_terms(lam_m, a, pi, "inverse", exact)
            out[start // terms.CHUNK] = terms.third_cumulants(m, a, pi, "inverse", t, v,
                                                              total=True)
    terms.each_slice(one, starts)
    return float(out.sum())
