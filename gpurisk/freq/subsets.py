"""Summaries of many key subsets of a distributed finest table, reduced on the cluster.

The scan of a Dask register whose measures all read summaries (``Measure.reads = "summary"``) never
gathers cells. The finest table (every key of the scan) is counted as in
:func:`gpurisk.freq._dask.summary_dask`: range buckets of cells, merged on the workers
(``_Run.bucket_roots``). Each bucket is then decoded once into per-key codes in the narrowest
integer type that holds them (:func:`bucket_codes`, from ``plan.unpack_words``) and persisted with
its counts f, F (narrowed too: a register's cells are mostly F = 1, f = 0) and w; its summary is
taken from them (:func:`codes_summary`). A subset of the keys is then, per bucket,

1. the mixed radix ids of its keys' codes (:func:`gpurisk.freq.cellid.mixed_radix_ids`, or one word
   per run of keys that fits int64: :func:`gpurisk.freq.plan.word_layout`),
2. the partial that sums f, F (exact integer sums) and w by subset cell
   (:func:`gpurisk.freq.partial.reduce_cells`), cut into range buckets of the subset's own cells
   when the subset can hold more than one bucket's worth of cells (:func:`gpurisk.freq.partial.split`),

and bucket ``s`` of every finest bucket merges (a tree of :func:`gpurisk.freq.partial.merge`: a
subset cell comes from several finest buckets) into the subset's cells of range ``s``, whose small
summaries (:func:`gpurisk.freq._dask.bucket_summary`) are all that reach the client. The client
adds them up (:func:`gpurisk.freq.summary.combine`).

Steps 1 and 2 run for a batch of :data:`BATCH` subsets at once per finest bucket
(:func:`subset_batch`): one lattice over the bucket's cells (:class:`gpurisk.freq.lattice.Lattice`)
builds the batch's tables, sharing cubes and roll-ups, so a bucket's cells are read a few times per
batch rather than once per subset; the batch's results stay on the workers until its subsets are
merged. Each bucket keeps its keys' margins of f (summed once, in :func:`bucket_codes`) for every
batch's lattice, and a worker plans a batch once, for the first of its buckets it sums
(:func:`_batch_plan`: without weights every table is an exact integer sum, the same whatever the
plan). Where every subset of a batch is one range of cells and no bucket measure maps it, the
batch is merged whole instead (:func:`_batch_graph`: a tree of :func:`merge_batch` over the finest
buckets, then one task of :func:`batch_summaries`; at most :data:`BATCH_MERGE_CELLS` cells a batch),
about BATCH times fewer tasks than a tree per subset. :func:`subset_summaries` yields the finest table's summaries, then each subset's in the order
asked, keeping a window of subsets' graphs submitted ahead so the workers stay busy while the caller
computes the measures of those already done. Every function run on a worker is written against the
array namespace of its input (numpy, or CuPy on dask-cuda workers).
"""
from __future__ import annotations

import functools
import math
import threading
import uuid
from collections import OrderedDict, deque
from typing import Iterable, Iterator, Sequence

from gpurisk.core.kept import kept
from gpurisk.xp import namespace, scalar, to_host
from gpurisk.freq import partial as P
from gpurisk.freq.cellid import mixed_radix_ids, radix_space
from gpurisk.freq.plan import Plan, narrow_code_dtype, pack_words, unpack_words, word_layout

#: subsets whose graphs are submitted ahead of the one being read, per worker
AHEAD_PER_WORKER = 4


def bucket_codes(plan: Plan, part: dict) -> dict:
    """One bucket of the finest table as per-key codes and counts f, F in the narrowest integer
    types that hold them (a register's cells: mostly F = 1, f = 0), and w: what every subset of
    the keys is summed from (run on a worker, kept there; :func:`wide_counts` widens the counts
    again in each task that reads them)."""
    xp = namespace(part["words"][0])
    out = {"codes": unpack_words(plan, part["words"], xp, narrow=True)}
    for k in P.FIELDS:
        if k in part:
            v = part[k]
            if k in P.INT_FIELDS and int(v.shape[0]):
                v = v.astype(narrow_code_dtype(int(scalar(xp.max(v))) + 1, xp), copy=False)
            out[k] = v
    # each key's margin of f (a few hundred numbers), summed here once: every batch's lattice over
    # this bucket starts from them instead of summing them again (:func:`bucket_table`)
    from gpurisk.freq.rollup import f_margins
    out[MARGINS] = tuple(f_margins(bucket_table(plan, out)))
    return out


