"""The log-linear fits behind τ̂1 and Ê for one frequency table, each made once and kept on the
table (:meth:`gpurisk.freq.table.FreqTable.cached`), so tau1_ll and matches_ll, and the measures
of a scan's combination, share them:

- the sample's codes and margins (:func:`sample_margins`);
- the sample uniques' μ̂ under each model: main effects or the two-way fit
  (:func:`sample_unique_means`), the held-out tests' forest (:func:`auto_cv_means`), the smoothed
  forest of :mod:`gpurisk.models.eb_forest` (:func:`eb_means`), the risk criterion's forest
  (:func:`risk_means`);
- the cell effect's variance α̂: by moments, α̂ = Σ_j [(f_j − μ̂_j)² − f_j] / Σ_j μ̂_j² over every
  cell (:func:`dispersion_moment`: E[(f − μ)² − f] = α μ² under the Poisson-gamma model), or by the
  zero-truncated likelihood (:mod:`gpurisk.models.dispersion`);
- Skinner & Shlomo's risk criterion at the kept forest (:func:`forest_misfit`,
  :mod:`gpurisk.models.risk_choice`).

Only the sample's cells and margins are read; no array of the K cells is formed. The measures and
the whole method: :mod:`gpurisk.measures._ll_poisson`."""
from __future__ import annotations

import numpy as np

from gpurisk.errors import BadInput
from gpurisk.models.dispersion import alpha_of, loglik, profile_of, truncated_alpha
from gpurisk.models.loglinear import MAX_CELLS, MAX_ITER, TOL
from gpurisk.models.model_choice import Z_CHOICE
from gpurisk.xp import scalar, to_host

#: the log-linear models offered (option ``model``): margins fitted
MODELS = ("auto_cv", "eb", "risk", "cv_risk", "independence", "two_way")
#: how model=eb shrinks a kept pair (option ``eb_smoothing``)
SMOOTHINGS = ("rooted", "joint")
#: the leave-one-out prior of a root key's categories (option root_prior)
ROOT_PRIORS = ("eb", "jeffreys")
#: the shrinkage targets of the rooted form's arcs (option arc_target: gpurisk.models.neighbours)
ARC_TARGETS = ("global", "neighbours")


def dispersion_moment(table, mu_all, sum_mu2) -> float:
    """α̂ = Σ_j [(f_j − μ̂_j)² − f_j] / Σ_j μ̂_j² over every cell of the table (at least 0): the
    moment estimator of the gamma variance, E[(f − μ)² − f] = α μ² under the Poisson-gamma model.
    ``mu_all``: μ̂ of the sampled cells; ``sum_mu2``: Σ μ̂² over all cells (cells with f = 0 add
    μ̂² only, so no K-cell array is needed)."""
    f = np.asarray(to_host(table.f), dtype=np.float64)
    s = f > 0
    fs, ms = f, np.asarray(mu_all, dtype=np.float64)
    if not s.all():             # cells seen in the population only (no copy when every f_j > 0)
        fs, ms = fs[s], ms[s]
    return _moment(fs, ms, sum_mu2)


def _moment(fs, ms, sum_mu2) -> float:
    """:func:`dispersion_moment` from the sampled cells' f_j and μ̂_j, in their order (the two
    products in one buffer)."""
    fs = np.asarray(fs, dtype=np.float64)
    buf = np.multiply(fs, fs)
    ff = np.sum(buf)
    fm = np.sum(np.multiply(fs, ms, out=buf))
    del buf
    num = float(ff - 2.0 * fm + sum_mu2 - fs.sum())
    return max(num / sum_mu2, 0.0) if sum_mu2 > 0 else 0.0


def model_margins(model: str, d: int) -> list[tuple[int, ...]] | None:
    """The margins of a model over d keys (None: every pair, the default of fit_two_way)."""
    if model == "two_way":
        return None
    if model in ("independence", "auto_cv", "risk", "cv_risk"):
        return [(v,) for v in range(d)]
    raise BadInput(f"log-linear model {model!r} is not one of {', '.join(MODELS)}")


