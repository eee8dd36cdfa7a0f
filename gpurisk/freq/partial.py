"""Partial counts by cell, written once against an array namespace (numpy or CuPy).

A *partial* is what one piece of the input contributes: its distinct cells (int64 words, see
:mod:`gpurisk.freq.plan`) with, per cell, ``f`` (sample records), ``F`` (population records) and
``w`` (sum of the sample's design weights), each present only when that piece has it. Partials of
any pieces merge into the partial of their union (:func:`merge`), so a distributed count is a tree
of merges; :func:`split` cuts a partial into buckets of consecutive cell ranges so that a cell
table too large for one process can stay distributed, bucket ``b`` of every piece merging into the
cells of bucket ``b`` (and the buckets, in order, concatenating to the sorted table).
:func:`finish` turns the last partial into a :class:`~gpurisk.freq.table.FreqTable`.

This is the one reducer of gpurisk: the in-process backends count their single piece with the same
functions (:func:`count_ids`, :func:`reduce_cells`, :func:`merge`, :func:`finish`), and every record
is found in its cell by :func:`locate`. Integer counts are summed exactly (run lengths, integer prefix
sums); weights by ``bincount`` in the records' order.
"""
from __future__ import annotations

import numpy as np

from gpurisk.errors import BadInput
from gpurisk.xp import frame_namespace, is_cudf, namespace, scalar, to_device, to_host
from gpurisk.freq.cellid import DENSE_LOOKUP_LIMIT, count_ids, dense_count, mixed_radix_ids
from gpurisk.freq.plan import Plan, encode_words, unpack_words
from gpurisk.freq import schedule
from gpurisk.freq.table import FreqTable

INT_FIELDS = ("f", "F")
FIELDS = ("f", "F", "w")
#: from this many records, a binary search on numpy looks them up in sorted order
SORTED_SEARCH_MIN = 1 << 16


def part_to_host(part: dict) -> dict:
    """The same partial with numpy arrays."""
    out = {"words": [to_host(w) for w in part["words"]]}
    for k in FIELDS:
        if k in part:
            out[k] = to_host(part[k])
    return out


def size(part: dict) -> int:
    return int(part["words"][0].shape[0])


# --- grouping ------------------------------------------------------------------------------------

def group_ids(ids, xp=None, space: int | None = None):
    """(sorted distinct ids as int64, each id's index among them): :func:`count_ids` with the
    inverse. A histogram and a lookup table where :func:`dense_count` says so for the ids' range
    ``space``, else one argsort (the counts of :func:`count_ids` and the inverse from it)."""
    xp = namespace(ids) if xp is None else xp
    n = int(ids.shape[0])
    if n == 0:
        return xp.zeros(0, xp.int64), xp.zeros(0, xp.int64)
    if dense_count(space, n):
        cells, counts = count_ids(ids, xp, space=space)
        return cells, locate([ids], [cells], space=space, counts=counts, complete=True).astype(xp.int64)
    order, sw, new, starts = _group(xp, [ids])
    inverse = xp.empty(n, dtype=xp.int64)
    inverse[order] = xp.cumsum(new) - 1
    return sw[0][starts].astype(xp.int64), inverse


def _group(xp, words, runs: bool = False):
    """(order, sorted words, start mask, starts) of rows grouped by equal words. ``runs``: the
    rows are a few sorted runs (partials to merge): numpy's stable sort merges them in near-linear
    time. Several words are ordered by :func:`_word_order` on numpy (stable, and run-aware), by a
    lexicographic sort elsewhere, ties in row order either way; one word's unsorted rows by a plain
    argsort."""
    n = int(words[0].shape[0])
    if len(words) == 1:
        order = xp.argsort(words[0], kind="stable") if (runs and xp is np) else xp.argsort(words[0])
    else:
        order = _word_order(words) if xp is np else None
        if order is None:
            order = xp.lexsort(xp.stack(words[::-1]))
    sw = [w[order] for w in words]
    new = xp.ones(n, dtype=bool)
    if n > 1:
        diff = sw[0][1:] != sw[0][:-1]
        for w in sw[1:]:
            diff |= w[1:] != w[:-1]
        new[1:] = diff
    return order, sw, new, xp.flatnonzero(new)


