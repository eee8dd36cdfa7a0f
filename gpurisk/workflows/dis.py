"""``gpurisk dis`` on a frame or a file: read, check and count by :class:`gpurisk.inputs.Inputs`, then
:func:`gpurisk.dis.run.run_dis`. :func:`dis_with` is the workflow on the settings objects (what the
command calls); :func:`dis` the convenience that takes them as keywords."""
from __future__ import annotations

from pathlib import Path
from typing import Iterable, Sequence

from gpurisk.core.messages import bad_input
from gpurisk.core.settings import Design, Reading, Run, inputs
from gpurisk.dis.counts import record_codes
from gpurisk.dis.run import DISResult, run_dis
from gpurisk.errors import BadInput
from gpurisk.io.lock import locked


def _distributed_codes(inp, frames, keys, extra_cols):
    """(codes per key, categories, codes of the extra columns) of a Dask input: the keys and the
    columns the perturbations read are counted on the workers, and each record's codes (narrow
    integers, records × columns bytes) are encoded there with that count's plan and brought here,
    where the perturbations redraw the whole file (a swap pairs records across partitions). The
    codes equal the pandas backend's, so a seed gives the same pr(cm|um) on both."""
    if inp.recode:
        raise bad_input(f"dis with {{arg:--recode|recode}} on the {inp.backend} backend: the records' codes are "
                       "taken before recoding; recode the data, or use {backend_pandas} (or cudf)")
    table = inp.count(frames, also=extra_cols).table
    cols = list(table.keys)
    allc = inp.backend_obj.record_codes(frames.sample, table, sep=inp.sep)
    pos = {c: v for v, c in enumerate(cols)}
    return ([allc[pos[k]] for k in keys], [table.categories[pos[k]] for k in keys],
            {c: allc[pos[c]] for c in extra_cols})


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
    from gpurisk.inputs import check_fraction
    f = check_fraction(fraction, "sampling fraction f")
    if f is None:
        raise bad_input("dis needs the sampling fraction f ({arg:--fraction|fraction})")
    reading = Reading(missing=missing, recode=recode, backend=backend, sep=sep, encoding=encoding,
                      allow_high_cardinality=allow_high_cardinality)
    return dis_with(frame, keys, Design(fraction=f), Run(seed=seed), reading, perturb=perturb,
                    max_iter=max_iter, stable=stable, decimals=decimals, batch=batch, state=state,
                    orientation=orientation)


@locked("state", "the state file")
def dis_with(frame, keys: Sequence[str], design: Design, run: Run, reading: Reading | None = None,
             *, perturb: Iterable, max_iter: int = 100, stable: int = 10, decimals: int = 3,
             batch: int | None = None, state: str | Path | None = None,
             orientation: str = "intruder") -> DISResult:
    """:func:`dis` on the settings objects: the :class:`gpurisk.core.settings.Design` gives the
    sampling fraction f (π, required; dis takes no population, sample flag or weights), the
    :class:`~gpurisk.core.settings.Run` the seed of the perturbations, the
    :class:`~gpurisk.core.settings.Reading` how the records are read. The other arguments as in
    :func:`dis`."""
    from gpurisk.freq.encode import encode_keys
    from gpurisk.inputs import key_list
    from gpurisk.plugins import make_perturbation
    reading = reading or Reading()
    missing, seed, f = reading.missing, run.seed, design.fraction
    if f is None:
        raise bad_input("dis needs the sampling fraction f ({arg:--fraction|fraction})")
    if design.population is not None or design.sample_flag is not None or design.weights is not None:
        raise BadInput("dis takes the sampling fraction f only (no population, sample flag or "
                       "weights)")

    keys = key_list(keys)
    perts = [make_perturbation(p) for p in ([perturb] if isinstance(perturb, str) else perturb)]
    extra_cols = list(dict.fromkeys(c for p in perts for c in p.columns(keys)))
    inp = inputs(frame, keys, design, reading, columns=extra_cols)
    if state is not None:
        from gpurisk.io import check_output_file
        check_output_file(state, None, "{arg:--state|state}")   # before the work
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
