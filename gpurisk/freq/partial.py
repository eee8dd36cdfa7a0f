"""Partial counts by cell, written once against an array namespace (numpy or CuPy).

A *partial* is what one piece of the input contributes: its distinct cells (int64 words, see
:mod:`gpurisk.freq.plan`) with, per cell, ``f`` (sample records), ``F`` (population records) and
``w`` (sum of the sample's design weights), each present only when that piece has it. Partials of
any pieces merge into the partial of their union (:func:`merge`), so a distributed count is a tree
of merges; :func:`split` cuts a partial into buckets of consecutive cell ranges so that a cell
table too large for one process can stay distributed, bucket ``b`` of every piece merging into the
cells of bucket ``b`` (and the buckets, in order, concatenating to the sorted table).
:func:`finish` turns the last partial into a :class:`~gpurisk.freq.table.FreqTable`.

Integer counts are summed exactly (integer prefix sums); weights by ``bincount``.
"""
from __future__ import annotations

import numpy as np

from gpurisk.errors import BadInput
from gpurisk.xp import frame_namespace, is_cudf, namespace, to_device, to_host
from gpurisk.freq.plan import Plan, encode_words, unpack_words
from gpurisk.freq.table import FreqTable

INT_FIELDS = ("f", "F")
FIELDS = ("f", "F", "w")


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

def _group(xp, words, runs: bool = False):
    """(order, sorted words, start mask, starts) of rows grouped by equal words. ``runs``: the
    rows are a few sorted runs (partials to merge): numpy's stable sort merges them in near-linear
    time."""
    n = int(words[0].shape[0])
    if len(words) == 1:
        order = xp.argsort(words[0], kind="stable") if (runs and xp is np) else xp.argsort(words[0])
    else:
        order = xp.lexsort(xp.stack(words[::-1]))
    sw = [w[order] for w in words]
    new = xp.ones(n, dtype=bool)
    if n > 1:
        diff = sw[0][1:] != sw[0][:-1]
        for w in sw[1:]:
            diff |= w[1:] != w[:-1]
        new[1:] = diff
    return order, sw, new, xp.flatnonzero(new)


def _segment_sums_int(xp, v_sorted, starts, n):
    cs = xp.cumsum(v_sorted.astype(xp.int64))
    ends = xp.concatenate([starts[1:], xp.asarray([n], dtype=starts.dtype)]) - 1
    tot = cs[ends]
    prev = xp.zeros_like(tot)
    prev[1:] = tot[:-1]
    return tot - prev


def reduce_cells(xp, words, ints: dict, floats: dict, want_inverse: bool = False,
                 runs: bool = False):
    """Group rows by cell. ``ints[name]`` is None (count rows), a boolean mask (count those rows)
    or int64 counts (sum them); ``floats[name]`` float64 values (sum them). Returns
    ``(partial, inverse)``, ``inverse`` being each row's cell index (or None)."""
    n = int(words[0].shape[0])
    if n == 0:
        part = {"words": [w[:0].astype(xp.int64) for w in words]}
        part.update({k: xp.zeros(0, xp.int64) for k in ints})
        part.update({k: xp.zeros(0, xp.float64) for k in floats})
        return part, (xp.zeros(0, xp.int64) if want_inverse else None)
    plain = all(v is None for v in ints.values()) and not floats and not want_inverse
    if plain and len(words) == 1:   # fastest path: sort the ids, run lengths are the counts
        s = xp.sort(words[0])
        new = xp.ones(n, dtype=bool)
        new[1:] = s[1:] != s[:-1]
        starts = xp.flatnonzero(new)
        counts = xp.diff(xp.concatenate([starts, xp.asarray([n], dtype=starts.dtype)])).astype(xp.int64)
        part = {"words": [s[starts]]}
        part.update({k: counts for k in ints})
        return part, None
    order, sw, new, starts = _group(xp, words, runs)
    part = {"words": [w[starts] for w in sw]}
    m = int(starts.shape[0])
    for k, v in ints.items():
        if v is None:
            part[k] = xp.diff(xp.concatenate([starts, xp.asarray([n], dtype=starts.dtype)])).astype(xp.int64)
        else:
            part[k] = _segment_sums_int(xp, v[order], starts, n)
    seg = None
    if floats or want_inverse:
        seg = xp.cumsum(new) - 1
    for k, v in floats.items():
        part[k] = xp.bincount(seg, weights=v[order].astype(xp.float64), minlength=m)
    inverse = None
    if want_inverse:
        inverse = xp.empty(n, dtype=xp.int64)
        inverse[order] = seg
    return part, inverse


# --- partials of input pieces --------------------------------------------------------------------

