"""The counting engine: records in, :class:`FreqTable` out. The one place that touches records.

``build_table`` takes a sample frame (pandas here; other backends dispatch by ``backend``), and
optionally a population frame or a boolean sample-flag column of one register frame, plus optional
design weights. It encodes the keys, forms cell ids, counts f_j (and F_j), checks f_j <= F_j, and
keeps what is needed to locate each sample record's cell later.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from gpurisk.errors import BadInput, UnsupportedBackend
from gpurisk.freq import cellid, count
from gpurisk.freq.columns import sample_flag_mask, weight_array  # noqa: F401  (re-exported)
from gpurisk.freq.encode import encode_keys
from gpurisk.freq.table import FreqTable


def build_table(sample, keys, population=None, sample_flag: str | None = None,
                weights: str | None = None, missing: str = "category",
                backend: str | None = None) -> FreqTable:
    """Count ``sample`` over ``keys``; see the module docstring.

    ``population`` is a frame holding the population's records (same key columns); ``sample_flag``
    names a boolean column of ``sample`` that marks the released records, ``sample`` then being the
    whole register. At most one of the two.
    """
    from gpurisk.backends import resolve_backend
    name = resolve_backend(backend, sample)
    if name != "pandas":
        return dispatch_build(name, sample, list(keys), population=population,
                              sample_flag=sample_flag, weights=weights, missing=missing)
    return build_table_pandas(sample, list(keys), population, sample_flag, weights, missing)


def dispatch_build(name: str, sample, keys, **kw):
    """build_table on a backend other than pandas (the engine owns its backends' counting code;
    :mod:`gpurisk.backends` only names them, checks they can run and provides the Dask client)."""
    from gpurisk.backends import require
    require(name)
    if name in ("dask", "dask-cudf"):
        from gpurisk.freq._dask import build_table_dask
        return build_table_dask(sample, keys, gpu=(name == "dask-cudf"), **kw)
    if name == "cudf":
        from gpurisk.freq._cudf import build_table_cudf
        return build_table_cudf(sample, keys, **kw)
    raise UnsupportedBackend(f"backend {name!r} is not available in this build")


def build_table_pandas(sample: pd.DataFrame, keys, population=None, sample_flag=None,
                       weights=None, missing="category") -> FreqTable:
    if population is not None and sample_flag is not None:
        raise BadInput("give either a population frame or a sample flag, not both")
    if not isinstance(sample, pd.DataFrame):
        raise BadInput(f"expected a pandas DataFrame, got {type(sample).__name__}")
    keys = list(keys)
    if sample_flag is not None:
        mask = sample_flag_mask(sample, sample_flag)
        register = sample
        w = weight_array(register, weights)[mask] if weights else None
        enc = encode_keys(register, keys, None, missing)
        cards = [e.cardinality for e in enc]
        if cellid.fits_radix(cards):
            pop_ids = cellid.mixed_radix_ids([e.sample for e in enc], cards)
            radix = True
        else:
            (pop_ids,) = cellid.surrogate_ids([[e.sample for e in enc]], cards)
            radix = False
        samp_ids = pop_ids[mask]
        pop_codes = [e.sample for e in enc]
    else:
        if population is not None and not isinstance(population, pd.DataFrame):
            raise BadInput(f"expected the population as a pandas DataFrame, got {type(population).__name__}")
        w = weight_array(sample, weights) if weights else None
        enc = encode_keys(sample, keys, population, missing)
        cards = [e.cardinality for e in enc]
        radix = cellid.fits_radix(cards)
        if radix:
            samp_ids = cellid.mixed_radix_ids([e.sample for e in enc], cards)
            pop_ids = (cellid.mixed_radix_ids([e.population for e in enc], cards)
                       if population is not None else None)
        else:
            parts = [[e.sample for e in enc]] + ([[e.population for e in enc]] if population is not None else [])
            ids = cellid.surrogate_ids(parts, cards)
            samp_ids, pop_ids = ids[0], (ids[1] if population is not None else None)
        pop_codes = [e.population for e in enc] if population is not None else None
    categories = [e.categories for e in enc]
    space = cellid.radix_space(cards) if radix else None
    return assemble(keys, categories, samp_ids, pop_ids, w, radix, space,
                    sample_codes=[e.sample for e in enc], pop_codes=pop_codes)


def assemble(keys, categories, samp_ids, pop_ids, w, radix, space, sample_codes=None,
             pop_codes=None) -> FreqTable:
    """Counts from cell ids (numpy), alignment of sample and population, f <= F check."""
    s_cells, s_cnt = count.count_ids(samp_ids)
    if pop_ids is None:
        cells, f, F = s_cells, s_cnt, None
    else:
        p_cells, p_cnt = count.count_ids(pop_ids)
        pos = np.searchsorted(p_cells, s_cells)
        pos_c = np.minimum(pos, max(p_cells.size - 1, 0))
        found = (p_cells.size > 0) & (p_cells[pos_c] == s_cells) if p_cells.size else np.zeros(s_cells.size, bool)
        cells, F = p_cells, p_cnt
        f = np.zeros(p_cells.size, np.int64)
        f[pos_c[found]] = s_cnt[found]
        over = np.zeros(s_cells.size, bool)
        over[found] = s_cnt[found] > p_cnt[pos_c[found]]
        bad = ~found | over
        if bad.any():
            _raise_f_over_F(keys, categories, s_cells[bad], s_cnt[bad],
                            np.where(found, p_cnt[pos_c], 0)[bad], radix, sample_codes, samp_ids)
    stored = None
    if not radix:
        # surrogate ids: keep each cell's codes from one representative record
        src_ids, src_codes = (pop_ids, pop_codes) if pop_ids is not None else (samp_ids, sample_codes)
        first = _first_index(src_ids, cells)
        stored = [np.asarray(c)[first].astype(np.int64) for c in src_codes]
    # the table marks f read-only; np.repeat (in locate) copies read-only repeats, so the locator
    # keeps a view of its own (it never writes into it)
    f_counts = f.view()

    def locator():
        return count.locate(samp_ids, cells, space, counts=f_counts)
    wsum = None
    if w is not None:
        wsum = np.bincount(locator(), weights=w, minlength=cells.size)
    return FreqTable(tuple(keys), categories, cells, f, F, wsum, radix, np, stored,
                     record_locator=locator)


def _first_index(ids: np.ndarray, cells: np.ndarray) -> np.ndarray:
    order = np.argsort(ids, kind="stable")
    s = ids[order]
    starts = np.flatnonzero(np.concatenate(([True], s[1:] != s[:-1])))
    return order[starts]


def _raise_f_over_F(keys, categories, cells, f, F, radix, sample_codes, samp_ids):
    total = cells.size
    ex = []
    for cid, fj, Fj in list(zip(cells, f, F))[:3]:
        if radix:
            codes = [int(np.asarray(c)[0]) for c in cellid.decode_radix(np.array([cid]), [len(c) for c in categories])]
        else:
            i = int(np.flatnonzero(samp_ids == cid)[0])
            codes = [int(c[i]) for c in sample_codes]
        # a sample unique's key values never appear in a message (see docs/bad-input.md)
        label = ", ".join(f"{k}=" + ("<withheld: f=1>" if int(fj) == 1 else repr(categories[v][codes[v]]))
                          for v, k in enumerate(keys))
        ex.append(f"({label}): f={int(fj)} > F={int(Fj)}")
    raise BadInput(f"{total} sample cell(s) have more records than the population "
                   f"(f_j > F_j), e.g. {'; '.join(ex)}; is the sample drawn from this population?")