def _word_order(words):
    """An order of the rows (numpy) that sorts them by their words, ties in row order (the order of
    ``np.lexsort``); None when the ranks of the first word times a later word's range would
    overflow int64.

    The first word is argsorted once; each later word is folded into the ranks of the words before
    it (``rank * range + word``) and the fold argsorted again: one-word stable sorts, faster than
    numpy's lexicographic sort of int64 words and than its quicksort (two words: 5·10⁶ random rows
    0.92 s against 1.89 s for ``np.lexsort``; 10⁷ rows 1.60 s against 2.78 s unstable). Rows that
    are a few sorted runs (partials to merge) are merged in near-linear time by each sort, a fold
    taken in the first word's order being again a few sorted runs within each of its ranks: eight
    runs of 625 000 cells of two words, 0.38 s against 1.76 s for ``np.lexsort``."""
    n = int(words[0].shape[0])
    if n == 0:
        return None
    rng = []
    for w in words[1:]:
        top = int(w.max()) + 1
        if int(w.min()) < 0 or n * top >= 2**63:
            return None
        rng.append(top)
    # (arrays are dropped as soon as they are used: a register's rows are many)
    order = np.argsort(words[0], kind="stable")
    keyed = words[0][order]              # the sort key so far, sorted
    last = len(rng) - 1
    for j, (w, top) in enumerate(zip(words[1:], rng)):
        fold = np.empty(n, dtype=np.int64)
        fold[0] = 0
        np.cumsum(keyed[1:] != keyed[:-1], out=fold[1:])     # the rank of each row's key so far
        del keyed
        fold *= top
        fold += w[order]
        again = np.argsort(fold, kind="stable")
        if j < last:                     # the sorted key, for the next word's ranks only
            keyed = fold[again]
        del fold
        order = order[again]
        del again
    return order


def _segment_sums_int(xp, v_sorted, starts, n):
    if xp is np:       # no per-row prefix sums: a register's flags stay one byte a row
        return np.add.reduceat(v_sorted, starts, dtype=np.int64)
    cs = xp.cumsum(v_sorted.astype(xp.int64))
    ends = xp.concatenate([starts[1:], xp.asarray([n], dtype=starts.dtype)]) - 1
    tot = cs[ends]
    prev = xp.zeros_like(tot)
    prev[1:] = tot[:-1]
    return tot - prev


def reduce_cells(xp, words, ints: dict, floats: dict, runs: bool = False,
                 space: int | None = None) -> dict:
    """The partial of rows grouped by cell. ``ints[name]`` is None (count rows), integer counts or a
    boolean mask (sum them: a register's sample flag); ``floats[name]`` float64 values (sum them,
    in row order). ``space``: the ids' range, when known (one word), for :func:`locate`.

    One word of unsorted rows (an input piece): the ids are sorted and run-length encoded
    (:func:`count_ids`); only when values are summed is each row located in its cell (:func:`locate`,
    which reuses the run lengths). Several words, or sorted runs to merge (``runs``): one (stable)
    argsort groups the rows.
    """
    n = int(words[0].shape[0])
    if n == 0:
        part = {"words": [w[:0].astype(xp.int64) for w in words]}
        part.update({k: xp.zeros(0, xp.int64) for k in ints})
        part.update({k: xp.zeros(0, xp.float64) for k in floats})
        return part
    counted = all(v is None for v in ints.values())
    if len(words) == 1 and counted and not runs:
        cells, counts = count_ids(words[0], xp, space=space)
        part = {"words": [cells]}
        part.update({k: counts for k in ints})
        if floats:
            inverse = locate(words, part["words"], space=space, counts=counts, complete=True)
            m = int(cells.shape[0])
            for k, v in floats.items():
                part[k] = xp.bincount(inverse, weights=v.astype(xp.float64), minlength=m)
        return part
    if len(words) == 1 and not runs and dense_count(space, n):
        part = _reduce_dense(xp, words[0], ints, floats, int(space))
        if part is not None:
            return part
    order, sw, new, starts = _group(xp, words, runs)
    part = {"words": [w[starts] for w in sw]}
    del sw
    m = int(starts.shape[0])
    for k, v in ints.items():
        if v is None:
            part[k] = xp.diff(xp.concatenate([starts, xp.asarray([n], dtype=starts.dtype)])).astype(xp.int64)
        else:
            part[k] = _segment_sums_int(xp, v[order], starts, n)
    if floats:
        seg = xp.cumsum(new) - 1
        for k, v in floats.items():
            part[k] = xp.bincount(seg, weights=v[order].astype(xp.float64), minlength=m)
    return part