def count_piece(plan: Plan, frame, role: str, sample_flag: str | None = None,
                weights: str | None = None, want_inverse: bool = False, xp=None):
    """The partial of one piece of input (a pandas or cuDF frame) and, if asked, each row's cell.

    ``role`` is ``"sample"`` (f, and w with ``weights``), ``"population"`` (F) or ``"register"``
    (F over every row, f and w over the rows ``sample_flag`` marks). ``xp``: the namespace to count
    in, when it is not the frame's own (a pandas frame counted on a device: its words, flag and
    weights are encoded on the host and moved once).
    """
    host = frame_namespace(frame)
    xp = host if xp is None else xp
    words = encode_words(plan, frame)
    w = _weights(frame, weights) if weights else None
    if xp is not host:
        words = [to_device(a, xp) for a in words]
        w = None if w is None else to_device(w, xp)
    if role == "sample":
        ints, floats = {"f": None}, ({"w": w} if w is not None else {})
    elif role == "population":
        ints, floats = {"F": None}, {}
    elif role == "register":
        mask = _flag(frame, sample_flag)
        if xp is not host:
            mask = to_device(mask, xp)
        ints = {"F": None, "f": mask}
        floats = {"w": xp.where(mask, w, 0.0)} if w is not None else {}
    else:
        raise ValueError(f"unknown role {role!r}")
    return reduce_cells(xp, words, ints, floats, want_inverse)


def partial(plan: Plan, frame, role: str, sample_flag=None, weights=None, xp=None) -> dict:
    """:func:`count_piece` without the rows' cells (the function Dask maps over partitions)."""
    return count_piece(plan, frame, role, sample_flag, weights, xp=xp)[0]


def _flag(frame, col):
    if is_cudf(frame):  # pragma: no cover - needs a GPU
        from gpurisk.freq.columns import sample_flag_mask
        import cupy as cp
        s = frame[col]
        if str(s.dtype) == "bool" and not s.isna().any():
            return s.values
        return cp.asarray(sample_flag_mask(s.to_frame(col).to_pandas(), col))
    from gpurisk.freq.columns import sample_flag_mask
    return sample_flag_mask(frame, col)


def _weights(frame, col):
    if is_cudf(frame):  # pragma: no cover - needs a GPU
        import cupy as cp
        from gpurisk.freq.columns import weight_array
        s = frame[col]
        kind = str(s.dtype)
        if kind.startswith(("float", "int", "uint")):
            w = s.astype("float64").fillna(float("nan")).values
            if bool(cp.all(cp.isfinite(w) & (w > 0))):
                return w
        return cp.asarray(weight_array(s.to_frame(col).to_pandas(), col))  # for its message
    from gpurisk.freq.columns import weight_array
    return weight_array(frame, col)


# --- combining -----------------------------------------------------------------------------------

def merge(*parts, want_inverse: bool = False):
    """The partial of the union of the pieces (a tree-reduction step); with ``want_inverse``,
    ``(partial, inverse)`` where ``inverse`` maps the concatenated input cells to output cells."""
    parts = [p for p in parts if p is not None]
    if len(parts) == 1 and not want_inverse:
        return parts[0]
    xp = namespace(parts[0]["words"][0])
    nwords = len(parts[0]["words"])
    words = [xp.concatenate([p["words"][i] for p in parts]) for i in range(nwords)]
    present = [k for k in FIELDS if any(k in p for p in parts)]
    cols = {}
    for k in present:
        dt = xp.float64 if k == "w" else xp.int64
        cols[k] = xp.concatenate([p[k] if k in p else xp.zeros(size(p), dt) for p in parts])
    ints = {k: v for k, v in cols.items() if k in INT_FIELDS}
    floats = {k: v for k, v in cols.items() if k not in INT_FIELDS}
    out, inverse = reduce_cells(xp, words, ints, floats, want_inverse, runs=True)
    return (out, inverse) if want_inverse else out


def bucket_ids(xp, words, width: int):
    """Range bucket of each cell: its first word divided by ``width`` (see Plan.bucket_width)."""
    return words[0] // int(width)


def split(part: dict, width: int, nbuckets: int) -> list[dict]:
    """Cut a partial into ``nbuckets`` partials of consecutive cell ranges; each stays sorted, and
    buckets in order concatenate to a sorted partial."""
    if nbuckets == 1:
        return [part]
    xp = namespace(part["words"][0])
    b = bucket_ids(xp, part["words"], width)
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


def locate(rec_words, cell_words):
    """Index of each record's cell in the sorted cells (-1 where the cell is absent)."""
    xp = namespace(cell_words[0])
    n, m = int(rec_words[0].shape[0]), int(cell_words[0].shape[0])
    if n == 0 or m == 0:
        return xp.full(n, -1, dtype=xp.int64)
    if len(cell_words) == 1:
        pos = xp.minimum(xp.searchsorted(cell_words[0], rec_words[0]), m - 1)
        return xp.where(cell_words[0][pos] == rec_words[0], pos, -1).astype(xp.int64)
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
        cell_id, stored = xp.arange(m, dtype=xp.int64), unpack_words(plan, words, xp)
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
        # a sample unique's key values never appear in a message
        lab_s = ", ".join(f"{k}=" + ("<withheld: f=1>" if int(fj) == 1 else repr(v)) for k, v in lab.items())
        ex.append(f"({lab_s}): f={int(fj)} > F={int(Fj)}")
    return BadInput(f"{int(total)} sample cell(s) have more records than the population "
                    f"(f_j > F_j), e.g. {'; '.join(ex)}; is the sample drawn from this population?")


def labels_of(plan: Plan, words) -> list[dict]:
    """Key values of cells given by their (numpy) words."""
    codes = unpack_words(plan, [to_host(w) for w in words])
    return [{k: plan.categories[v][int(codes[v][i])] for v, k in enumerate(plan.keys)}
            for i in range(int(codes[0].shape[0]))]
