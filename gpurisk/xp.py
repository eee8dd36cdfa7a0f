"""Array namespaces: the one module that tells numpy from CuPy, and the only one that moves data to
the host.

Counts live in the array namespace of the backend that made them: numpy for pandas and Dask, CuPy
for cuDF and dask-cuda (``table.xp``). Code above the engine — measures, plugins, the scan — calls
``table.xp`` functions on the table's arrays and never converts them implicitly: on a GPU,
``np.asarray(cupy_array)`` is a TypeError, and ``float(x)``, ``int(x)``, ``if x:`` or iterating over
``x`` each copy from the device. When a number or a small array is really needed on the host (a
summary, a message), it is asked for here, by name: :func:`to_host`, :func:`scalar`.

The namespace of an array is found by ``array_api_compat.array_namespace`` (numpy and CuPy are
returned as themselves, not wrapped; any other array that declares ``__array_namespace__`` — the
strict namespace of :mod:`gpurisk.testing.strict` — gets its own). The tests run the engine, every
built-in measure and the bundled plugin under that strict namespace, which refuses every implicit
host conversion, so a host round-trip fails on a machine without a GPU.
"""
from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["namespace", "to_host", "scalar", "to_device", "frame_namespace", "is_cudf",
           "is_pandas", "readonly"]


def namespace(*arrays) -> Any:
    """The array namespace of ``arrays`` (numpy, cupy, ...); numpy when none is an array.

    None, Python scalars and other objects without a shape (lists: host data) are skipped; arrays
    of two namespaces are an error.
    """
    arrs = [a for a in arrays if hasattr(a, "shape") and not isinstance(a, np.generic)]
    if not arrs:
        return np
    import array_api_compat
    return array_api_compat.array_namespace(*arrs, use_compat=False)


def to_host(a) -> np.ndarray | None:
    """A numpy copy (or the array itself, if already numpy) of ``a``; None stays None.

    The one sanctioned device-to-host transfer: CuPy's ``.get()``, or the same method of any other
    device namespace's arrays.
    """
    if a is None or isinstance(a, np.ndarray):
        return a
    if type(a).__module__.split(".")[0] in ("pandas", "cudf"):     # a Series or an Index
        return a.to_numpy()
    if hasattr(a, "shape") and callable(getattr(a, "get", None)):   # CuPy (or strict) array
        return a.get()
    return np.asarray(a)        # host objects: numpy scalars, lists, ranges


def scalar(a):
    """A 0-d array (or a size-1 array, or a number) as a Python int, float or bool."""
    if isinstance(a, (bool, int, float)):
        return a
    if isinstance(a, np.generic):          # a numpy reduction's result: already on the host
        return a.item()
    h = to_host(a)
    if h.size != 1:
        raise ValueError(f"scalar() of an array of {h.size} elements")
    return h.reshape(()).item()


def to_device(a, xp):
    """The host array ``a`` in namespace ``xp`` (a copy to the GPU for CuPy; no copy for numpy)."""
    if xp is np:
        return np.asarray(a)
    return xp.asarray(a)


def readonly(a):
    """``a``, marked read-only where the namespace can: a numpy array is marked itself (no copy; whoever
    passed it can no longer write into it either, so a table built on it cannot change under its
    cached summaries). CuPy has no read-only arrays: there the array is returned as it is."""
    if isinstance(a, np.ndarray):
        a.flags.writeable = False
        return a
    mark = getattr(a, "__gpurisk_readonly__", None)
    return mark() if mark is not None else a


def is_cudf(obj) -> bool:
    """A cuDF DataFrame, Series or Index (by module, so cudf is never imported to ask)."""
    return type(obj).__module__.split(".")[0] == "cudf"


def is_pandas(obj) -> bool:
    """A pandas DataFrame, Series or Index (by module, as :func:`is_cudf`)."""
    return type(obj).__module__.split(".")[0] == "pandas"


def frame_namespace(frame):
    """The array namespace of a frame's columns: cupy for cuDF, else numpy."""
    if is_cudf(frame):  # pragma: no cover - needs a GPU
        import cupy
        return cupy
    return np