def _reduce_dense(xp, ids, ints: dict, floats: dict, space: int):
    """:func:`reduce_cells` of one word of ids in ``[0, space)`` by histograms (no sort): what
    :func:`dense_count` chooses. Integer sums go through float64 bins, exact while the values'
    total is below 2**53 (checked; None otherwise, and the caller sorts)."""
    sums = {}
    for k, v in ints.items():
        if v is not None:
            if int(scalar(v.sum())) >= 2**53:
                return None
            sums[k] = v
    ids = ids.astype(xp.int64)
    hist = xp.bincount(ids, minlength=space)
    cells = xp.flatnonzero(hist)
    part = {"words": [cells.astype(xp.int64)]}
    for k, v in ints.items():
        if v is None:
            part[k] = hist[cells].astype(xp.int64)
        else:
            part[k] = xp.bincount(ids, weights=v.astype(xp.float64), minlength=space)[cells].astype(xp.int64)
    for k, v in floats.items():
        part[k] = xp.bincount(ids, weights=v.astype(xp.float64), minlength=space)[cells]
    return part


def locate(rec_words, cell_words, space: int | None = None, counts=None, complete: bool = False):
    """THE way a record finds its cell: the index of each record's cell in the sorted cells (-1 where
    the cell is absent), arrays in the cells' namespace.

    One word: a dense lookup table when the id space is small (``space`` <= DENSE_LOOKUP_LIMIT);
    on numpy, when every record's cell is present (``complete``) with ``counts[j]`` records in cell
    ``j`` (the cells were counted from these very records), one sort of ``id << b | row`` orders the
    rows by cell and ``repeat(arange, counts)`` numbers them; otherwise binary search. Several words:
    cells and records sorted together, each cell just before its records.
    """
    xp = namespace(cell_words[0])
    n, m = int(rec_words[0].shape[0]), int(cell_words[0].shape[0])
    if n == 0 or m == 0:
        return xp.full(n, -1, dtype=xp.int64)
    if len(cell_words) == 1:
        ids, cells = rec_words[0], cell_words[0]
        idx_t = xp.int32 if m < 2**31 else xp.int64
        if space is not None and space <= DENSE_LOOKUP_LIMIT:
            lut = xp.zeros(int(space), dtype=idx_t) if complete else xp.full(int(space), -1, dtype=idx_t)
            lut[cells] = xp.arange(m, dtype=idx_t)
            return lut[ids]
        if complete and counts is not None and xp is np:
            top = int(space if space is not None else int(cells[-1]) + 1)
            nb = int(n - 1).bit_length() or 1
            if (top - 1).bit_length() + nb <= 63:
                packed = ids.astype(np.int64)
                packed <<= nb
                packed |= np.arange(n, dtype=np.int64)
                packed.sort()
                packed &= (1 << nb) - 1          # now the row numbers, in cell order
                out = np.empty(n, dtype=idx_t)
                # ``counts`` may be read-only (a table's f): np.repeat copies its repeats then
                out[packed] = np.repeat(np.arange(m, dtype=idx_t), counts)
                return out
        if xp is np and n >= SORTED_SEARCH_MIN:
            # binary searches in record order miss the cache at every step (2 M records among
            # 6.4 M cells: 2.1 s); in sorted order they walk the cells once (0.34 s with the sort)
            order = np.argsort(ids, kind="stable")
            pos = np.empty(n, dtype=np.int64)
            pos[order] = np.searchsorted(cells, ids[order].astype(cells.dtype, copy=False))
        else:
            pos = xp.searchsorted(cells, ids)
        if complete:
            return pos
        pos = xp.minimum(pos, m - 1)
        return xp.where(cells[pos] == ids, pos, -1).astype(xp.int64)
    # several words: sort cells and records together, each cell just before its records
    tag = xp.concatenate([xp.zeros(m, xp.int64), xp.ones(n, xp.int64)])
    cols = [xp.concatenate([c, r]) for c, r in zip(cell_words, rec_words)]
    order = xp.lexsort(xp.stack([tag] + cols[::-1]))
    cell_before = xp.cumsum(tag[order] == 0) - 1
    is_rec = order >= m
    cand = xp.maximum(cell_before[is_rec], 0)
    rec_row = order[is_rec] - m
    ok = xp.ones(cand.shape[0], dtype=bool)
    for c, r in zip(cell_words, rec_words):
        ok &= c[cand] == r[rec_row]
    out = xp.full(n, -1, dtype=xp.int64)
    out[rec_row] = xp.where(ok, cand, -1)
    return out


