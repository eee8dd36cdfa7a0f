"""The counting engine on Dask (pandas partitions) and dask-cuda (cuDF partitions).

Two passes over the partitions, each a tree reduction (fan-in ``SPLIT_EVERY``) of small results:

1. each partition's distinct key values and missing counts -> the global encoding plan
   (:mod:`gpurisk.freq.plan`), so that a code means the same category in every partition;
2. each partition's partial counts by cell (:mod:`gpurisk.freq.partial`), cut into ``buckets``
   ranges of cells; bucket ``b`` of every partition merges into the cells of range ``b``.

The ranges are cut where they hold about equal numbers of records (:meth:`_Run.cut`): pass 1 also
keeps, on the workers, rows spread evenly over each partition; once the plan is known their cells'
first words (codes, not values) come back and give the splitters. Equal-width ranges of the cell
space put a skewed key's common categories in one range: a third of a 100 M register's cells in one
of 100 merges, more than a 3 GB worker holds.

Records never leave their worker. :func:`build_table_dask` brings the merged cell table (cells <=
records; about 16-32 bytes a cell) to the client as a FreqTable with numpy arrays -- that table must
fit in the client's memory. :func:`summary_dask` keeps the cells on the workers and brings back
only frequencies of frequencies (the distributed path for cell tables too large to gather), and
:func:`write_records_dask` writes each record's cell counts partition by partition to Parquet.

Each public function takes ``connect`` first: what its backend gives (``Backend.client``), a
callable that opens the Dask client to count on. The engine never looks the backend up itself.
"""
from __future__ import annotations

import math
import uuid
from pathlib import Path

import numpy as np

from gpurisk.errors import BadInput
from gpurisk.core.messages import bad_input
from gpurisk.xp import is_cudf, namespace, scalar, to_host
from gpurisk.freq import partial as P
from gpurisk.freq.plan import (check_columns, encode_words, make_plan, merge_uniques,
                               partition_uniques, uniques_to_pandas)

SPLIT_EVERY = 8
ROWS_PER_PARTITION = 1_000_000   # in-memory frames are cut into partitions of about this size
GPU_ROWS_PER_PARTITION = 64_000_000   # the same on GPU workers (kernels want long arrays)
#: default buckets: at most this many cells merge in one task ...
CELLS_PER_BUCKET = 8_000_000
#: ... and at most a worker's memory limit over this many bytes (a 3 GB worker: 5 M cells; measured
#: on a 20 M-record, 16-key register on 2 workers of 3 GB: 1.1 GB at the largest worker with
#: buckets of 5 M cells, 1.5 GB with 10 M), but never fewer than CELLS_PER_BUCKET_MIN ...
BUCKET_BYTES_PER_CELL = 600
CELLS_PER_BUCKET_MIN = 1_000_000
#: ... and at least this many buckets per worker where the records allow buckets of
#: CELLS_PER_BUCKET_MIN cells (each worker merges and rolls up buckets of its own)
BUCKETS_PER_WORKER = 2
GPU_CELLS_PER_BUCKET = 64_000_000    # the same on GPU workers (~2 GiB of cells: 1/32 of an 80 GB GPU)
MAX_BUCKETS = 256
#: a record pass sends the cells' columns in buckets of about this size (one bucket in a task)
LOOKUP_BYTES_PER_BUCKET = 256 * 2**20
PLAN_MEMO = "gpurisk.dask.plan"     # a gathered FreqTable's encoding plan (see build_table_dask)
WORDS_MEMO = "gpurisk.dask.words"   # and its cells' words, in the table's cell order


# --- inputs --------------------------------------------------------------------------------------

