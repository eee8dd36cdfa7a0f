"""A global encoding plan for data that arrives in pieces (Dask partitions, a cuDF frame).

Codes must mean the same category in every partition, so the categories of each key are fixed first
from the distinct values of the whole input (each partition's, combined: integer keys of modest
range by their minimum, maximum and a presence count, :func:`distinct_ints`; others by
``drop_duplicates``), by the very function the pandas backend uses
(:func:`gpurisk.freq.encode.encode_keys`, run on the distinct values only): the categories, their
order, the missing category and the int-versus-hash decision are therefore those of the pandas
backend. Each partition is then encoded on its own against the plan
(:func:`encode_partition`), on numpy for pandas partitions and on CuPy for cuDF partitions.

Codes are packed into int64 *words* (:func:`word_layout`): one mixed-radix word when the product of
the cardinalities fits in int64 (then the word is the pandas backend's cell id), else several words,
each the mixed radix of a run of keys; cells then sort by their words exactly as by their codes.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import numpy as np
import pandas as pd

from gpurisk.errors import BadInput
from gpurisk.xp import frame_namespace, is_cudf, to_host
from gpurisk.freq import cellid
from gpurisk.freq.cellid import id_dtype, mixed_radix_ids, radix_space
from gpurisk.freq.schedule import in_runs, usable_cpus
from gpurisk.freq.encode import (MISSING_POLICIES, _series_parts, check_keys, check_value_types,
                                 encode_keys)

#: int keys whose value range is at most this are encoded through a lookup table, else by search
LUT_RANGE_LIMIT = 1 << 24


@dataclass
class KeyPlan:
    name: str
    categories: list
    has_missing: bool
    kind: str                      # "int": integral values, looked up by value; "obj": hashed labels;
                                   # "encoded": codes come with the plan (see plan_of)
    lo: int = 0
    lut: np.ndarray | None = None  # int kind, modest range: code of value v is lut[v - lo] (int32)
    ints: np.ndarray | None = None  # int kind: the sorted integer categories (searchsorted)
    labels: Any = None             # obj kind: pd.Index of the non-missing categories
    _gpu: dict = field(default_factory=dict, repr=False)

    @property
    def ncat(self) -> int:
        """Number of non-missing categories (the missing category's code)."""
        return len(self.categories) - (1 if self.has_missing else 0)

    @property
    def cardinality(self) -> int:
        return len(self.categories)

    def __getstate__(self):
        d = dict(self.__dict__)
        d["_gpu"] = {}
        return d


@dataclass
class Plan:
    keys: tuple[str, ...]
    key_plans: list[KeyPlan]
    layout: list[list[int]]        # key indices of each word

    @property
    def cards(self) -> list[int]:
        return [k.cardinality for k in self.key_plans]

    @property
    def categories(self) -> list[list]:
        return [k.categories for k in self.key_plans]

    @property
    def radix(self) -> bool:
        """One word whose ids are the mixed radix of every key (cells decode to codes)."""
        return len(self.layout) == 1 and cellid.fits_radix(self.cards)

    @property
    def space(self) -> int | None:
        """Number of possible ids of a one-word plan (None with several words)."""
        return radix_space(self.cards) if self.radix else None

    def bucket_width(self, nbuckets: int) -> int:
        """Width of ``nbuckets`` equal ranges of the first word's space (range buckets)."""
        space = 1
        for i in self.layout[0]:
            space *= max(int(self.cards[i]), 1)
        return max(1, -(-space // max(int(nbuckets), 1)))


def word_layout(cards) -> list[list[int]]:
    """Runs of consecutive keys whose cardinality product fits in int64 (greedy, left to right)."""
    out, cur, space = [], [], 1
    for i, c in enumerate(cards):
        c = max(int(c), 1)
        if cur and space * c > cellid.INT64_LIMIT:
            out.append(cur)
            cur, space = [], 1
        cur.append(i)
        space *= c
    out.append(cur)
    return out


def check_columns(columns, keys, sample_flag=None, weights=None, where="the sample") -> None:
    """The same column checks, and messages, as the pandas backend, on any frame's column list."""
    c = SimpleNamespace(columns=list(columns))  # check_keys only reads .columns
    check_keys(c, keys, where)
    if sample_flag is not None and sample_flag not in c.columns:
        raise BadInput(f"sample flag column {sample_flag!r} not in the register "
                       f"(its columns: {', '.join(map(str, c.columns[:20]))})")
    if weights is not None and weights not in c.columns:
        raise BadInput(f"weight column {weights!r} not in the sample")


def make_plan(keys, uniq_sample: dict, uniq_pop: dict | None = None, na_sample: dict | None = None,
              na_pop: dict | None = None, missing: str = "category") -> Plan:
    """The plan from each key's distinct values (pandas Series) in the sample and the population."""
    if missing not in MISSING_POLICIES:
        raise BadInput(f"missing={missing!r} is not one of {', '.join(MISSING_POLICIES)}")
    keys = list(keys)
    if missing == "error":
        for nas, where in ((na_sample, "the sample"), (na_pop, "the population")):
            for k in keys:
                if nas and nas.get(k, 0):
                    what = f"key column {k!r} has {int(nas[k])} missing value(s) in {where}"
                    raise BadInput(f"{what}; use missing='category' to treat them as a category",
                                   cli=f"{what}; use --missing category to treat them as a category")
    plans = []
    for k in keys:
        parts = [pd.Series(uniq_sample[k]).reset_index(drop=True)]
        if uniq_pop is not None:
            parts.append(pd.Series(uniq_pop[k]).reset_index(drop=True))
        frames = [p.to_frame(k) for p in parts]
        (enc,) = encode_keys(frames[0], [k], frames[1] if len(frames) > 1 else None, "category")
        kinds = [_series_parts(p)[2] for p in parts]
        plans.append(_key_plan(k, enc.categories, enc.has_missing, all(x == "int" for x in kinds)))
    return Plan(tuple(keys), plans, word_layout([p.cardinality for p in plans]))


def plan_of(encoded) -> Plan:
    """The plan of keys already encoded by :func:`gpurisk.freq.encode.encode_keys` on the whole input
    (one piece: its categories are the plan's, and its codes need no second encoding)."""
    plans = [_key_plan(e.name, e.categories, e.has_missing, False, lookups=False) for e in encoded]
    return Plan(tuple(e.name for e in encoded), plans, word_layout([p.cardinality for p in plans]))


def _key_plan(name, categories, has_missing, int_kind, lookups: bool = True) -> KeyPlan:
    labels = categories[:-1] if has_missing else categories
    if not lookups:      # a plan that encodes nothing more (see plan_of)
        return KeyPlan(name, list(categories), has_missing, "encoded")
    if int_kind:
        ints = np.asarray([int(v) for v in labels], dtype=np.int64)
        kp = KeyPlan(name, list(categories), has_missing, "int", ints=ints)
        if ints.size and int(ints[-1]) - int(ints[0]) < LUT_RANGE_LIMIT:
            kp.lo = int(ints[0])
            code_t = _code_dtype(len(categories))
            kp.lut = np.zeros(int(ints[-1]) - kp.lo + 1, dtype=code_t)
            kp.lut[ints - kp.lo] = np.arange(ints.size, dtype=code_t)
        return kp
    return KeyPlan(name, list(categories), has_missing, "obj", labels=pd.Index(labels, dtype=object))


# --- encoding one partition ---------------------------------------------------------------------

def _code_dtype(card: int):
    """The smallest signed integer type holding codes 0..card-1 (codes of a partition on a worker)."""
    return narrow_code_dtype(card)


def encode_partition(plan: Plan, frame):
    """Per key (lazily, one at a time), the codes of ``frame``'s records in the smallest integer
    type that holds them on numpy (pandas partitions); on CuPy (cuDF partitions) in the lookup
    table's type where one encodes the key (integers of modest range), else int64."""
    enc = _encode_cudf if is_cudf(frame) else _encode_pandas
    return (enc(kp, frame[kp.name]) for kp in plan.key_plans)


def encode_words(plan: Plan, frame) -> list:
    """The int64 words of ``frame``'s records; one key's codes are held at a time."""
    return pack_words(plan, encode_partition(plan, frame), frame_namespace(frame))


def _encode_pandas(kp: KeyPlan, s: pd.Series) -> np.ndarray:
    if kp.kind == "int":
        vals, na, kind = _series_parts(s)
        if kind != "int":
            raise BadInput(f"key column {kp.name!r} holds non-integral values in one partition "
                           "but integers elsewhere (column types differ between partitions)")
        vals = np.asarray(vals, dtype=np.int64)
        if na is not None:
            vals = np.where(na, kp.ints[0] if kp.ints.size else 0, vals)
        if kp.lut is not None:
            codes = kp.lut[vals - kp.lo] if kp.lo else kp.lut[vals]
        else:
            codes = np.searchsorted(kp.ints, vals).astype(_code_dtype(kp.cardinality))
        if na is not None:
            codes = np.where(na, kp.ncat, codes)
        return codes
    vals = s.to_numpy(dtype=object) if isinstance(s.dtype, pd.CategoricalDtype) else s
    codes = kp.labels.get_indexer(vals)
    if kp.has_missing:
        codes = np.where(codes < 0, kp.ncat, codes)
    return codes.astype(_code_dtype(kp.cardinality))


def _encode_cudf(kp: KeyPlan, s):  # pragma: no cover - needs a GPU
    import cupy as cp
    import cudf

    if isinstance(s.dtype, cudf.CategoricalDtype):
        s = s.astype(s.dtype.categories.dtype)
    if kp.kind == "int":
        # no mask to read where nothing is missing (a float column's NaN is not a null: read it)
        na = s.isna().values if s.null_count or s.dtype.kind == "f" else None
        if str(s.dtype) == "bool":      # fillna(int) on a boolean column raises in cuDF
            s = s.astype("int8")
        if na is not None:
            s = s.fillna(int(kp.ints[0]) if kp.ints.size else 0)
        # the column's own integers (int8 codes stay one byte a record); integral floats as int64
        raw = s.values if s.dtype.kind in "iu" else s.astype("int64").values
        if kp.lut is not None:
            lut = kp._gpu.get("lut")
            if lut is None:
                lut = kp._gpu["lut"] = cp.asarray(kp.lut)
            # lo = 0: every value indexes the table as it is; else int64, which v − lo cannot wrap
            codes = lut[raw if kp.lo == 0 else raw.astype(cp.int64) - kp.lo]   # the table's type
        else:
            ints = kp._gpu.get("ints")
            if ints is None:
                ints = kp._gpu["ints"] = cp.asarray(kp.ints)
            codes = cp.searchsorted(ints, raw.astype(cp.int64, copy=False))
        return codes if na is None else cp.where(na, kp.ncat, codes)
    cats = kp._gpu.get("cats")
    if cats is None:
        cats = kp._gpu["cats"] = cudf.Series(list(kp.labels))
    codes = s.astype(cudf.CategoricalDtype(categories=cats, ordered=True)).cat.codes
    codes = codes.astype("int64").fillna(-1).values
    return cp.where(codes < 0, kp.ncat, codes)


def pack_words(plan: Plan, codes, xp=np) -> list:
    """The words of each record: mixed radix of the codes of each run of keys (int64; a one-word
    plan's ids are uint32 on numpy when the space fits, which sorts twice as fast). ``codes`` is a
    sequence or an iterator of per-key code arrays, in key order."""
    cards = plan.cards
    if len(plan.layout) == 1:
        dtype = id_dtype(cards, np) if xp is np else xp.int64
        return [mixed_radix_ids(codes, cards, xp, dtype=dtype)]
    it = iter(codes)
    return [mixed_radix_ids((next(it) for _ in run), [cards[i] for i in run], xp, dtype=xp.int64)
            for run in plan.layout]


#: words decoded per chunk on numpy (the running quotients stay in cache)
UNPACK_CHUNK = 1 << 16


def narrow_code_dtype(card: int, xp=np):
    """The narrowest signed integer type holding codes 0 .. card - 1."""
    c = int(card)
    return xp.int8 if c <= 2**7 else xp.int16 if c <= 2**15 else xp.int32 if c <= 2**31 else xp.int64


def unpack_words(plan: Plan, words: list, xp=np, narrow: bool = False) -> list:
    """Inverse of :func:`pack_words`: per key, int64 codes (``narrow``: each key's in the narrowest
    integer type that holds its codes, :func:`narrow_code_dtype`; a finest table of many keys keeps
    a byte per key and cell instead of eight). On numpy the words are decoded in chunks of
    :data:`UNPACK_CHUNK`, so the quotients stay in cache."""
    cards = [int(c) for c in plan.cards]
    out: list = [None] * len(cards)
    dt = [narrow_code_dtype(k, xp) if narrow else xp.int64 for k in cards]
    for run, w in zip(plan.layout, words):
        m = int(w.shape[0])
        if xp is not np or m <= UNPACK_CHUNK:
            rest = w.astype(xp.int64, copy=True)
            for i in reversed(run):
                out[i] = (rest % cards[i]).astype(dt[i], copy=False)
                rest //= cards[i]
            continue
        for i in run:
            out[i] = np.empty(m, dtype=dt[i])
        halves = 2 if m >= UNPACK_PARALLEL and usable_cpus() >= 2 else 1
        in_runs(lambda a, b, w=w, run=run: _unpack_rows(w, run, cards, out, a, b), m,
                UNPACK_CHUNK, halves, "gpurisk-unpack")
    return out


#: from this many cells the words are decoded in two threads (two ranges of cells)
UNPACK_PARALLEL = 1 << 21


def _unpack_rows(w, run, cards, out, lo: int, hi: int) -> None:
    """Decode the words ``w[lo:hi]`` of the keys ``run`` into ``out`` (numpy), chunk by chunk."""
    rest = np.empty(UNPACK_CHUNK, dtype=np.int64)
    rem = np.empty(UNPACK_CHUNK, dtype=np.int64)
    for start in range(lo, hi, UNPACK_CHUNK):
        stop = min(hi, start + UNPACK_CHUNK)
        r, q = rest[: stop - start], rem[: stop - start]
        np.copyto(r, w[start:stop], casting="unsafe")
        for i in reversed(run):
            np.remainder(r, cards[i], out=q)
            out[i][start:stop] = q
            np.floor_divide(r, cards[i], out=r)


# --- distinct values of one partition -------------------------------------------------------------

def partition_uniques(frame, keys) -> dict:
    """{'n': rows, 'uniq': {key: distinct values}, 'na': {key: missing count}} of one partition.

    On a cuDF frame the integer keys without missing values are found together on the device
    (:func:`distinct_ints`: two or three device-to-host copies for all of them, as
    ``DEVICE_DISTINCT`` says) and come back as pandas Series; the other keys by cuDF's
    ``drop_duplicates``."""
    for k in keys:      # True, 1, 1.0 would be one distinct value: refused before they merge
        check_value_types(k, frame[k])
    fast = _device_distinct(frame, keys) if is_cudf(frame) and DEVICE_DISTINCT == "range" else {}
    return {"n": int(len(frame)),
            "uniq": {k: fast[k] if k in fast else _distinct(frame[k]) for k in keys},
            "na": {k: 0 if k in fast else int(frame[k].isna().sum()) for k in keys}}


#: how a cuDF frame's integer keys find their distinct values: "range" (:func:`distinct_ints`, all
#: keys at once) or "hash" (cuDF's ``drop_duplicates``, one key at a time, with its missing count);
#: ``bench/bench_count_phases.py --distinct`` times both
DEVICE_DISTINCT = "range"


def _plain_int(dtype) -> bool:
    """An integer column :func:`distinct_ints` takes (uint64 could exceed int64's range)."""
    return isinstance(dtype, np.dtype) and dtype.kind in "iu" and dtype != np.uint64


#: rows of a column the presence count reads first (every ⌈n / PROBE_ROWS⌉-th): where they hold every
#: value of the column's range [lo, hi], so does the column (and no other), and it is not read again
PROBE_ROWS = 1 << 16


def distinct_ints(columns, xp, limit: int) -> list:
    """Per integer array of ``columns`` (all in namespace ``xp``, none empty), its distinct values
    as a sorted host int64 array, or None where its range hi − lo + 1 exceeds ``limit`` (left to
    hashing). One pass finds every column's minimum and maximum (one copy to the host for all);
    then a presence count ``bincount(v − lo)`` of every column of modest range, first on a strided
    probe of :data:`PROBE_ROWS` rows (one copy for all): a column whose probe holds every value of
    its range holds exactly those (coded keys usually do), and only the others are counted whole
    (one more copy). On a GPU two or three synchronisations whatever the number of keys, where a
    hash or a sort per key takes one or more each."""
    k = len(columns)
    ends = to_host(xp.stack([xp.min(v).astype(xp.int64) for v in columns]
                            + [xp.max(v).astype(xp.int64) for v in columns]))
    lo, hi = ends[:k], ends[k:]
    spans = [int(hi[i]) - int(lo[i]) + 1 for i in range(k)]      # Python ints: no int64 wrap-around
    take = [i for i in range(k) if spans[i] <= limit]
    out: list = [None] * k
    if not take:
        return out

    def presence(todo, rows):
        """{i: the host presence flags of ``rows(i)``'s values over column i's range}, i in todo."""
        flags = []
        for i in todo:
            small = -(1 << 31) <= int(lo[i]) and int(hi[i]) < (1 << 31)
            idx = rows(i).astype(xp.int32 if small else xp.int64) - int(lo[i])
            flags.append(xp.bincount(idx, minlength=spans[i]) > 0)
        flat = to_host(xp.concatenate(flags) if len(flags) > 1 else flags[0])
        ends_at = np.cumsum([spans[i] for i in todo])
        return {i: flat[e - spans[i]:e] for i, e in zip(todo, ends_at)}

    steps = {i: max(1, -(-columns[i].shape[0] // PROBE_ROWS)) for i in take}
    found = presence(take, lambda i: columns[i][::steps[i]])
    whole = [i for i in take if steps[i] > 1 and not found[i].all()]     # a value the probe missed
    if whole:
        found.update(presence(whole, lambda i: columns[i]))
    for i in take:
        out[i] = np.flatnonzero(found[i]).astype(np.int64) + int(lo[i])
    return out


def _device_distinct(frame, keys) -> dict:  # pragma: no cover - needs a GPU
    """{key: distinct values (pandas Series, the column's dtype)} of a cuDF frame's integer keys
    with no missing value and a modest range (:func:`distinct_ints` on CuPy)."""
    import cupy
    n = len(frame)
    cols = [k for k in dict.fromkeys(keys) if _plain_int(frame[k].dtype) and not frame[k].null_count]
    if not cols or n <= 1024:
        return {}
    found = distinct_ints([frame[k].values for k in cols], cupy, min(LUT_RANGE_LIMIT, 4 * n))
    return {k: pd.Series(v.astype(frame[k].dtype), name=k)
            for k, v in zip(cols, found) if v is not None}


def _distinct(s):
    """The distinct values of a column, in its dtype: by min/max and a presence count for plain
    integer columns of modest range (:func:`distinct_ints`), else by hashing (``drop_duplicates``)."""
    if not is_cudf(s) and _plain_int(s.dtype) and len(s) > 1024:
        (found,) = distinct_ints([s.to_numpy()], np, min(LUT_RANGE_LIMIT, 4 * len(s)))
        if found is not None:
            return pd.Series(found.astype(s.dtype), name=s.name)
    return s.drop_duplicates()


def merge_uniques(*parts) -> dict:
    """Combine :func:`partition_uniques` results (a tree-reduction step)."""
    first = parts[0]
    if len(parts) == 1:
        return first
    return {"n": sum(p["n"] for p in parts),
            "uniq": {k: _concat([p["uniq"][k] for p in parts]).drop_duplicates() for k in first["uniq"]},
            "na": {k: sum(p["na"][k] for p in parts) for k in first["na"]}}


def uniques_to_pandas(u: dict) -> dict:
    """Bring a uniques result to pandas (cuDF series are moved to the host)."""
    return {"n": u["n"], "na": u["na"],
            "uniq": {k: _host_series(s) for k, s in u["uniq"].items()}}


def _host_series(s):
    """A cuDF series on the host; an integer column with nulls as pandas' nullable Int64 (its plain
    ``to_pandas()`` is float64, which rounds integers above 2**53 and the plan would then hold
    categories the device's exact integers never match)."""
    if not is_cudf(s):
        return s
    if s.null_count and str(s.dtype).startswith(("int", "uint")):  # pragma: no cover - needs a GPU
        return s.to_pandas(nullable=True)
    return s.to_pandas()  # pragma: no cover - needs a GPU


def _concat(items: list):
    """One series of ``items``: on the device when all are cuDF series, else on the host (a cuDF
    partition's integer keys come back as pandas Series, its other keys as cuDF ones)."""
    if items and all(is_cudf(s) for s in items):  # pragma: no cover - needs a GPU
        import cudf
        return cudf.concat(items, ignore_index=True)
    return pd.concat([_host_series(s) for s in items], ignore_index=True)