def values_at(cells, values, ids):
    """The value (a count, a fitted frequency) of each id of ``ids`` (any shape) in the sorted
    ``cells``, 0 where the id is absent."""
    xp = namespace(cells)
    if int(cells.shape[0]) == 0:
        return xp.zeros(ids.shape, dtype=values.dtype)
    pos = locate([ids.reshape(-1)], [cells])
    out = xp.where(pos >= 0, values[xp.maximum(pos, 0)], 0)
    return out.reshape(ids.shape)


# --- partials of input pieces --------------------------------------------------------------------

def encode_piece(plan: Plan, frame, role: str, sample_flag: str | None = None,
                 weights: str | None = None, xp=None):
    """``(words, mask, w)`` of one piece of input (a pandas or cuDF frame): its records' words, the
    sample flag's mask (role ``"register"``) and the design weights, in namespace ``xp`` (default
    the frame's own; a pandas frame counted on a device is encoded on the host and moved once)."""
    host = frame_namespace(frame)
    xp = host if xp is None else xp
    words = encode_words(plan, frame)
    mask = _flag(frame, sample_flag) if role == "register" else None
    w = _weights(frame, weights, mask) if weights and role != "population" else None
    if xp is not host:
        words = [to_device(a, xp) for a in words]
        w = None if w is None else to_device(w, xp)
        mask = None if mask is None else to_device(mask, xp)
    return words, mask, w


#: from this many rows a register of several words is grouped as two ranges of its first word,
#: side by side in two threads where two CPUs are free (numpy's sorts and gathers release the GIL);
#: the cells of the lower range all sort before the upper's, so the two partials concatenate
PARALLEL_ROWS = 1 << 21


def count_words(xp, words, role: str, mask=None, w=None, space: int | None = None,
                consume: bool = False) -> dict:
    """The partial of records given by their words. ``role`` is ``"sample"`` (f, and w with
    weights), ``"population"`` (F) or ``"register"`` (F over every row, f and w over the rows
    ``mask`` marks: the partial of all rows merged with the partial of the marked ones).
    ``consume``: ``words`` (a list) is emptied, so its arrays are freed as soon as they are used."""
    words, given = list(words), words
    if consume:
        given.clear()
    if role == "sample":
        return reduce_cells(xp, words, {"f": None}, {"w": w} if w is not None else {}, space=space)
    if role == "population":
        return reduce_cells(xp, words, {"F": None}, {}, space=space)
    if role == "register":
        if len(words) > 1:
            # several words are grouped by one sort: F and f (and w) in that one pass rather than
            # a second sort of the sampled rows and a merge sort of the two
            n = int(words[0].shape[0])
            if xp is np and n >= PARALLEL_ROWS and schedule.usable_cpus() >= 2:
                return _register_in_two_ranges(words, mask, w, space)
            return _register_words(xp, words, mask, w, space)
        everyone = reduce_cells(xp, words, {"F": None}, {}, space=space)
        sampled = count_words(xp, [x[mask] for x in words], "sample", w=None if w is None else w[mask],
                              space=space)
        return merge(everyone, sampled)
    raise ValueError(f"unknown role {role!r}")


def _register_words(xp, words, mask, w, space):
    floats = {} if w is None else {"w": xp.where(mask, w, 0.0)}
    return reduce_cells(xp, words, {"F": None, "f": mask}, floats, space=space)