def sample_unique_means(table, model="two_way", tol=TOL, max_iter=MAX_ITER, max_cells=MAX_CELLS):
    """(μ̂ of the sample-unique cells as a host array, the fit or None, α̂, the uniques' margin counts
    for :func:`gpurisk.models.prior.loo_prior`, or None for the two-way fit); the two-way fit is
    computed once per table and settings (shared with r1, ...); the independence model's μ̂ is
    closed-form, n Π_v (f_v(x_v) / n), computed once per table too (tau1_ll and matches_ll share it
    in a scan)."""
    model_margins(model, len(table.keys))
    if model == "independence":
        return table.cached("_ll_independence", lambda: _means(table, model, tol, max_iter, max_cells))
    return _means(table, model, tol, max_iter, max_cells)


def auto_cv_means(table, splits: int = 1, seed: int = 0, z: float = Z_CHOICE, max_pairs=None,
                  dispersion: str = "moment"):
    """(μ̂ of the sample-unique cells, α̂, the kept pairs of key indices (a list, maybe empty), the
    uniques' margin counts for :func:`gpurisk.models.prior.loo_prior`, the doubtful alternatives
    [(weight, μ̂, α̂, counts)]) under main effects + the forest of interactions the held-out tests
    keep (:mod:`gpurisk.models.forest`, at most ``max_pairs``; None: the forest's limit; the
    alternatives: :func:`gpurisk.models.forest.doubtful`); on the host, closed form, no K-cell
    array."""
    def make():
        from gpurisk.models.forest import choose_forest, doubtful
        codes, f, cards, ranks, margins = sample_margins(table)
        limit = len(codes) - 1 if max_pairs is None else int(max_pairs)
        edges, scores = choose_forest(codes, f, cards, splits, seed, z, ranks, table.keys, limit,
                                      margins)
        mu, alpha, counts = forest_model(margins, edges, dispersion)
        alts = [(w, *forest_model(margins, es, dispersion))
                for w, es in doubtful(edges, scores, z, limit)]
        return mu, alpha, edges, counts, alts
    return table.cached(f"_ll_auto_cv_{int(splits)}_{int(seed)}_{float(z)!r}_{max_pairs}"
                        f"_{dispersion}", make)


def eb_means(table, max_pairs=None, dispersion: str = "moment", profile: bool = False,
             smoothing: str = "rooted", root_prior: str = "jeffreys", arc_target: str = "global"):
    """As :func:`auto_cv_means` (and, last, the rooted form's arcs (parent, child), None with
    ``smoothing="joint"``), main effects + the forest of smoothed interactions of
    :mod:`gpurisk.models.eb_forest` (each pair kept by its evidence, shrunk towards independence by
    its empirical-Bayes prior: ``smoothing`` "rooted", each tree rooted and a child's categories
    given its parent's shrunk towards the child's shares, or "joint", the pair's table shrunk towards
    independence); the uniques' counts are :func:`gpurisk.models.eb_forest.rooted_counts` or
    :func:`gpurisk.models.eb_forest.loo_counts` factors and there are no alternatives (the
    shrinkage, not a test, handles a pair the sample cannot tell). ``root_prior``: each root key's
    categories under Jeffreys' prior ("jeffreys") or its fitted gamma where that is more even
    ("eb": :mod:`gpurisk.models.root_prior`; the rooted form only). ``arc_target``: each arc's
    child shares shrunk towards the child's overall shares ("global") or, for a numeric parent,
    towards its neighbouring categories' where the records prefer them ("neighbours":
    :mod:`gpurisk.models.neighbours`; the rooted form only)."""
    if smoothing not in SMOOTHINGS:
        raise BadInput(f"eb_smoothing={smoothing!r} is not one of {', '.join(SMOOTHINGS)}")
    if root_prior not in ROOT_PRIORS:
        raise BadInput(f"root_prior={root_prior!r} is not one of {', '.join(ROOT_PRIORS)}")
    if arc_target not in ARC_TARGETS:
        raise BadInput(f"arc_target={arc_target!r} is not one of {', '.join(ARC_TARGETS)}")

    def forest():      # the choice, the fit and α̂: shared by every root prior
        from gpurisk.models import eb_forest
        margins = sample_margins(table)[4]
        edges, alphas, _ = eb_forest.choose(margins, max_pairs, shrinkage=smoothing == "joint")
        roots = arcs = None
        f = margins.f
        if smoothing == "rooted":
            roots, arcs = eb_forest.orient(margins, edges, arc_target)
            if dispersion == "truncated":      # no per-cell μ̂ of every cell kept
                at = eb_forest.rooted_slices(margins, roots, arcs)[0]
                su = unique_positions(f)
                mu_su, ll = _streamed(f, at, su)
                return margins, mu_su, alpha_of(ll), edges, alphas, roots, arcs, su, ll
            mu, sum_mu2 = eb_forest.rooted_means(margins, roots, arcs)
        else:
            mu, sum_mu2 = eb_forest.means(margins, edges, alphas)
        ll = None           # the truncated likelihood, its cells grouped once (α̂'s profile too)
        if dispersion != "truncated":
            alpha = _moment(f, mu, sum_mu2)
        else:
            ll = loglik(f, mu)
            alpha = alpha_of(ll)
        su = unique_positions(f)
        return margins, mu[su], alpha, edges, alphas, roots, arcs, su, ll

    def make():
        from gpurisk.models import eb_forest
        margins, mu_su, alpha, edges, alphas, roots, arcs, su, ll = table.cached(base, forest)
        if smoothing == "rooted":
            return (mu_su, alpha, edges,
                    eb_forest.rooted_counts(margins, roots, arcs, su, root_prior), [],
                    ll, [arc[:2] if len(arc) < 4 else (*arc[:2], arc[3]) for arc in arcs])
        return mu_su, alpha, edges, eb_forest.loo_counts(margins, edges, alphas, su), [], ll, None
    base = f"_ll_eb_{max_pairs}_{dispersion}_{smoothing}" + (
        "" if arc_target == "global" else f"_{arc_target}")
    key = base + f"_{root_prior}"
    mu, alpha, edges, counts, alts, ll, arcs = table.cached(key, make)
    span = None
    if profile and dispersion == "truncated":     # α̂'s one-s.e. profile interval, asked apart
        span = table.cached(base + "_profile", lambda: profile_of(ll, alpha))
    return mu, alpha, edges, counts, alts, span, arcs


