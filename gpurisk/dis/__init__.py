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
from gpurisk.dis.counts import (ORIENTATIONS, pr_cm_um, record_codes, stop_point,  # noqa: F401
                                tpf_counts)
from gpurisk.dis.run import BATCH_CELLS, DISResult, run_dis  # noqa: F401

__all__ = ["BATCH_CELLS", "DISResult", "ORIENTATIONS", "dis", "dis_with", "pr_cm_um", "record_codes", "run_dis",
           "stop_point", "tpf_counts"]


def __getattr__(name):
    """``dis`` and ``dis_with`` (:mod:`gpurisk.workflows.dis`), imported when first asked for: the workflow module imports this package's parts,
    so importing it here, eagerly, would go in a circle when the workflow is imported first."""
    if name in ('dis', 'dis_with'):
        from gpurisk.workflows import dis as workflow
        return getattr(workflow, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
