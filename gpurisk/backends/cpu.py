"""The CPU backends: ``pandas`` (one process, the default and the reference) and ``dask`` (pandas
partitions on a Dask cluster). Registered lazily by :mod:`gpurisk.backends.registry`."""
from __future__ import annotations

from gpurisk.backends.registry import Backend


def _missing(*mods: str) -> str | None:
    from gpurisk.backends.choose import missing_modules
    return missing_modules(*mods)


class PandasBackend(Backend):
    """In-process pandas frames, counted in numpy by the one-piece engine."""

    name = "pandas"

    def owns(self, data) -> bool:
        return type(data).__module__.split(".")[0] == "pandas"

    def count(self, sample, keys, population=None, sample_flag=None, weights=None,
              missing="category"):
        import pandas as pd

        from gpurisk.errors import BadInput
        from gpurisk.freq.piece import build_table_piece
        if not isinstance(sample, pd.DataFrame):
            raise BadInput(f"expected a pandas DataFrame, got {type(sample).__name__}")
        if population is not None and not isinstance(population, pd.DataFrame):
            raise BadInput(f"expected the population as a pandas DataFrame, got {type(population).__name__}")
        return build_table_piece(sample, list(keys), population, sample_flag, weights, missing)


class DaskBackend(Backend):
    """pandas partitions on a Dask cluster (:mod:`gpurisk.freq._dask`): two tree reductions, the
    records never leaving their worker; the table comes back without record cells, or only its
    summaries (:meth:`summary`)."""

    name = "dask"
    distributed = True

    def unavailable(self) -> str | None:
        miss = _missing("dask.dataframe", "distributed")
        if miss:
            return (f"backend {self.name!r} needs dask[dataframe] and distributed "
                    f"(pip install 'gpurisk[dask]'): {miss}")
        return None

    def owns(self, data) -> bool:
        from gpurisk.xp import is_cudf
        if not (hasattr(data, "__dask_graph__") and hasattr(data, "npartitions")):
            return False
        meta = getattr(data, "_meta", None)
        return (meta is not None and is_cudf(meta)) == self.gpu

    def read(self, source, *, columns=None, sep=None, encoding="utf-8", text_columns=()):
        """Partition-wise: a Parquet directory or a CSV glob, read by the workers (Parquet decoded
        on the GPUs for dask-cudf)."""
        from gpurisk.io import read_lazy
        return read_lazy(source, sep=sep, columns=columns, encoding=encoding, gpu=self.gpu,
                         text_columns=text_columns)

    def client(self, **kw):
        from gpurisk.backends.cluster import dask_client
        return dask_client(gpu=self.gpu, **kw)

    def count(self, sample, keys, population=None, sample_flag=None, weights=None,
              missing="category", **kw):
        from gpurisk.freq._dask import build_table_dask
        return build_table_dask(self.client, sample, keys, population=population, sample_flag=sample_flag,
                                weights=weights, missing=missing, gpu=self.gpu, **kw)

    def summary(self, sample, keys, **kw):
        from gpurisk.freq._dask import summary_dask
        return summary_dask(self.client, sample, keys, gpu=self.gpu, **kw)

    def write_records(self, source, keys, out_dir, **kw) -> dict:
        from gpurisk.freq._dask import write_records_dask
        return write_records_dask(self.client, source, keys, out_dir, gpu=self.gpu, **kw)

    def record_pass(self, sample, table, columns, **kw) -> dict:
        from gpurisk.freq._dask import record_pass_dask
        return record_pass_dask(self.client, sample, table, columns, gpu=self.gpu, **kw)

    def record_codes(self, sample, table, **kw) -> list:
        from gpurisk.freq._dask import record_codes_dask
        return record_codes_dask(self.client, sample, table, gpu=self.gpu, **kw)


PANDAS = PandasBackend()
DASK = DaskBackend()