def _streamed(f, cells, su):
    """(μ̂ of the sample uniques ``su``, the zero-truncated ℓ(α) of every sampled cell:
    :func:`gpurisk.models.dispersion.loglik`) from the cells' μ̂ ``cells``
    (:class:`gpurisk.models.forest.CellMeans`), read a slice at a time: the same numbers as from
    the whole array, which is not made. The slices are shared among the CPUs this process may use
    (:func:`gpurisk.models.terms.each_slice`): each slice's groups (whole numbers) and its uniques'
    Σ μ̂ are kept apart and added in the slices' order, so the numbers do not depend on the
    threads. The uniques' μ̂ are CellMeans too, made again where read (their mean summed here)."""
    from gpurisk.models.dispersion import GROUP_CHUNK, Groups, grouped
    from gpurisk.models.forest import CellMeans
    from gpurisk.models.terms import each_slice
    size = int(f.shape[0])
    starts = range(0, size, GROUP_CHUNK)
    parts, totals = [None] * len(starts), np.zeros(len(starts))
    # each slice's uniques: su is in order, so they are a run of it
    ends = np.searchsorted(su, np.array([min(size, s + GROUP_CHUNK) for s in starts],
                                        dtype=su.dtype))

    def one(start):
        i = start // GROUP_CHUNK
        stop = min(size, start + GROUP_CHUNK)
        mu = cells.at(start, stop)
        fs = f[start:stop]
        seen = fs > 0
        parts[i] = Groups.part(fs[seen], mu[seen])
        totals[i] = float(np.sum(mu[su[(ends[i - 1] if i else 0):ends[i]] - start]))
    got = Groups()
    total = 0.0
    # STREAM_WINDOW slices side by side at a time, then put in order: at most that many slices'
    # groups held apart
    for w0 in range(0, len(starts), STREAM_WINDOW):
        window = range(w0, min(w0 + STREAM_WINDOW, len(starts)))
        each_slice(one, starts[window.start:window.stop])
        for i in window:
            got.put(parts[i])
            parts[i] = None
            total += float(totals[i])
    count = int(su.shape[0])
    mu_su = CellMeans(lambda rows, n: cells.on(su[rows], n), count,
                      total / count if count else float("nan"))
    return mu_su, grouped(got.groups())


#: :func:`_streamed` finds this many slices' groups side by side before it puts them in order
STREAM_WINDOW = 64


