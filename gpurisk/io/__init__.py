"""Reading the files offices hold, and writing results that cannot destroy them.

CSV (:mod:`~gpurisk.io.text`: separator, encoding, any compression, exact integers), Parquet and the
statistical packages' files (:mod:`~gpurisk.io.read`, :mod:`~gpurisk.io.formats`), lazily for Dask
(:mod:`~gpurisk.io.lazy`); paths, globs, pipes and ``example:adult`` (:mod:`~gpurisk.io.paths`);
outputs checked before the work (:mod:`~gpurisk.io.outputs`), written atomically
(:mod:`~gpurisk.io.atomic`) under a lock (:mod:`~gpurisk.io.lock`). Every failure is one
:class:`~gpurisk.BadInput` line naming the file and the problem. This module only re-exports.
"""
from gpurisk.io.paths import (COMPRESSIONS, EXAMPLES, GLOB_CHARS, _SPOOLED, _spooled,  # noqa: F401
                              compression_of, example_path, expand_input, input_paths, is_parquet,
                              remember_inputs, resolve_path)
from gpurisk.io.text import (SEPARATORS, check_encoding, check_row_lengths,  # noqa: F401
                             check_sep, csv_header, detect_separator, read_csv)
from gpurisk.io.read import (_parquet_names, _read_parquet, read_table,  # noqa: F401
                             write_results)
from gpurisk.io.lazy import (CSV_BLOCKSIZE, PARQUET_PARTITION_BYTES,  # noqa: F401
                             PARQUET_PARTITION_ROWS, read_lazy, row_groups_per_partition)
from gpurisk.io.outputs import (check_output_dataset, check_output_file,  # noqa: F401
                                check_target, clean_stale)
from gpurisk.io.atomic import (atomic_path, temp_path, write_bytes_atomic,  # noqa: F401
                               write_frame_atomic, write_text_atomic)


def check_output(path, inputs=()):
    """(path, kind) of a results file (.json, .csv, .csv.gz, .parquet) checked before the work;
    see :func:`gpurisk.io.formats.check_output`."""
    from gpurisk.io.formats import check_output as check
    return check(path, inputs)