def to_dask(data, columns, gpu: bool, nworkers: int, sep=None, where="the sample", **check):
    """A Dask DataFrame of ``columns`` (checked to exist) from a path, a frame or a Dask frame."""
    import dask.dataframe as dd

    from gpurisk.xp import is_cudf, is_pandas
    if isinstance(data, (str, Path)):
        from gpurisk.io import read_lazy
        from gpurisk.io.lazy import check_flat
        ddf = read_lazy(data, sep=sep, columns=None, gpu=gpu, typed=list(dict.fromkeys(columns)))
        check_flat(data, list(dict.fromkeys(columns)))
        in_memory = False
    else:
        if _is_dask(data):
            ddf, in_memory = data, False
        elif is_pandas(data) and hasattr(data, "columns"):
            nparts = max(nworkers, math.ceil(len(data) / ROWS_PER_PARTITION), 1)
            check_columns(data.columns, **check, where=where)
            from gpurisk.freq.encode import check_value_types
            for k in check.get("keys", ()):    # Dask turns objects into text: True, 1, 1.0 -> 3
                check_value_types(k, data[k])
            ddf = dd.from_pandas(data[list(dict.fromkeys(columns))], npartitions=nparts, sort=False)
            in_memory = True
        elif is_cudf(data):  # pragma: no cover - needs a GPU (a cuDF frame)
            import dask_cudf
            nparts = max(nworkers, math.ceil(len(data) / GPU_ROWS_PER_PARTITION), 1)
            check_columns(data.columns, **check, where=where)
            ddf = dask_cudf.from_cudf(data[list(dict.fromkeys(columns))], npartitions=nparts,
                                      sort=False)   # keep the records' order, as from_pandas does
            in_memory = True
        else:
            raise BadInput(f"expected a DataFrame, a Dask DataFrame or a path, got {type(data).__name__}")
    check_columns(ddf.columns, **check, where=where)
    ddf = ddf[list(dict.fromkeys(columns))]
    meta_gpu = is_cudf(getattr(ddf, "_meta", None))
    if gpu and not meta_gpu:
        ddf = ddf.to_backend("cudf")
    elif not gpu and meta_gpu:
        ddf = ddf.to_backend("pandas")
    return ddf, in_memory


def _is_dask(data) -> bool:
    """A Dask collection (a Dask or dask-cuDF DataFrame)."""
    return hasattr(data, "__dask_graph__") and hasattr(data, "npartitions")


def _workers(client) -> dict:
    try:
        return client.scheduler_info(n_workers=-1)["workers"]
    except TypeError:  # older distributed
        return client.scheduler_info()["workers"]


def _nworkers(client) -> int:
    return max(1, len(_workers(client)))


def _worker_memory(client) -> int | None:
    """The smallest memory limit of the client's workers in bytes (None: none is limited)."""
    limits = [int(w.get("memory_limit") or 0) for w in _workers(client).values()]
    limits = [m for m in limits if m > 0]
    return min(limits) if limits else None


def _tree(items, fn, split_every=SPLIT_EVERY):
    from dask import delayed
    items = list(items)
    if not items:
        raise BadInput("the input has no partitions")
    while len(items) > 1:
        items = [delayed(fn, pure=True)(*items[i:i + split_every])
                 for i in range(0, len(items), split_every)]
    return items[0]


#: the start of pandas' messages for a text that does not convert to a column's type
_PARSE_FAILURES = ("Unable to parse string", "invalid literal for", "could not convert string")


def _compute(client, obj, keep: int = 0):
    """client.compute(...).result(), with Dask's CSV type errors turned into one line. With
    ``keep``, ``obj`` is a list whose last ``keep`` items are computed in the same graph (their
    inputs read once with the others') but left on the cluster: (results of the others, futures
    of those)."""
    try:
        if keep:
            futs = client.compute(list(obj))
            return client.gather(futs[:len(futs) - keep]), futs[len(futs) - keep:]
        return client.compute(obj, sync=True)
    except (TypeError, OverflowError) as exc:
        msg = str(exc)
        if "safely cast" in msg or "too large to convert" in msg or "out of bounds" in msg:
            raise bad_input("CSV column type differs between blocks of the input: a column of whole "
                            "numbers in the file's head holds other values later (or numbers beyond "
                            "64 bits); convert the input to Parquet, or give {backend_pandas}") from None
        raise
    except ValueError as exc:
        msg = str(exc)
        if any(w in msg for w in _PARSE_FAILURES):   # pandas quotes the value: never shown
            raise bad_input("CSV column type differs between blocks of the input: a later block "
                            "holds values the file's head did not; convert the input to Parquet, "
                            "or give {backend_pandas}") from None
        if "Mismatched dtypes" in msg or "dtype" in msg and "read_csv" in msg:
            cols = [ln.split("|")[1].strip() for ln in msg.splitlines()
                    if ln.count("|") >= 3 and "Column" not in ln and "---" not in ln]
            raise bad_input("CSV column type differs between blocks of the input "
                            f"(column(s) {', '.join(cols) or '?'}): a later block holds values the "
                            "first block did not; convert the input to Parquet, or give "
                            "{backend_pandas}") from None
        raise