def sample_margins(table):
    """(codes per key (host arrays of the smallest integer dtype), counts f, categories per key,
    category ranks, :class:`Margins`) of the sample's cells and categories only: a table that also
    holds the population's cells and categories (validate, --population) gives what the sample
    alone gives. Each key's counts are the table's margins of f where it has them (a scan's), at the
    seen categories, else summed here in the same pass that finds the seen categories (whole
    numbers: the same sums). Where every cell is sampled (a sample's own table) the codes and f are
    the table's own arrays, not copies."""
    def make():
        from gpurisk.freq.rollup import codes_at, known_margins
        from gpurisk.models.forest import Margins
        from gpurisk.models.model_choice import category_ranks
        sampled = table.f > 0
        seen = slice(None) if bool(scalar(sampled.all())) else table.xp.flatnonzero(sampled)
        f = to_host(table.f[seen])
        known = known_margins(table)
        # the counts as they are (whole numbers: the same sums), read a slice at a time
        weights = None if known is not None else f
        codes, cards, ranks, kept, ones = [], [], [], [], []
        all_codes, all_ranks = codes_at(table, seen), category_ranks(table.categories)
        if weights is not None:       # every key's counts in one pass over the weights
            sums = _chunked_bincounts(all_codes, weights, [r.shape[0] for r in all_ranks])
        for v, (c, r) in enumerate(zip(all_codes, all_ranks)):
            if weights is None:
                present = np.bincount(c, minlength=r.shape[0]) > 0     # the categories seen
            else:
                one = sums[v]
                present = one > 0                                     # (every f here is > 0)
            used = np.flatnonzero(present)
            codes.append(c if used.shape[0] == r.shape[0] else     # the smallest integer dtype
                         (np.cumsum(present) - 1).astype(c.dtype)[c])
            cards.append(int(used.shape[0]))
            ranks.append(r[used])
            kept.append(used)
            if weights is not None:
                ones.append(one[used])
        if known is not None:
            ones = [np.asarray(to_host(m), dtype=np.float64)[u] for m, u in zip(known, kept)]
        margins = Margins(codes, f, cards, ones)
        # each key's seen categories' values, listed when an arc asks (arc_target=neighbours)
        margins.values = (lambda v, cats=table.categories, used=kept:
                          [cats[v][i] for i in used[v].tolist()])
        return codes, f, cards, ranks, margins
    return table.cached("_ll_sample_margins", make)


#: :func:`unique_positions` reads the cells this many at a time
POSITIONS_CHUNK = 1 << 20


def unique_positions(f) -> np.ndarray:
    """The positions of the cells with f = 1 (the sample uniques), in order: 32-bit where the
    cells are fewer than 2³¹ (half np.flatnonzero's 64), counted and then found a slice of cells
    at a time (no 64-bit array of them all is made, and no second copy)."""
    size = int(np.shape(f)[0])
    if size >= 1 << 31:
        return np.flatnonzero(f == 1)
    starts = range(0, size, POSITIONS_CHUNK)
    counts = [int(np.count_nonzero(f[start:start + POSITIONS_CHUNK] == 1)) for start in starts]
    out = np.empty(sum(counts), dtype=np.int32)        # filled in place: no list of parts
    at = 0
    for start, k in zip(starts, counts):
        out[at:at + k] = np.flatnonzero(f[start:start + POSITIONS_CHUNK] == 1) + start
        at += k
    return out


def lone_uniques(table) -> int:
    """How many sample uniques hold, in some key, a category no other sample record has (a
    category the sample holds once: its one record is a unique). How such a category spreads over
    the other keys, and how large it is, the sample cannot show; where many uniques are such, the
    bounds hold the truth less often than their level (bench/sweep_keysets.py, docs/validation.md).
    One lookup per key over the sample's cells, and none where no key has such a category."""
    def make():
        codes, f, _, _, margins = sample_margins(table)
        hit = None
        for v, c in enumerate(codes):
            once = np.asarray(margins.one(v)) == 1
            if not once.any():
                continue
            at = once[c]
            hit = at if hit is None else hit | at
        return 0 if hit is None else int(np.count_nonzero(hit))
    return table.cached("_ll_lone_uniques", make)