#: the key of a bucket's margins of f in what :func:`bucket_codes` keeps
MARGINS = "margins"


def wide_counts(cells: dict) -> dict:
    """``cells`` (:func:`bucket_codes`) with f and F as int64 again (its margins left out)."""
    xp = namespace(cells["codes"][0])
    return {k: (v.astype(xp.int64, copy=False) if k in P.INT_FIELDS else v) for k, v in cells.items()
            if k != MARGINS}


def codes_summary(plan: Plan, cells: dict) -> dict:
    """:func:`gpurisk.freq._dask.bucket_summary` of a bucket kept as codes (:func:`bucket_codes`)."""
    from gpurisk.freq._dask import bucket_summary
    xp = namespace(cells["codes"][0])
    part = wide_counts(cells)
    codes = part.pop("codes")
    part["words"] = [xp.zeros(int(codes[0].shape[0]) if codes else 0, xp.int64)]
    out = bucket_summary(part)
    if out["bad_cells"] is not None:     # the words of the (at most three) cells with f > F
        sel = xp.flatnonzero(part["f"] > part["F"])[:3]
        out["bad_cells"]["words"] = [to_host(w) for w in pack_words(plan, [c[sel] for c in codes], xp)]
    return out


def subset_layout(plan: Plan, idx: Sequence[int]) -> tuple[list[list[int]], int]:
    """The words of a subset (runs of its key positions ``idx`` whose radix fits int64) and the
    number of ids of its first word (for range buckets)."""
    cards = [int(plan.cards[i]) for i in idx]
    runs = word_layout(cards)
    return [[idx[j] for j in run] for run in runs], radix_space([max(cards[j], 1) for j in runs[0]])


def subset_split(plan: Plan, cells: dict, idx: Sequence[int], nsub: int, width: int) -> list[dict]:
    """The partial of one finest bucket's cells regrouped by the keys at positions ``idx``, cut into
    ``nsub`` range buckets of the subset's cells (a list of ``nsub`` partials)."""
    cells = wide_counts(cells)
    codes = cells["codes"]
    xp = namespace(codes[0])
    layout, _ = subset_layout(plan, idx)
    words = [mixed_radix_ids([codes[i] for i in run], [plan.cards[i] for i in run], xp, dtype=xp.int64)
             for run in layout]
    ints = {k: cells[k] for k in P.INT_FIELDS if k in cells}
    floats = {k: cells[k] for k in P.FIELDS if k in cells and k not in P.INT_FIELDS}
    # one word of a small space: summed by histograms (partial.dense_count), else sorted
    part = P.reduce_cells(xp, words, ints, floats, space=radix_space([plan.cards[i] for i in idx]))
    return P.split(part, width, nsub) if nsub > 1 else [part]


#: at most this many subsets are summed from one finest bucket by one task: a lattice over the
#: bucket's cells (:class:`gpurisk.freq.lattice.Lattice`) builds the batch's tables, sharing its
#: cubes and roll-ups, where a task per subset would read every cell of the bucket once per subset
#: (a register's 696 combinations of <= 3 of 16 keys in batches of 64 would read each bucket's cells
#: 187 times, in batches of 256 122 times, in one plan 107 times; BATCH_CELLS bounds the memory)
BATCH = 256
#: ... and at most this many cells out of one bucket per batch (each subset counted at its most:
#: its key space, or the bucket's cells), so what a batch keeps on the workers until its subsets are
#: merged stays bounded (about 200 MB per bucket)
BATCH_CELLS = 1 << 23


#: a batch merged whole (:func:`_batch_graph`) holds at most this many cells (each subset counted at
#: its key space, or the finest table's cells): a merge of SPLIT_EVERY of its partials reads at most
#: SPLIT_EVERY times that (about 0.8 GB at 24 bytes a cell)
BATCH_MERGE_CELLS = 1 << 22