def _register_in_two_ranges(words: list, mask, w, space) -> dict:
    """:func:`_register_words` of numpy rows as the rows below and above a pivot of the first word
    (the median of a seeded sample of it), grouped in two threads; the same partial. ``words`` (a
    list the caller no longer holds) is emptied once both ranges have their copies."""
    from concurrent.futures import ThreadPoolExecutor
    n = int(words[0].shape[0])
    pick = words[0][np.random.default_rng(0).integers(0, n, 4097)]
    pivot = np.partition(pick, 2048)[2048]
    low = words[0] < pivot
    if not low.any():
        return _register_words(np, words, mask, w, space)
    sides = []
    for sel in (low, ~low):
        sides.append(([x[sel] for x in words], mask[sel], None if w is None else w[sel]))
    del low, sel
    words.clear()
    with ThreadPoolExecutor(2, thread_name_prefix="gpurisk-count") as pool:
        futs = [pool.submit(_register_words, np, *side, space) for side in sides]
        del sides
        parts = [f.result() for f in futs]
    return concat(parts)


def partial(plan: Plan, frame, role: str, sample_flag=None, weights=None, xp=None) -> dict:
    """The partial of one piece of input (the function Dask maps over partitions)."""
    words, mask, w = encode_piece(plan, frame, role, sample_flag, weights, xp)
    return count_words(namespace(words[0]), words, role, mask, w, space=plan.space)


def _flag(frame, col):
    if is_cudf(frame):  # pragma: no cover - needs a GPU
        from gpurisk.freq.columns import sample_flag_mask
        import cupy as cp
        s = frame[col]
        if not s.isna().any():
            kind = str(s.dtype)
            if kind == "bool":
                return s.values
            if kind.startswith(("int", "uint")) and bool(s.isin([0, 1]).all()):
                return (s == 1).values      # 0/1 flags stay on the device as booleans do
        # anything else goes to the host once, for sample_flag_mask's checks and its message
        return cp.asarray(sample_flag_mask(s.to_frame(col).to_pandas(), col))
    from gpurisk.freq.columns import sample_flag_mask
    return sample_flag_mask(frame, col)


def _weights(frame, col, mask=None):
    """The weights of one piece (see :func:`gpurisk.freq.columns.weight_array`; with ``mask``, the
    register's sample flag, only the sampled records' weights count)."""
    if is_cudf(frame):  # pragma: no cover - needs a GPU
        import cupy as cp
        from gpurisk.freq.columns import weight_array
        s = frame[col]
        kind = str(s.dtype)
        if kind.startswith(("float", "int", "uint")):
            w = s.astype("float64").fillna(float("nan")).values
            if mask is not None:
                w = cp.where(mask, w, 1.0)
            if bool(cp.all(cp.isfinite(w) & (w > 0))):
                return w
        host_mask = None if mask is None else cp.asnumpy(mask)
        return cp.asarray(weight_array(s.to_frame(col).to_pandas(), col, host_mask))  # its message
    from gpurisk.freq.columns import weight_array
    return weight_array(frame, col, mask)


# --- combining -----------------------------------------------------------------------------------

def merge(*parts) -> dict:
    """The partial of the union of the pieces (a tree-reduction step)."""
    parts = [p for p in parts if p is not None]
    if len(parts) == 1:
        return parts[0]
    if len(parts) == 2 and len(parts[0]["words"]) == 1:
        # the common case of a population (or a whole register) and its sample: one side's cells
        # hold the other's, which is then placed by binary search instead of a merge sort
        a, b = sorted(parts, key=size, reverse=True)
        out = _merge_subset(a, b)
        if out is not None:
            return out
    xp = namespace(parts[0]["words"][0])
    nwords = len(parts[0]["words"])
    words = [xp.concatenate([p["words"][i] for p in parts]) for i in range(nwords)]
    cols = {}
    for k in FIELDS:
        if any(k in p for p in parts):
            dt = xp.float64 if k == "w" else xp.int64
            cols[k] = xp.concatenate([p[k] if k in p else xp.zeros(size(p), dt) for p in parts])
    ints = {k: v for k, v in cols.items() if k in INT_FIELDS}
    floats = {k: v for k, v in cols.items() if k not in INT_FIELDS}
    return reduce_cells(xp, words, ints, floats, runs=True)