#: :func:`_chunked_bincounts` reads the cells this many at a time
BINCOUNT_CHUNK = 1 << 16


def _chunked_bincounts(codes, weights, lengths) -> list:
    """Per key, np.bincount(codes[v], weights, minlength=lengths[v]) of whole-number weights (the
    counts), every key's summed over the same slice of cells while it is in the cache (the weights
    read once, not once a key: 2.5 times as fast for 8 keys of 1.6e7 cells). The cells are cut into
    as many runs of slices as there are CPUs this process may use (at most
    :data:`gpurisk.models.terms.TERMS_THREADS`, where there are at least THREADED_CHUNKS slices),
    each run summed by a thread of its own into its own counts: whole numbers, so the sums are the
    same exactly whatever the runs (and each thread holds one set of counts, not one a slice)."""
    from gpurisk.freq.schedule import in_runs, usable_cpus
    from gpurisk.models import terms
    size = int(np.shape(weights)[0])
    if size <= BINCOUNT_CHUNK:
        return [np.bincount(c, weights=weights, minlength=k) for c, k in zip(codes, lengths)]
    starts = range(0, size, BINCOUNT_CHUNK)
    threads = min(terms.TERMS_THREADS, usable_cpus())
    runs = threads if threads > 1 and len(starts) >= terms.THREADED_CHUNKS else 1

    def run(a, b):               # the slices a..b
        out = [np.zeros(k) for k in lengths]
        for start in starts[a:b]:
            w = weights[start:start + BINCOUNT_CHUNK]
            for o, c, k in zip(out, codes, lengths):
                o += np.bincount(c[start:start + BINCOUNT_CHUNK], weights=w, minlength=k)
        return out
    got = in_runs(run, len(starts), 1, runs, "gpurisk-margins")
    return [sum(parts[1:], parts[0]) for parts in zip(*got)]


def forest_model(margins, edges, dispersion: str = "moment"):
    """(μ̂ of the sample uniques, α̂, their margin counts for
    :func:`gpurisk.models.prior.loo_prior`) under main effects + the forest ``edges`` (α̂ over the
    sampled cells: a cell seen in the population only adds μ̂² alone; by moments, or by the
    zero-truncated likelihood with ``dispersion="truncated"``)."""
    from gpurisk.models.forest import forest_counts, forest_means
    codes, f, cards = margins.codes, margins.f, margins.cards
    su = unique_positions(f)
    mu, sum_mu2 = forest_means(codes, f, cards, edges, margins)
    alpha = truncated_alpha(f, mu) if dispersion == "truncated" else _moment(f, mu, sum_mu2)
    return mu[su], alpha, forest_counts(codes, f, cards, edges, su, margins)


def forest_misfit(table, edges, pi: float, kind: str, seed: int = 0):
    """The risk criterion (:class:`gpurisk.models.risk_choice.Score`) at main effects + the forest
    ``edges`` for E's term (``kind="inverse"``) or τ1's (``"tau1"``). Both are computed at once and
    kept on the table (both intervals read them by default), from one :class:`Draws` of the
    table, which is then let go with its per-cell fitted means."""
    from gpurisk.models import risk_choice
    key = "_".join(f"{a}-{b}" for a, b in edges)

    def make():
        margins = sample_margins(table)[4]
        # the keys drawn in the order of their names, so a scan's table (keys in its own order)
        # and an assess of the same keys draw the same cells
        order = sorted(range(len(table.keys)), key=lambda v: str(table.keys[v]))
        draws = risk_choice.Draws(margins, risk_choice.draws_for(margins), seed, order=order)
        # E's criterion and τ1's read the same fitted cells (the same numbers, made once)
        return risk_choice.scores(margins, list(edges), pi, draws, ("inverse", "tau1"))
    return table.cached(f"_ll_misfit_{pi!r}_{key}_{int(seed)}", make)[kind]


def risk_z() -> float:
    from gpurisk.models.risk_choice import Z_RISK
    return Z_RISK