def batches_of(spaces: Sequence[int], bucket_cells: int,
               limit: int | None = None) -> list[list[int]]:
    """Consecutive batches of positions into ``spaces`` (each subset's key space): at most BATCH
    subsets and ``limit`` (default BATCH_CELLS) cells at most out of a bucket of ``bucket_cells``
    (a subset larger than that alone is a batch of its own)."""
    limit = BATCH_CELLS if limit is None else limit
    out: list[list[int]] = []
    cur: list[int] = []
    load = 0
    for n, sp in enumerate(spaces):
        est = min(int(sp), int(bucket_cells))
        if cur and (len(cur) >= BATCH or load + est > limit):
            out.append(cur)
            cur, load = [], 0
        cur.append(n)
        load += est
    if cur:
        out.append(cur)
    return out


def bucket_table(plan: Plan, cells: dict):
    """The FreqTable of one finest bucket (:func:`bucket_codes`): its cells with their codes."""
    from gpurisk.freq.table import FreqTable
    raw, cells = cells, wide_counts(cells)
    codes = cells["codes"]
    xp = namespace(codes[0])
    m = int(codes[0].shape[0])
    f = cells["f"] if "f" in cells else xp.zeros(m, xp.int64)
    table = FreqTable(tuple(plan.keys), plan.categories, xp.arange(m, dtype=xp.int64), f,
                      cells.get("F"), cells.get("w"), False, xp, list(codes), None, "dask")
    from gpurisk.freq.rollup import MARGIN
    for key, margin in zip(plan.keys, raw.get(MARGINS, ())):
        table._memo[MARGIN + key] = margin
    return table


def _partial_of(plan: Plan, table, idx: Sequence[int]) -> dict:
    """A roll-up of a bucket table over the keys at ``idx`` as a partial (the subset's words)."""
    xp = table.xp
    layout, _ = subset_layout(plan, idx)
    if table.radix and len(layout) == 1:
        words = [table.cell_id.astype(xp.int64, copy=False)]
    else:
        codes = table.cell_codes()
        at = {i: j for j, i in enumerate(idx)}
        words = [mixed_radix_ids([codes[at[i]] for i in run], [plan.cards[i] for i in run], xp,
                                 dtype=xp.int64) for run in layout]
    part = {"words": words, "f": table.f}
    for k in ("F", "w"):
        if getattr(table, k) is not None:
            part[k] = getattr(table, k)
    return part


def subset_batch(plan: Plan, cells: dict, batch: Sequence[tuple]) -> list:
    """Per subset of ``batch`` (``(key positions, nsub, width)``), what :func:`subset_split` gives
    for it from this finest bucket, every table summed by one lattice over the bucket's cells."""
    from gpurisk.freq.lattice import Lattice
    table = bucket_table(plan, cells)
    targets = [tuple(plan.keys[i] for i in idx) for idx, _, _ in batch]
    out: list = [None] * len(batch)
    lattice = Lattice(table)
    for j, sub in lattice.tables(targets, plan=_batch_plan(lattice, table, targets)):
        idx, nsub, width = batch[j]
        part = _partial_of(plan, sub, list(idx))
        out[j] = P.split(part, width, nsub) if nsub > 1 else [part]
    return out


#: a worker's lattice plans, by (keys, the batch's targets): the buckets of a batch are alike
#: (equal numbers of records), so the plan made for its first bucket on a worker serves the others
PLANS_KEPT = 64
_PLANS: OrderedDict = OrderedDict()
_PLANS_LOCK = threading.Lock()


def _batch_plan(lattice, table, targets):
    """The lattice plan of ``targets`` for this bucket: one a bucket of the same batch made on this
    worker before, else a new one (kept). Without weights every table is an exact integer sum, the
    same whatever the plan; with weights (float sums, whose last bits follow the order of the
    roll-ups) each bucket makes its own, as before."""
    if table.w is not None:
        return None
    return kept(_PLANS, _PLANS_LOCK, (tuple(table.keys), tuple(targets)),
                lambda: lattice.plan(targets), PLANS_KEPT)