def _merge_subset(big: dict, small: dict):
    """``merge(big, small)`` when every cell of ``small`` is a cell of ``big`` (one word), else None."""
    xp = namespace(big["words"][0])
    cells, sub = big["words"][0], small["words"][0]
    m = int(cells.shape[0])
    if int(sub.shape[0]) == 0:
        pos = xp.zeros(0, dtype=xp.int64)
    else:
        if m == 0:
            return None
        pos = xp.minimum(xp.searchsorted(cells, sub), m - 1)
        if not scalar(xp.all(cells[pos] == sub)):
            return None
    out = {"words": [cells]}
    for k in FIELDS:
        if k not in big and k not in small:
            continue
        dt = xp.float64 if k == "w" else xp.int64
        col = xp.zeros(m, dt) if k not in big else big[k].astype(dt, copy=True)
        if k in small:
            col[pos] += small[k]        # cells are distinct: one addition per cell, exact
        out[k] = col
    return out


def bucket_ids(xp, words, cut):
    """Range bucket of each cell from its first word. ``cut`` is an int, the ranges' common width
    (Plan.bucket_width: equal ranges of the word's space), or an ascending host array of
    ``nbuckets - 1`` splitters (:func:`splitters`: ranges holding about equal shares of the
    records); a word equal to a splitter starts the next range."""
    if isinstance(cut, (int, np.integer)):
        return words[0] // int(cut)
    return xp.searchsorted(xp.asarray(cut), words[0], side="right")


def splitters(first, weights, nbuckets: int) -> np.ndarray:
    """The ``nbuckets - 1`` splitters (int64, ascending) that cut records, given by a sample of
    their first words ``first`` each standing for ``weights`` records, into ranges of about equal
    weight. Equal-width ranges of the word's space put a skewed key's common categories in one range
    (a third of a register's cells in one of 100); a range of records holds at most as many cells,
    so these bound every range's cells by about records / nbuckets. A value that alone holds more
    than a range's share keeps a range of its own (its splitters repeat, the ranges between are
    empty at the end). Where the splitters fall never changes a count, only which task sums it."""
    first = np.asarray(first, dtype=np.int64)
    k = max(int(nbuckets) - 1, 0)
    if k == 0 or first.size == 0:
        return np.zeros(k, np.int64)
    order = np.argsort(first, kind="stable")
    v = first[order]
    cum = np.cumsum(np.asarray(weights, dtype=np.float64)[order])
    at = np.searchsorted(cum, cum[-1] * np.arange(1, nbuckets) / nbuckets, side="right")
    cuts, times = np.unique(v[np.minimum(at, v.size - 1)], return_counts=True)
    # a value holding several ranges' share: its range ends where the next value starts
    distinct = np.unique(v)
    nxt = np.searchsorted(distinct, cuts[times > 1], side="right")
    cuts = np.unique(np.concatenate([cuts, distinct[nxt[nxt < distinct.size]]]))[:k]
    return np.concatenate([cuts, np.full(k - cuts.size, cuts[-1] if cuts.size else 0, np.int64)])


def split(part: dict, cut, nbuckets: int) -> list[dict]:
    """Cut a partial into ``nbuckets`` partials of consecutive cell ranges (``cut``: see
    :func:`bucket_ids`); each stays sorted, and buckets in order concatenate to a sorted partial."""
    if nbuckets == 1:
        return [part]
    xp = namespace(part["words"][0])
    b = bucket_ids(xp, part["words"], cut)
    bounds = xp.searchsorted(b, xp.arange(nbuckets + 1, dtype=b.dtype))  # cells are sorted
    bounds = to_host(bounds).tolist()
    return [{k: ([w[lo:hi] for w in v] if k == "words" else v[lo:hi]) for k, v in part.items()}
            for lo, hi in zip(bounds[:-1], bounds[1:])]


def concat(parts: list[dict]) -> dict:
    """Partials of disjoint, ordered cell ranges (buckets in order) joined into one."""
    xp = namespace(parts[0]["words"][0])
    out = {"words": [xp.concatenate([p["words"][i] for p in parts]) for i in range(len(parts[0]["words"]))]}
    for k in FIELDS:
        if any(k in p for p in parts):
            dt = xp.float64 if k == "w" else xp.int64
            out[k] = xp.concatenate([p[k] if k in p else xp.zeros(size(p), dt) for p in parts])
    return out