def risk_means(table, pi: float, kind: str = "inverse", z: float | None = None, seed: int = 0,
               boot: int = 0, start: str = "main"):
    """As :func:`auto_cv_means`, the forest chosen by the risk criterion of
    :mod:`gpurisk.models.risk_choice` (forward selection on |T_h|, h = E's term by default: the
    same model for tau1_ll and matches_ll), and the path of the selection. The alternatives are
    the forests the same selection chooses on ``boot`` bootstrap samples (each cell's count redrawn
    as Poisson(f_j): the sample's records resampled), each weighted by the share of the bootstrap
    samples choosing it, and fitted to the sample itself: their spread around the kept forest's
    estimate is the model choice's own uncertainty. ``start="cv"``: the selection starts from the
    forest the held-out tests keep (:func:`auto_cv_means`' choice, redone on each bootstrap
    sample), and adds pairs while the criterion signals misfit."""
    from gpurisk.models import risk_choice
    from gpurisk.models.forest import Margins
    z = risk_choice.Z_RISK if z is None else float(z)

    def make():
        from gpurisk.models.forest import choose_forest
        codes, f, cards, ranks, margins = sample_margins(table)

        def first(m, fb):
            if start != "cv":
                return ()
            return choose_forest(m.codes, fb, m.cards, 1, 0, Z_CHOICE, ranks, table.keys,
                                 len(m.codes) - 1, m)[0]
        edges, path = risk_choice.choose(margins, pi, kind, z, seed, start=first(margins, f))
        mu, alpha, counts = forest_model(margins, edges)
        draws = risk_choice.Draws(margins, risk_choice.draws_for(margins), seed)
        # the criterion of each measure's own term at the kept forest: (B̂_h, T_h)
        misfit = {h: risk_choice.score(margins, edges, pi, draws, h) for h in ("inverse", "tau1")}
        chosen: dict = {}
        rng = np.random.default_rng(seed + 1)
        for b in range(int(boot)):
            fb = rng.poisson(margins.f)
            keep = fb > 0
            mb = Margins([c[keep] for c in margins.codes], fb[keep], margins.cards)
            eb = tuple(risk_choice.choose(mb, pi, kind, z, seed + 2 + b,
                                          draws=risk_choice.DRAWS_BOOT,
                                          start=first(mb, fb[keep]))[0])
            chosen[eb] = chosen.get(eb, 0) + 1
        alts = [(k / boot, *forest_model(margins, list(e))) for e, k in chosen.items()
                if list(e) != edges]
        return mu, alpha, edges, counts, alts, misfit
    return table.cached(f"_ll_risk_{pi!r}_{kind}_{z!r}_{int(seed)}_{int(boot)}_{start}", make)


def _means(table, model, tol, max_iter, max_cells):
    if model == "independence":
        return _independence_means(table, float(table.n))
    from gpurisk.models.record_model import cached_fit   # the fit r1, ... use: shared
    fit = cached_fit(table, tol, max_iter, max_cells)
    mu_all = np.asarray(to_host(fit.p_hat_codes(table.cell_codes()) * fit.n), dtype=np.float64)
    vals = fit.dense if fit.dense is not None else fit.mu_support
    alpha = dispersion_moment(table, mu_all, float(scalar((vals * vals).sum())))
    return mu_all[np.asarray(to_host(table.f == 1))], fit, alpha, None


def _independence_means(table, n: float):
    """:func:`_means` of main effects, closed form, μ̂_j = n Π_v f_v(x_jv) / n, on the host over the
    sampled cells alone (a table that also holds a population's cells, validate or a sample flag,
    may have many more: they add μ̂² to Σ μ̂² only, which is Π_v Σ p_v² n² in closed form); each
    key's margin of f is the table's where a scan handed it on, else summed over the sampled cells
    (whole numbers: the same sums)."""
    from gpurisk.freq.rollup import codes_at, known_margins
    seen = table.xp.flatnonzero(table.f > 0)
    f = np.asarray(to_host(table.f[seen]), dtype=np.float64)
    codes = codes_at(table, seen)
    known = known_margins(table)
    margins = ([np.asarray(to_host(m), dtype=np.float64) for m in known] if known is not None else
               [np.bincount(c, weights=f, minlength=int(k)) for c, k in zip(codes, table.cards)])
    su = f == 1
    mu = np.full(f.shape[0], n)
    sum_mu2 = n * n
    counts = []
    for c, margin in zip(codes, margins):
        p = margin / n
        mu *= p[c]
        sum_mu2 *= float((p * p).sum())
        counts.append(margin[c[su]])
    return mu[su], None, _moment(f, mu, sum_mu2), counts