def merge_subset(space: int | None, *parts) -> dict:
    """:func:`gpurisk.freq.partial.merge` of a subset's partials from several finest buckets; one
    word of a small space (``space``: its number of ids) is summed by histograms instead of a sort
    of the concatenated cells."""
    parts = [p for p in parts if p is not None]
    if len(parts) == 1:
        return parts[0]
    n = sum(P.size(p) for p in parts)
    if space is None or len(parts[0]["words"]) != 1 or not P.dense_count(space, n):
        return P.merge(*parts)
    xp = namespace(parts[0]["words"][0])
    words = [xp.concatenate([p["words"][0] for p in parts])]
    cols = {}
    for k in P.FIELDS:
        if any(k in p for p in parts):
            dt = xp.float64 if k == "w" else xp.int64
            cols[k] = xp.concatenate([p[k] if k in p else xp.zeros(P.size(p), dt) for p in parts])
    ints = {k: v for k, v in cols.items() if k in P.INT_FIELDS}
    floats = {k: v for k, v in cols.items() if k not in P.INT_FIELDS}
    return P.reduce_cells(xp, words, ints, floats, space=space)


def merge_batch(spaces: Sequence, *results) -> list:
    """The partials of a batch of subsets (one range bucket each: ``[part]`` per subset, as
    :func:`subset_batch` gives) from several finest buckets, merged subset by subset
    (:func:`merge_subset`, ``spaces[i]`` for subset ``i``): one task for the whole batch."""
    results = [r for r in results if r is not None]
    return [[merge_subset(spaces[i], *[r[i][0] for r in results])] for i in range(len(results[0]))]


def batch_summaries(merged: list) -> list:
    """Per subset of a merged batch (:func:`merge_batch`), its list of one bucket summary."""
    from gpurisk.freq._dask import bucket_summary
    return [[bucket_summary(parts[0])] for parts in merged]


def collect(*summaries) -> list:
    return list(summaries)


#: a combination's whole table is built on one worker for the measures that read cells (the
#: headline Ê and τ̂1 of a scan whose cells stay on the workers: :func:`table_measures`) when it can
#: hold at most this many cells (its key space, or the finest table's cells): about 100 MB of
#: codes and counts, and the fit's arrays over its sample uniques
TABLE_CELLS = 1 << 22


def subset_table(plan: Plan, idx: Sequence[int], *merged):
    """On a worker: the FreqTable of the subset at key positions ``idx`` from its merged range
    buckets (:func:`merge_subset`; disjoint ranges of its cells, in order), its cells decoded into
    per-key codes: what the measures that read cells read."""
    from gpurisk.freq.table import FreqTable
    parts = [p for p in merged if p is not None]
    xp = namespace(parts[0]["words"][0])
    nwords = len(parts[0]["words"])
    words = [xp.concatenate([p["words"][w] for p in parts]) for w in range(nwords)]
    cols = {k: xp.concatenate([p[k] for p in parts]) for k in P.FIELDS if k in parts[0]}
    idx = list(idx)
    sub = Plan(tuple(plan.keys[i] for i in idx), [plan.key_plans[i] for i in idx],
               word_layout([plan.cards[i] for i in idx]))
    codes = unpack_words(sub, words, xp)
    m = int(words[0].shape[0])
    return FreqTable(sub.keys, sub.categories, xp.arange(m, dtype=xp.int64), cols["f"],
                     cols.get("F"), cols.get("w"), False, xp, codes, None, "dask")


def table_measures(plan: Plan, idx: Sequence[int], classes, ctx, timeout, *merged) -> dict:
    """On a worker: the measures ``classes`` (that read cells) on the subset's table
    (:func:`subset_table`), run as on the client (:func:`gpurisk.core.evaluate.run_classes`: each
    contained, checked and timed); ``{"results": {name: Result}, "warnings": [text, ...]}``, the
    warnings they raised. Without a population at π = 1 (a census) F = f, as in-process."""
    from gpurisk.core.evaluate import run_classes_caught
    from gpurisk.inputs import census_table
    table = census_table(subset_table(plan, idx, *merged), getattr(ctx, "fraction", None))
    return run_classes_caught(table, ctx, {c.name: c for c in classes}, timeout)


def batch_table_measures(plan: Plan, idx: Sequence[int], classes, ctx, timeout, merged: list,
                         at: int) -> dict:
    """:func:`table_measures` of the subset at ``at`` of a merged batch (:func:`merge_batch`)."""
    return table_measures(plan, idx, classes, ctx, timeout, *merged[at])


def subset_out(summaries: list, maps: list | None = None, results: dict | None = None) -> dict:
    """What :func:`subset_summaries` yields for a subset that has more than its summaries: the
    per-bucket summaries, the bucket measures' per-bucket maps (or None) and what
    :func:`table_measures` gave (or None)."""
    return {"summaries": summaries, "maps": maps, "results": results}