# --- summaries ---------------------------------------------------------------------------------

#: joint counts #{j : f_j = a, F_j = b} are kept for a <= JOINT_MAX_F
JOINT_MAX_F = 3


def summary(f, F=None, w=None) -> dict:
    """The small summaries of cell counts (a table's, or one bucket's of a distributed table) in
    any namespace; only they come to the host: ``n``, ``cells`` (f_j > 0), ``fof`` {r: n_r}, ``w``
    (total weight), and with ``F``: ``N``, ``pop_cells``, ``pop_fof`` {r: N_r} and ``joint``
    {(f_j, F_j): cells} for 1 <= f_j <= JOINT_MAX_F. Summaries of disjoint cell ranges add up."""
    from gpurisk.freq.table import fof_dict
    xp = namespace(f)
    fof = fof_dict(xp, f)
    out = {"n": int(scalar(f.sum())), "cells": sum(fof.values()), "fof": fof,
           "w": None if w is None else float(scalar(w.sum())),
           "N": None, "pop_cells": None, "pop_fof": None, "joint": {}}
    if F is not None:
        N = int(scalar(F.sum()))
        pop_fof = fof_dict(xp, F)
        out.update(N=N, pop_cells=sum(pop_fof.values()), pop_fof=pop_fof)
        small = (f > 0) & (f <= JOINT_MAX_F)
        # (f, F) pairs: F <= N, so the mixed radix f * (N + 1) + F is one exact int64 id
        ids = mixed_radix_ids([f[small], F[small]], [JOINT_MAX_F + 1, N + 1], xp, dtype=xp.int64)
        pairs, cnt = (to_host(a) for a in count_ids(ids, xp))
        out["joint"] = {(int(a // (N + 1)), int(a % (N + 1))): int(c)
                        for a, c in zip(pairs.tolist(), cnt.tolist())}
    return out


# --- the table -----------------------------------------------------------------------------------

def finish(plan: Plan, part: dict, backend: str, record_locator=None) -> FreqTable:
    """The FreqTable of a final partial (cells sorted by words): checks f_j <= F_j."""
    xp = namespace(part["words"][0])
    words = part["words"]
    m = size(part)
    f = part.get("f")
    if f is None:
        f = xp.zeros(m, xp.int64)
    F = part.get("F")
    if plan.radix:
        cell_id, stored = words[0], None
    else:
        cell_id, stored = xp.arange(m, dtype=xp.int64), unpack_words(plan, words, xp, narrow=True)
    table = FreqTable(tuple(plan.keys), plan.categories, cell_id, f, F, part.get("w"), plan.radix, xp,
                      stored, record_locator, backend)
    if F is not None:
        check_f_le_F(table)
    return table


def check_f_le_F(table: FreqTable) -> None:
    """One line naming up to three cells with more sample than population records."""
    xp = table.xp
    bad = xp.flatnonzero(table.f > table.F)
    if int(bad.shape[0]) == 0:
        return
    idx = bad[:3]
    raise f_over_F_error(table.cell_labels(idx), to_host(table.f[idx]), to_host(table.F[idx]),
                         int(bad.shape[0]))


def f_over_F_error(labels, f, F, total) -> BadInput:
    """The pandas backend's f_j > F_j message, from up to three cells' labels and counts."""
    ex = []
    for lab, fj, Fj in zip(labels, np.asarray(f), np.asarray(F)):
        # key values never appear: F is small there, the cell of few sample or population records
        lab_s = ", ".join(f"{k}=<withheld: f={int(fj)}>" for k in lab)
        ex.append(f"({lab_s}): f={int(fj)} > F={int(Fj)}")
    return BadInput(f"{int(total)} sample cell(s) have more records than the population "
                    f"(f_j > F_j), e.g. {'; '.join(ex)}; is the sample drawn from this population?")


def labels_of(plan: Plan, words) -> list[dict]:
    """Key values of cells given by their (numpy) words."""
    codes = unpack_words(plan, [to_host(w) for w in words])
    return [{k: plan.categories[v][int(codes[v][i])] for v, k in enumerate(plan.keys)}
            for i in range(int(codes[0].shape[0]))]
