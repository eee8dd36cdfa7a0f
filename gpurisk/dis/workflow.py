"""``gpurisk dis`` on a frame or a file: read, check and count by :class:`gpurisk.inputs.Inputs`, then
:func:`gpurisk.dis.run.run_dis`."""
from __future__ import annotations

from pathlib import Path
from typing import Iterable, Sequence

from gpurisk.dis.counts import record_codes
from gpurisk.dis.run import DISResult, run_dis
from gpurisk.errors import BadInput
from gpurisk.core.messages import bad_input
from gpurisk.io.lock import locked


def _distributed_codes(inp, frames, keys, extra_cols):
    """(codes per key, categories, codes of the extra columns) of a Dask input: the keys and the
    columns the perturbations read are counted on the workers, and each record's codes (narrow
    integers, records × columns bytes) are encoded there with that count's plan and brought here,
    where the perturbations redraw the whole file (a swap pairs records across partitions). The
    codes equal the pandas backend's, so a seed gives the same pr(cm|um) on both."""
    from gpurisk.freq._dask import record_codes_dask
    if inp.recode:
        raise bad_input(f"dis with {{arg:--recode|recode}} on the {inp.backend} backend: the records' codes are "
                       "taken before recoding; recode the data, or use --backend pandas (or cudf)")
    table = inp.count(frames, also=extra_cols).table
    cols = list(table.keys)
    allc = record_codes_dask(frames.sample, table, gpu=inp.backend == "dask-cudf", sep=inp.sep)
    pos = {c: v for v, c in enumerate(cols)}
    return ([allc[pos[k]] for k in keys], [table.categories[pos[k]] for k in keys],
            {c: allc[pos[c]] for c in extra_cols})


@locked("state", "the state file")
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
    from gpurisk.freq.encode import encode_keys
    from gpurisk.inputs import Inputs, check_fraction, key_list
    from gpurisk.plugins import make_perturbation

    keys = key_list(keys)
    perts = [make_perturbation(p) for p in ([perturb] if isinstance(perturb, str) else perturb)]
    extra_cols = list(dict.fromkeys(c for p in perts for c in p.columns(keys)))
    f = check_fraction(fraction, "sampling fraction f")
    if f is None:
        raise bad_input("dis needs the sampling fraction f ({arg:--fraction|fraction})")
    inp = Inputs(frame, keys, fraction=f, missing=missing, recode=recode, backend=backend, sep=sep,
                 encoding=encoding, allow_high_cardinality=allow_high_cardinality,
                 columns=extra_cols)
    if state is not None:
        from gpurisk.io import check_output_file
        check_output_file(state, None, "--state")   # before the work
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