def collect_out(nsub: int, nmaps: int, *items) -> dict:
    """:func:`subset_out` of ``nsub`` summaries, ``nmaps`` maps and, when one more item is given,
    the table measures' output."""
    rest = items[nsub + nmaps:]
    return subset_out(list(items[:nsub]), list(items[nsub:nsub + nmaps]) if nmaps else None,
                      rest[0] if rest else None)


def batch_out(summaries: list, ats: Sequence[int], *results) -> list:
    """Per subset of a batch, its summaries (:func:`batch_summaries`), as :func:`subset_out` where
    the table measures ran on it (the subsets at ``ats``, in order of ``results``)."""
    out: list = list(summaries)
    for at, res in zip(ats, results):
        out[at] = subset_out(out[at], None, res)
    return out


def subset_cap(plan: Plan, idx: Sequence[int], max_cells: int) -> int:
    """The most cells the subset at ``idx`` can have: its key space, or ``max_cells`` (the finest
    table's)."""
    return min(max_cells, radix_space([max(int(plan.cards[i]), 1) for i in idx]))


def subset_shape(plan: Plan, idx: Sequence[int], max_cells: int, per_bucket: int,
                 nbuckets: int) -> tuple[int, int]:
    """(nsub, width): how many range buckets the subset at ``idx`` is cut into, and their width."""
    _, space = subset_layout(plan, idx)
    cap = subset_cap(plan, idx, max_cells)
    nsub = 1 if cap <= per_bucket else max(1, min(nbuckets, math.ceil(cap / per_bucket)))
    return nsub, max(1, -(-space // nsub))


def subset_graph(plan: Plan, plan_f, cells: list, idx: Sequence[int], max_cells: int,
                 per_bucket: int, split_every: int, token: str, maps=None, pieces=None,
                 tables=None, fetch: bool = False):
    """The delayed list of per-bucket summaries of the subset at key positions ``idx``; with
    ``maps=(classes, ctx)`` (the bucket measures' maps of each of the subset's buckets:
    :func:`gpurisk.freq.buckets.map_measures`) or ``tables=(classes, ctx, timeout)`` (the measures
    that read cells, run on the subset's whole table: :func:`table_measures`) a
    :func:`subset_out` instead; with ``fetch`` its ``results`` are the subset's merged range
    buckets themselves, for the caller to run ``tables`` on (a table too large for a worker).
    ``pieces``: per finest bucket, the (delayed) list of the subset's partials already summed
    there (:func:`subset_batch`)."""
    from dask import delayed

    from gpurisk.freq._dask import _tree, bucket_summary
    layout, space = subset_layout(plan, idx)
    nsub, width = subset_shape(plan, idx, max_cells, per_bucket, len(cells))
    if pieces is None:
        pieces = [delayed(subset_split, nout=nsub, pure=True)(plan_f, c, list(idx), nsub, width)
                  for c in cells]
    sums, mapped, merged_all = [], [], []
    for s in range(nsub):
        merged = _tree([p[s] for p in pieces] if nsub > 1 else [p[0] for p in pieces],
                       functools.partial(merge_subset, space if len(layout) == 1 else None),
                       split_every)
        merged_all.append(merged)
        sums.append(delayed(bucket_summary, pure=True)(merged))
        if maps is not None:
            from gpurisk.freq.buckets import map_measures
            classes, ctx = maps
            mapped.append(delayed(map_measures, pure=False)(merged, list(classes), ctx, s, nsub))
    name = f"gpurisk-subset-{token}-{'-'.join(map(str, idx))}"
    if maps is None and tables is None:
        return delayed(collect, name=name)(*sums)
    extra = []
    if fetch:
        extra.append(delayed(collect)(*merged_all))
    elif tables is not None:
        classes, ctx, timeout = tables
        extra.append(delayed(table_measures, pure=False)(plan_f, list(idx), list(classes), ctx,
                                                         timeout, *merged_all))
    return delayed(collect_out, name=name)(nsub, len(mapped), *sums, *mapped, *extra)


def subset_summaries(connect, sample, keys: Sequence[str], subsets: Sequence[Sequence[str]],
                     skip: Iterable[int] = (), population=None, sample_flag=None, weights=None,
                     missing: str = "category", gpu: bool = False, sep=None, buckets=None,
                     ahead: int | None = None, maps_for=None, tables_for=None,
                     fetch_large: bool = False) -> Iterator[tuple]:
    """Yield ``("finest", plan, summaries, sample_cards)`` (the per-bucket summaries of the table
    over every key), then ``(i, summaries)`` for each subset ``i`` not in ``skip``, in order.
    ``maps_for(i)``, when given, returns ``(classes, ctx)`` of the bucket measures to map on subset
    ``i``'s buckets (or None); ``tables_for(i)``, ``(classes, ctx, timeout)`` of the measures that
    read cells, to run on subset ``i``'s whole table on a worker (:func:`table_measures`; only
    where the table can hold at most :data:`TABLE_CELLS` cells; a larger one is brought to this
    process and the measures run here, with ``fetch_large``), or None. A subset with either
    yields ``(i, subset_out(...))`` (:func:`subset_out`; its ``results`` is
    ``{"cells_at_most": cells}`` where its table may be too large to build and is not brought
    here). They are called after the finest table is yielded (its π may be known only then).

    ``connect`` opens the Dask client (the backend's ``Backend.client``). The cells stay on the
    workers; what comes back is a list of small dictionaries per table.
    ``skip`` (a set) is read after the finest table is yielded, so a caller may fill it then (a
    resumed scan learns what is done once it knows the data). Closing the generator (the caller
    stopped, or was interrupted) cancels the subsets in flight.
    """
    from dask import delayed

    from gpurisk.freq._dask import SPLIT_EVERY, _compute, _nworkers, _Run
    with connect() as client:
        run = _Run(client, sample, keys, population, sample_flag, weights, missing, gpu, sep)
        nb = buckets or run.default_buckets()
        # each bucket of the finest table is kept as codes (its merged words freed once decoded)
        cells = client.persist([delayed(bucket_codes)(run.plan_f, r) for r in run.bucket_roots(nb)])
        finest = _compute(client, [delayed(codes_summary)(run.plan_f, c) for c in cells])
        yield "finest", run.plan, finest, run.sample_cards
        # cells of the finest table (an upper bound on any subset's): sampled, or in the population
        max_cells = sum(max(p["cells"], p["pop_cells"] or 0) for p in finest)
        per = run.cells_per_bucket()
        pos = {k: j for j, k in enumerate(run.plan.keys)}
        token = uuid.uuid4().hex
        todo = [i for i in range(len(subsets)) if i not in skip]
        ahead = max(1, ahead or AHEAD_PER_WORKER * _nworkers(client))
        idx_of = {j: sorted(pos[k] for k in subsets[j]) for j in todo}
        shape = {j: subset_shape(run.plan, idx_of[j], max_cells, per, len(cells)) for j in todo}
        # batches of subsets, each summed from every finest bucket by one task (subset_batch)
        spaces = [radix_space([max(int(run.plan.cards[i]), 1) for i in idx_of[j]]) for j in todo]
        groups = batches_of(spaces, -(-max_cells // max(1, len(cells))))
        batch_of, place_of = {}, {}
        for b, group in enumerate(groups):
            for p, n in enumerate(group):
                batch_of[todo[n]], place_of[todo[n]] = b, p
        batches: dict[int, list] = {}        # batch -> per finest bucket, its persisted result
        left = {b: len(group) for b, group in enumerate(groups)}

        def pieces_of(j):
            b = batch_of[j]
            if b not in batches:
                spec = [(idx_of[todo[n]], *shape[todo[n]]) for n in groups[b]]
                batches[b] = client.persist(
                    [delayed(subset_batch, pure=True)(run.plan_f, c, spec) for c in cells])
            return [res[place_of[j]] for res in batches[b]]

        maps = {j: maps_for(j) for j in todo} if maps_for is not None else {}
        tabs = {j: tables_for(j) for j in todo} if tables_for is not None else {}
        too_big = {}                  # subsets whose table may hold more than TABLE_CELLS cells
        fetch = set()                 # ... of those, the ones whose table is brought here
        for j in todo:
            cap = subset_cap(run.plan, idx_of[j], max_cells)
            if tabs.get(j) is not None and cap > TABLE_CELLS:
                if fetch_large:
                    fetch.add(j)
                else:
                    tabs[j], too_big[j] = None, cap
        # what is computed at once, in order: a whole batch, where each of its subsets is one
        # range of cells and no bucket measure maps it (one tree of batch merges over the finest
        # buckets, then one task of summaries), else one subset (its own tree of merges)
        units: list = []
        for b, group in enumerate(groups):
            if all(shape[todo[n]][0] == 1 and not maps.get(todo[n]) and todo[n] not in fetch
                   for n in group):
                # cut so that a merge's inputs stay bounded (BATCH_MERGE_CELLS cells out of each)
                for part in batches_of([spaces[n] for n in group], max_cells, BATCH_MERGE_CELLS):
                    units.append((True, b, [todo[group[k]] for k in part]))
            else:
                units.extend((False, b, [todo[n]]) for n in group)

        def submit(rank, whole, b, members):
            # an earlier unit's tasks first (its merges before a later unit's batches), so units
            # finish in the order they are read and the next ones are submitted meanwhile
            if whole:
                return client.compute(_batch_graph(run, cells, [idx_of[j] for j in members],
                                                   [shape[j] for j in members],
                                                   [tabs.get(j) for j in members]), priority=-rank)
            j = members[0]
            return client.compute(subset_graph(run.plan, run.plan_f, cells, idx_of[j], max_cells,
                                               per, SPLIT_EVERY, token, maps.get(j),
                                               pieces=pieces_of(j), tables=tabs.get(j),
                                               fetch=j in fetch), priority=-rank)

        flight: deque = deque()
        nxt, queued = 0, 0
        try:
            for u, (whole, b, members) in enumerate(units):
                while nxt < len(units) and (nxt <= u + 2 or queued < ahead):
                    flight.append(submit(nxt, *units[nxt]))
                    queued += len(units[nxt][2])
                    nxt += 1
                fut = flight.popleft()
                got = fut.result() if whole else [fut.result()]
                del fut
                queued -= len(members)
                for j, summaries in zip(members, got):
                    if j in too_big:
                        if not isinstance(summaries, dict):
                            summaries = subset_out(summaries)
                        summaries["results"] = {"cells_at_most": too_big[j]}
                    elif j in fetch:       # its table, brought here: the measures run here
                        classes, ctx, timeout = tabs[j]
                        merged = summaries["results"]
                        summaries["results"] = table_measures(run.plan, idx_of[j], classes, ctx,
                                                              timeout, *merged)
                        del merged
                    yield j, summaries
                if not whole:
                    left[b] -= 1
                    if not left[b]:
                        batches.pop(b, None)  # the batch's results are released on the workers
        finally:
            for fut in flight:
                fut.cancel()
            flight.clear()
            batches.clear()
            del cells


def _batch_graph(run, cells, idxs: Sequence, shapes: Sequence, tables: Sequence = ()):
    """The delayed per-subset summaries (each a list of one bucket summary) of a batch of subsets,
    each one range of cells (key positions ``idxs``): :func:`subset_batch` on each finest bucket,
    a tree of :func:`merge_batch`, then :func:`batch_summaries`: tasks of the whole batch. Where
    ``tables[k]`` is given (``(classes, ctx, timeout)``), subset ``k``'s measures that read cells
    run on its merged table in a task of their own (:func:`batch_table_measures`) and its item is a
    :func:`subset_out`."""
    from dask import delayed

    from gpurisk.freq._dask import SPLIT_EVERY, _tree
    spec = [(idx, *sh) for idx, sh in zip(idxs, shapes)]
    spaces = [radix_space([run.plan.cards[i] for i in idx])
              if len(subset_layout(run.plan, idx)[0]) == 1 else None for idx in idxs]
    parts = [delayed(subset_batch, pure=True)(run.plan_f, c, spec) for c in cells]
    root = _tree(parts, functools.partial(merge_batch, spaces), SPLIT_EVERY)
    summaries = delayed(batch_summaries, pure=True)(root)
    ats = [k for k, t in enumerate(tables or ()) if t is not None]
    if not ats:
        return summaries
    results = [delayed(batch_table_measures, pure=False)(run.plan_f, list(idxs[k]),
                                                         list(tables[k][0]), tables[k][1],
                                                         tables[k][2], root, k) for k in ats]
    return delayed(batch_out, pure=False)(summaries, ats, *results)
