"""Write per-record risks to Parquet, one batch of records at a time.

Columns: ``row`` (the record's 0-based position in the input), ``f`` (its cell's sample count),
``F`` (the population count, when a population was given), ``p_hat`` and one float column per search
method. :meth:`RecordRiskWriter.write` takes any batch (a chunk of a pandas frame, or one partition
of a distributed frame) as numpy or cupy arrays and appends it as a row group, so the whole file is
never held in memory. The file is written under a temporary name and renamed into place when the
writer closes without an error (a crash leaves no half-written file under the final name).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from gpurisk.errors import BadInput
from gpurisk.core.messages import bad_input
from gpurisk.xp import to_host


class RecordRiskWriter:
    def __init__(self, path, methods, population: bool = False):
        import pyarrow as pa
        self.path = Path(path)
        self.methods = tuple(methods)
        fields = [("row", pa.int64()), ("f", pa.int64())]
        if population:
            fields.append(("F", pa.int64()))
        fields += [("p_hat", pa.float64())] + [(m, pa.float64()) for m in self.methods]
        self.schema = pa.schema(fields)
        self.rows = 0
        self._writer = None
        self._closed = False

    def __enter__(self):
        self.open()
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.close()
        else:
            self.abort()

    def open(self) -> None:
        import pyarrow.parquet as pq
        if self.path.parent and not self.path.parent.exists():
            raise BadInput(f"output directory {str(self.path.parent)!r} does not exist")
        from gpurisk.io import temp_path
        from gpurisk.io.outputs import check_target
        check_target(self.path, what="record-level output", folder_ok=True, others=False)
        self._tmp = temp_path(self.path)
        try:
            self._writer = pq.ParquetWriter(str(self._tmp), self.schema)
        except OSError as exc:
            Path(self._tmp).unlink(missing_ok=True)
            raise self._disk(exc) from None

    def _disk(self, exc: OSError) -> BadInput:
        """One line for a full disk, a read-only folder or another error of writing."""
        from gpurisk.io.outputs import disk_error
        return disk_error(self.path, exc) or BadInput(f"cannot write {str(self.path)!r}: {exc}")

    def write(self, rows, cols: dict) -> None:
        """Append records: ``rows`` (positions) and ``cols`` {f, F?, p_hat, method: risk} arrays."""
        import pyarrow as pa
        if self._writer is None:
            self.open()
        arrays = [pa.array(np.asarray(to_host(rows), dtype=np.int64))]
        for name in self.schema.names[1:]:
            a = to_host(cols[name])
            arrays.append(pa.array(np.asarray(a, dtype=np.int64 if name in ("f", "F") else np.float64)))
        try:
            self._writer.write_batch(pa.record_batch(arrays, schema=self.schema))
        except OSError as exc:      # the caller's with-block aborts: the temporary file goes
            raise self._disk(exc) from None
        self.rows += len(arrays[0])

    def close(self) -> None:
        if self._writer is None:
            self.open()  # an empty file with the schema, so readers see the columns
        if not self._closed:
            import os
            try:
                self._writer.close()
                os.replace(self._tmp, self.path)
            except OSError as exc:
                self._closed = True
                Path(self._tmp).unlink(missing_ok=True)
                raise self._disk(exc) from None
            self._closed = True

    def abort(self) -> None:
        """Close and remove the temporary file (an error happened): the final name is never written."""
        if self._writer is not None and not self._closed:
            try:
                self._writer.close()
            except OSError:          # a full disk: the file is removed below anyway
                pass
            finally:
                self._closed = True
                Path(self._tmp).unlink(missing_ok=True)


def add_id_columns(path, ids, by_row: bool = False) -> None:
    """Put the columns of ``ids`` (a frame in the input's record order) in front of the record-level
    Parquet file ``path``, matched by its ``row`` column (``record-risk --id COL``), so a user can join
    the risks back to the file. Rewritten row group by row group under a temporary name, then renamed
    into place (a crash leaves the file without ids, never a half-written one). ``by_row``: ``ids``
    holds the file's own rows in the file's order (one partition's part file)."""
    import os

    import pyarrow as pa
    import pyarrow.parquet as pq

    from gpurisk.io import temp_path
    path = Path(path)
    src = pq.ParquetFile(path)
    try:
        table = pa.RecordBatch.from_pandas(ids.reset_index(drop=True), preserve_index=False)
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise bad_input(f"{{arg:--id|ids}} column(s) {', '.join(map(repr, ids.columns))} cannot be stored in "
                       f"Parquet ({type(exc).__name__}: mixed value types?)") from None
    schema = pa.schema(list(table.schema) + list(src.schema_arrow))
    tmp = temp_path(path)
    done = 0
    try:
        with pq.ParquetWriter(str(tmp), schema) as out:
            for batch in src.iter_batches():
                rows = batch.column("row")
                if by_row:     # the ids are in the file's own row order
                    rows = pa.array(np.arange(done, done + len(rows), dtype=np.int64))
                    done += len(rows)
                picked = table.take(rows)
                out.write_batch(pa.record_batch(list(picked.columns) + list(batch.columns),
                                                schema=schema))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