# --- the two passes ------------------------------------------------------------------------------

class _Run:
    """Inputs of one distributed count: partitions, plan, roles."""

    def __init__(self, client, sample, keys, population, sample_flag, weights, missing, gpu, sep,
                 carry=()):
        from dask import delayed

        if population is not None and sample_flag is not None:
            raise BadInput("give either a population frame or a sample flag, not both")
        self.client, self.keys, self.gpu = client, list(keys), gpu
        self.sample_flag, self.weights = sample_flag, weights
        nw = self.nworkers = _nworkers(client)
        self.worker_memory = _worker_memory(client)
        extra = [c for c in (sample_flag, weights) if c] + [c for c in carry if c not in self.keys]
        self.sample, mem = to_dask(sample, self.keys + extra, gpu, nw, sep=sep, keys=self.keys,
                                   sample_flag=sample_flag, weights=weights)
        self.population = None
        pmem = False
        if population is not None:
            self.population, pmem = to_dask(population, self.keys, gpu, nw, sep=sep,
                                            where="the population", keys=self.keys)
        if mem:
            self.sample = client.persist(self.sample)
        if pmem:
            self.population = client.persist(self.population)
        self.s_parts = self.sample.to_delayed()
        self.p_parts = self.population.to_delayed() if self.population is not None else []
        # pass 1: distinct values -> plan
        us = _tree([delayed(partition_uniques)(d, self.keys) for d in self.s_parts], merge_uniques)
        todo = [delayed(uniques_to_pandas)(us)]
        if self.p_parts:
            up = _tree([delayed(partition_uniques)(d, self.keys) for d in self.p_parts], merge_uniques)
            todo.append(delayed(uniques_to_pandas)(up))
        if sample_flag:   # the released records' own categories (the cardinality guard reads them)
            uf = _tree([delayed(flagged_uniques)(d, self.keys, sample_flag) for d in self.s_parts],
                       merge_uniques)
            todo.append(delayed(uniques_to_pandas)(uf))
        # rows spread over every partition, taken in the same pass and kept on the workers: where
        # the ranges of cells fall, once the plan can encode them (:meth:`cut`)
        every = self.s_parts + self.p_parts
        per = max(SPREAD_MIN, -(-SPREAD_ROWS // max(1, len(every))))
        got, self.spread = _compute(client, todo + [delayed(spread_rows)(d, self.keys, per)
                                                    for d in every], keep=len(every))
        u_s = got[0]
        u_p = got[1] if self.p_parts else None
        u_flag = got[-1] if sample_flag else u_s
        #: per key, the number of categories among the sample's (flagged) records
        self.sample_cards = tuple(int(len(u_flag["uniq"][k])) for k in self.keys)
        if u_s["n"] == 0:
            raise BadInput("the sample has no records")
        from gpurisk.freq.guards import all_missing
        for k in self.keys:      # the same verdict as the pandas backend's check_key_columns
            if u_s["na"][k] == u_s["n"]:
                raise all_missing(k, u_s["n"])
        self.plan = make_plan(self.keys, u_s["uniq"], u_p["uniq"] if u_p else None, u_s["na"],
                              u_p["na"] if u_p else None, missing)
        # a literal in the graph: sent to each worker once, and recomputable if a worker dies
        self.plan_f = delayed(self.plan, name=f"gpurisk-plan-{uuid.uuid4().hex}")
        self.role = "register" if sample_flag else "sample"
        self.records = u_s["n"] + (u_p["n"] if u_p else 0)

    def max_cells(self) -> int:
        """An upper bound on the number of cells: the records, and the product of the keys'
        numbers of categories (4 keys of 2, 100, 6 and 17 categories hold at most 20 400 cells
        however many records there are)."""
        return min(self.records, math.prod(max(int(c), 1) for c in self.plan.cards))

    def cells_per_bucket(self) -> int:
        """The most cells a bucket may hold: GPU_CELLS_PER_BUCKET on GPU workers, else
        CELLS_PER_BUCKET and the workers' memory limit over BUCKET_BYTES_PER_CELL (not below
        CELLS_PER_BUCKET_MIN). Fewer, larger buckets: fewer partials of every table to merge."""
        if self.gpu:
            return GPU_CELLS_PER_BUCKET
        mem = getattr(self, "worker_memory", None)
        if not mem:
            return CELLS_PER_BUCKET
        return min(CELLS_PER_BUCKET, max(CELLS_PER_BUCKET_MIN, mem // BUCKET_BYTES_PER_CELL))

    def default_buckets(self) -> int:
        """Enough ranges that no bucket can hold more than :meth:`cells_per_bucket` cells (cells <=
        records), at least one per SPLIT_EVERY partitions, and (not on GPU workers, whose kernels
        want long arrays) BUCKETS_PER_WORKER per worker where buckets of CELLS_PER_BUCKET_MIN cells
        allow it; at most MAX_BUCKETS. A table so small that
        SPLIT_EVERY partials of all of it fit one bucket (:meth:`max_cells`: 4 keys of 2, 100, 6 and
        17 categories) is one bucket: cutting it into ranges only adds tasks."""
        per = self.cells_per_bucket()
        if self.max_cells() * SPLIT_EVERY <= per:
            return 1
        nparts = len(self.s_parts) + len(self.p_parts)
        spread = 1 if self.gpu else min(BUCKETS_PER_WORKER * getattr(self, "nworkers", 1),
                                        math.ceil(self.records / min(per, CELLS_PER_BUCKET_MIN)))
        return max(1, min(MAX_BUCKETS, max(nparts // SPLIT_EVERY, math.ceil(self.records / per),
                                           spread)))

    def cut(self, nbuckets: int):
        """Where the ``nbuckets`` ranges of cells split (:func:`gpurisk.freq.partial.bucket_ids`):
        splitters of the first word that give each range about the same number of records, from
        the rows pass 1 spread over the partitions (:func:`spread_rows`); so no range holds more
        than about records / nbuckets cells however skewed the keys."""
        if nbuckets <= 1:
            return 1
        if self.spread is not None:       # the first words of the spread rows, once
            from dask import delayed
            got = _compute(self.client, [delayed(spread_words)(self.plan_f, s) for s in self.spread])
            got = [(n, w) for n, w in got if w.shape[0]]
            self.spread = None            # released on the workers
            self._firsts = (np.concatenate([w for _, w in got]) if got else None,
                            np.concatenate([np.full(w.shape[0], n / w.shape[0]) for n, w in got])
                            if got else None)
        first, weight = self._firsts
        if first is None:
            return self.plan.bucket_width(nbuckets)
        return P.splitters(first, weight, nbuckets)

    def bucket_roots(self, nbuckets: int, cut=None):
        """Pass 2: one delayed partial per range bucket of cells (still on the cluster), the ranges
        cut at ``cut`` (default :meth:`cut`)."""
        from dask import delayed
        parts = [delayed(P.partial)(self.plan_f, d, self.role, self.sample_flag, self.weights)
                 for d in self.s_parts]
        parts += [delayed(P.partial)(self.plan_f, d, "population") for d in self.p_parts]
        if nbuckets == 1:
            return [_tree(parts, P.merge)]
        cut = self.cut(nbuckets) if cut is None else cut
        splits = [delayed(P.split, nout=nbuckets)(p, cut, nbuckets) for p in parts]
        return [_tree([sp[b] for sp in splits], P.merge) for b in range(nbuckets)]


def build_table_dask(connect, sample, keys, population=None, sample_flag=None, weights=None,
                     missing="category", gpu=False, sep=None, buckets=None):
    """A FreqTable (numpy arrays, ``backend="dask"``/``"dask-cudf"``, no record locator)."""
    from dask import delayed

    with connect() as client:
        run = _Run(client, sample, keys, population, sample_flag, weights, missing, gpu, sep)
        roots = run.bucket_roots(buckets or run.default_buckets())
        parts = _compute(client, [delayed(P.part_to_host)(r) for r in roots])
    part = P.concat(parts) if len(parts) > 1 else parts[0]
    table = P.finish(run.plan, part, backend="dask-cudf" if gpu else "dask")
    # the encoding plan, so that a later pass over the records (record_pass_dask) finds their cells
    table.cached(PLAN_MEMO, lambda: run.plan)
    table.cached(WORDS_MEMO, lambda: part["words"])
    return table


# --- the distributed summary -------------------------------------------------------------------

def bucket_summary(part: dict) -> dict:
    """The summaries of one bucket of cells (small, :func:`gpurisk.freq.partial.summary`), and up to
    three of its cells with f_j > F_j."""
    xp = namespace(part["words"][0])     # computed where the cells are (a GPU worker: CuPy)
    f = part.get("f", xp.zeros(P.size(part), xp.int64))
    out = P.summary(f, part.get("F"), part.get("w"))
    out.update(bad=0, bad_cells=None)
    if "F" in part:
        bad = xp.flatnonzero(f > part["F"])
        out["bad"] = int(bad.shape[0])
        if out["bad"]:
            sel = bad[:3]
            out["bad_cells"] = {"words": [to_host(w[sel]) for w in part["words"]], "f": to_host(f[sel]),
                                "F": to_host(part["F"][sel])}
    return out


#: rows :func:`spread_rows` takes over all partitions together (at least SPREAD_MIN a partition)
SPREAD_ROWS = 1 << 16
SPREAD_MIN = 256


def spread_rows(frame, keys, m: int):
    """(rows, frame of ``keys`` at ``m`` evenly spaced rows) of one partition: where its records
    lie in the space of cells (a sorted input is spread over its whole order). Kept on the worker."""
    n = int(len(frame))
    at = np.unique(np.linspace(0, n - 1, min(n, int(m))).round().astype(np.int64)) if n else \
        np.zeros(0, np.int64)
    return n, frame[list(keys)].iloc[at].reset_index(drop=True)


def spread_words(plan, spread) -> tuple:
    """(rows of the partition, first words of its :func:`spread_rows` on the host): cell codes,
    not the records' values, reach the client."""
    n, rows = spread
    return n, to_host(encode_words(plan, rows)[0]) if len(rows) else np.zeros(0, np.int64)


def flagged_uniques(frame, keys, sample_flag) -> dict:
    """:func:`partition_uniques` of the records a sample flag marks."""
    return partition_uniques(frame[P._flag(frame, sample_flag)], keys)


def summary_dask(connect, sample, keys, population=None, sample_flag=None, weights=None,
                 missing="category",
                 gpu=False, sep=None, buckets=None, with_cards: bool = False, then=None,
                 maps=None):
    """(plan, list of per-bucket summaries), the cells never leaving the workers; with
    ``with_cards`` also the sample's number of categories per key.

    Bucket measures (``reads = "buckets"``) map each bucket of cells on the workers
    (:func:`gpurisk.freq.buckets.map_measures`); the result then gains a last element, the list of
    per-bucket dicts (None when nothing was mapped):

    - ``maps=(classes, ctx)``: their context is known before the count; each bucket's summary and
      maps are computed in the same pass (the bucket is freed once both are done);
    - ``maps="later"``: ``then(plan, summaries, cards)`` runs on the client once the summaries are
      back (e.g. to set pi = n/N) and returns ``(classes, ctx)`` or None; the buckets stay on the
      workers between the two steps.

    ``then`` (any ``maps``) is called once the summaries are back; its value is used only with
    ``maps="later"``."""
    from dask import delayed

    from gpurisk.freq.buckets import map_measures
    mapped = None
    with connect() as client:
        run = _Run(client, sample, keys, population, sample_flag, weights, missing, gpu, sep)
        nb = buckets or run.default_buckets()
        roots = run.bucket_roots(nb)
        if maps == "later":
            roots = client.persist(roots)      # read twice: summaries, then the measures' maps
        todo = [delayed(bucket_summary)(r) for r in roots]
        early = maps not in (None, "later") and bool(maps[0])
        if early:
            classes, ctx = maps
            todo += [delayed(map_measures)(r, list(classes), ctx, b, nb) for b, r in enumerate(roots)]
        got = _compute(client, todo)
        if early:
            got, mapped = got[:nb], got[nb:]
        job = then(run.plan, got, run.sample_cards) if then is not None else None
        if maps == "later" and job:
            classes, ctx = job
            mapped = _compute(client, [delayed(map_measures)(r, list(classes), ctx, b, nb)
                                       for b, r in enumerate(roots)])
        del roots
    out = (run.plan, got, run.sample_cards) if with_cards else (run.plan, got)
    return out + (mapped,) if maps is not None else out


# --- record-level output ------------------------------------------------------------------------

def record_words(plan, frame, sample_flag=None):
    """The words of each (sampled) record of a partition."""
    from gpurisk.freq.plan import encode_words
    words = encode_words(plan, frame)
    if sample_flag:
        mask = P._flag(frame, sample_flag)
        words = [w[mask] for w in words]
    return words


def lookup_bucket(acc, words, cells: dict, cut, bucket: int, nbuckets: int,
                  fields=P.FIELDS) -> dict:
    """Fill ``acc`` (per record: ``fields`` of its cell, by default f, F, w) for the records whose
    cells fall in ``bucket`` (ranges cut at ``cut``: :func:`gpurisk.freq.partial.bucket_ids`).

    ``acc`` is the previous step's output, its only consumer; it is filled in place (a retried
    step writes the same values again)."""
    xp = namespace(words[0])
    n = int(words[0].shape[0])
    if namespace(cells["words"][0]) is not xp:    # host cells sent to a GPU worker's records
        cells = {k: ([xp.asarray(w) for w in v] if k == "words" else xp.asarray(v))
                 for k, v in cells.items()}
    if acc is None:
        acc = {k: xp.zeros(n, cells[k].dtype) for k in fields if k in cells}
    if nbuckets == 1:
        sel = None
        rec = words
    else:
        sel = xp.flatnonzero(P.bucket_ids(xp, words, cut) == bucket)
        rec = [w[sel] for w in words]
    idx = P.locate(rec, cells["words"])
    if scalar((idx < 0).any()):  # pragma: no cover - a broken invariant, not bad input
        raise RuntimeError("a record's cell is missing from the cell table")
    for k in acc:
        if sel is None:
            acc[k] = cells[k][idx]
        else:
            acc[k][sel] = cells[k][idx]
    return acc


def write_part(frame, acc: dict, path: str, carry, sample_flag=None) -> int:
    """Write one partition's record-level counts to ``path``; returns its number of rows."""
    if is_cudf(frame) or (acc and namespace(next(iter(acc.values()))) is not np):  # pragma: no cover
        import cudf
        out = cudf.DataFrame()
    else:
        import pandas as pd
        out = pd.DataFrame()
    if carry:
        sub = frame.reset_index(drop=True)
        if sample_flag:
            mask = P._flag(sub, sample_flag)
            if is_cudf(sub):  # pragma: no cover - needs a GPU
                import cudf
                mask = cudf.Series(mask)
            sub = sub[mask]
        for c in carry:
            out[c] = sub[c].reset_index(drop=True)
    for k, v in acc.items():
        out[k] = v
    from gpurisk.io import atomic_path
    with atomic_path(path) as tmp:
        out.to_parquet(str(tmp), index=False)
    return int(len(out))


def write_records_dask(connect, sample, keys, out_dir, population=None, sample_flag=None, weights=None,
                       missing="category", gpu=False, sep=None, carry=(), buckets=None) -> dict:
    """Partition ``i`` of the (sampled) records -> ``out_dir/part.{i:05d}.parquet``."""
    from dask import delayed

    out = Path(out_dir)
    carry = list(carry or ())
    with connect() as client:
        _check_carry(sample, carry, sep)
        run = _Run(client, sample, keys, population, sample_flag, weights, missing, gpu, sep, carry)
        nb = buckets or run.default_buckets()
        cut = run.cut(nb)
        roots = client.persist(run.bucket_roots(nb, cut))
        out.mkdir(parents=True, exist_ok=True)
        tok = uuid.uuid4().hex
        writes = []
        for i, d in enumerate(run.s_parts):
            words = delayed(record_words, name=f"gpurisk-words-{tok}-{i}")(run.plan_f, d, sample_flag)
            acc = None
            for b, root in enumerate(roots):
                acc = delayed(lookup_bucket, pure=False)(acc, words, root, cut, b, nb)
            writes.append(delayed(write_part, pure=False)(d if carry else None, acc,
                                                          str(out / f"part.{i:05d}.parquet"), carry,
                                                          sample_flag))
        rows = _compute(client, writes)
    return {"files": len(rows), "rows": int(sum(rows)), "buckets": nb}


# --- a pass over the records with per-cell columns computed on the client ------------------------

def record_positions(plan, frame, sample_flag=None, carry=()):
    """(words of each sampled record, their 0-based positions in the partition, partition length,
    the sampled records' ``carry`` columns as a host frame or None)."""
    words = record_words(plan, frame, sample_flag)
    n = len(frame)
    xp = namespace(words[0])
    mask = P._flag(frame, sample_flag) if sample_flag else None
    pos = xp.flatnonzero(mask) if sample_flag else xp.arange(n, dtype=xp.int64)
    extra = None
    if carry:
        sub = frame[list(carry)].reset_index(drop=True)
        if mask is not None:
            sub = sub[to_host(mask)] if not is_cudf(sub) else sub[mask]
        extra = sub.to_pandas() if is_cudf(sub) else sub
        extra = extra.reset_index(drop=True)
    return words, pos, n, extra


def _finish_records(acc, located, offset, special, write, path):
    """One partition's end: its length, the local positions of its records in the ``special``
    cells, and (``write``) ``write(acc, rows, path, carried)``'s count of written rows."""
    words, pos, n, extra = located
    xp = namespace(pos)
    hits = {}
    if special is not None and len(special):
        sel = xp.flatnonzero(xp.isin(acc["cell"], xp.asarray(special)))
        for c, p in zip(to_host(acc["cell"][sel]).tolist(), to_host(pos[sel]).tolist()):
            hits.setdefault(int(c), []).append(int(p))
    written = 0
    if write is not None:
        written = int(write(acc, pos + int(offset), path, extra))
    return {"n": int(n), "hits": hits, "written": written}


def record_pass_dask(connect, sample, table, columns: dict, sample_flag=None, gpu=False, sep=None,
                     special=None, write=None, out_dir=None, carry=()) -> dict:
    """One pass over the (sampled) records of a Dask input whose table was gathered
    (:func:`build_table_dask`): each record's cell, found bucket by bucket among the table's cells
    (the cells and ``columns``, numpy arrays in the table's cell order, are cut into buckets and
    each bucket is sent where it is needed, never broadcast whole); then per partition

    - the records of the ``special`` cells (cell indices): their 0-based row numbers in the input;
    - with ``write`` (a picklable ``write(acc, rows, path, carried) -> rows written``, ``acc``
      holding each record's ``columns`` and its ``cell``, ``carried`` its ``carry`` columns or
      None): ``out_dir/part.{i:05d}.parquet``, rows numbered by their position in the input (a
      first pass counts each partition's records).

    Returns {"rows_in": records read, "written": rows written, "files": partitions, "special":
    {cell: [row, ...]}}."""
    from dask import delayed

    plan = table.cached(PLAN_MEMO, lambda: None)
    cell_words = table.cached(WORDS_MEMO, lambda: None)
    if plan is None or cell_words is None:    # pragma: no cover - a broken invariant
        raise RuntimeError("record_pass_dask needs a table built by build_table_dask")
    m = int(cell_words[0].shape[0])
    cells = {"words": list(cell_words), "cell": np.arange(m, dtype=np.int64),
             **{k: np.asarray(v) for k, v in columns.items()}}
    fields = [k for k in cells if k != "words"]
    per_cell = sum(int(w.dtype.itemsize) for w in cells["words"]) + \
        sum(int(cells[k].dtype.itemsize) for k in fields)
    per_bucket = LOOKUP_BYTES_PER_BUCKET if not gpu else 8 * LOOKUP_BYTES_PER_BUCKET
    nb = max(1, min(MAX_BUCKETS, math.ceil(m * per_cell / per_bucket)))
    # the cells are here: ranges of equal numbers of them
    cut = P.splitters(cell_words[0], np.ones(m), nb) if nb > 1 else 1
    pieces = P.split(cells, cut, nb)
    keys = list(table.keys)
    with connect() as client:
        nw = _nworkers(client)
        carry = [c for c in carry if c not in keys and c != sample_flag]
        _check_carry(sample, carry, sep)
        ddf, mem = to_dask(sample, keys + ([sample_flag] if sample_flag else []) + carry, gpu, nw,
                           sep=sep, keys=keys, sample_flag=sample_flag)
        if mem:
            ddf = client.persist(ddf)
        parts = ddf.to_delayed()
        offsets = [0] * len(parts)
        if write is not None:
            lens = _compute(client, [delayed(len)(d) for d in parts])
            offsets = np.concatenate([[0], np.cumsum(lens)[:-1]]).astype(np.int64).tolist()
        # a list of one dict: scatter sends the dict as one object (a bare dict is scattered value
        # by value, under its keys' names, and the buckets' "f" would overwrite each other)
        futs = [client.scatter([pc], hash=False)[0] for pc in pieces]
        plan_f = delayed(plan, name=f"gpurisk-plan-{uuid.uuid4().hex}")
        spec = None if special is None else np.asarray(special, dtype=np.int64)
        tok = uuid.uuid4().hex
        outs = []
        for i, d in enumerate(parts):
            located = delayed(record_positions, name=f"gpurisk-rec-{tok}-{i}")(plan_f, d, sample_flag,
                                                                               carry)
            words = located[0]
            acc = None
            for b, fut in enumerate(futs):
                acc = delayed(lookup_bucket, pure=False)(acc, words, fut, cut, b, nb, fields)
            path = None if out_dir is None else str(Path(out_dir) / f"part.{i:05d}.parquet")
            outs.append(delayed(_finish_records, pure=False)(acc, located, offsets[i], spec, write,
                                                            path))
        got = _compute(client, outs)
    lens = [g["n"] for g in got]
    starts = np.concatenate([[0], np.cumsum(lens)[:-1]]).astype(np.int64)
    hits: dict[int, list[int]] = {}
    for g, st in zip(got, starts):
        for c, ps in g["hits"].items():
            hits.setdefault(c, []).extend(int(st) + p for p in ps)
    return {"rows_in": int(sum(lens)), "written": int(sum(g["written"] for g in got)),
            "files": len(parts) if write is not None else 0, "special": hits}


# --- each record's codes, encoded on the workers ------------------------------------------------

def partition_codes(plan, frame) -> list:
    """Each key's codes of a partition's records (narrow integers), on the host."""
    from gpurisk.freq.plan import encode_partition
    return [to_host(c) for c in encode_partition(plan, frame)]


def record_codes_dask(connect, sample, table, gpu=False, sep=None) -> list:
    """Each record's code per key of ``table`` (built by :func:`build_table_dask`), in input order:
    encoded on the workers with the table's plan, brought here as narrow integers (records × keys
    bytes, not the records' values). For :func:`gpurisk.dis.dis`, whose perturbations redraw the
    records of the whole file."""
    from dask import delayed

    plan = table.cached(PLAN_MEMO, lambda: None)
    if plan is None:    # pragma: no cover - a broken invariant
        raise RuntimeError("record_codes_dask needs a table built by build_table_dask")
    keys = list(table.keys)
    with connect() as client:
        ddf, mem = to_dask(sample, keys, gpu, _nworkers(client), sep=sep, keys=keys)
        if mem:
            ddf = client.persist(ddf)
        plan_f = delayed(plan, name=f"gpurisk-plan-{uuid.uuid4().hex}")
        parts = _compute(client, [delayed(partition_codes)(plan_f, d) for d in ddf.to_delayed()])
    return [np.concatenate([p[v] for p in parts]) for v in range(len(keys))]


def _check_carry(sample, carry, sep):
    if not carry:
        return
    if isinstance(sample, (str, Path)):
        from gpurisk.io import read_lazy
        cols = list(read_lazy(sample, sep=sep).columns)
    else:
        cols = list(sample.columns)
    miss = [c for c in carry if c not in cols]
    if miss:
        raise BadInput(f"column(s) {', '.join(map(repr, miss))} to carry are not in the sample "
                       f"(its columns: {', '.join(map(str, cols[:20]))})")
