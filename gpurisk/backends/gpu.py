"""The GPU backends: ``cudf`` (one GPU) and ``dask-cudf`` (cuDF partitions on a dask-cuda cluster).

Registered lazily by :mod:`gpurisk.backends.registry`; this module imports no RAPIDS library:
cuDF, CuPy, dask-cudf and dask-cuda are imported inside the methods that count, read or move arrays.
"""
from __future__ import annotations

from gpurisk.backends.cpu import DaskBackend
from gpurisk.backends.registry import Backend

_RAPIDS = "pip install 'gpurisk[cuda12]' or 'gpurisk[cuda13]'"


def _gpu_unavailable(name: str, mods) -> str | None:
    from gpurisk.backends.choose import gpu_devices, missing_modules
    n, why = gpu_devices()
    if n == 0:
        return f"backend {name!r} needs a CUDA GPU: {why}"
    miss = missing_modules(*mods)
    if miss:
        return f"backend {name!r} needs RAPIDS ({_RAPIDS}): {miss}"
    return None


class CudfBackend(Backend):
    """A cuDF frame on one GPU, counted in CuPy by the one-piece engine (:mod:`gpurisk.freq._cudf`):
    the code the strict-namespace tests run on the CPU."""

    name = "cudf"
    gpu = True

    def unavailable(self) -> str | None:
        return _gpu_unavailable(self.name, ("cudf",))

    def owns(self, data) -> bool:
        from gpurisk.xp import is_cudf
        return is_cudf(data)

    def count(self, sample, keys, population=None, sample_flag=None, weights=None,
              missing="category", **kw):  # pragma: no cover - needs a GPU
        from gpurisk.freq._cudf import build_table_cudf
        return build_table_cudf(sample, keys, population=population, sample_flag=sample_flag,
                                weights=weights, missing=missing, **kw)

    def namespace(self):  # pragma: no cover - needs a GPU
        import cupy
        return cupy

    def output_frame(self, rows, carry=()):  # pragma: no cover - needs a GPU
        import cudf

        from gpurisk.xp import is_cudf
        if carry and not is_cudf(rows):
            rows = cudf.from_pandas(rows[list(carry)])
        return cudf.DataFrame(), rows


class DaskCudfBackend(DaskBackend):
    """cuDF partitions on a dask-cuda cluster (one worker per GPU); the table comes back to the
    client in numpy, as the ``dask`` backend's."""

    name = "dask-cudf"
    gpu = True

    def unavailable(self) -> str | None:
        return super().unavailable() or _gpu_unavailable(self.name, ("cudf", "dask_cudf", "dask_cuda"))


CUDF = CudfBackend()
DASK_CUDF = DaskCudfBackend()
