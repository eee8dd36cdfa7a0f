"""The backend registry: one :class:`Backend` object per way of counting records, looked up by name.

A backend says what it is (``name``; ``distributed``: it counts on a Dask cluster and its tables keep
no record cells; ``gpu``: its arrays live on a GPU; ``listed``: offered by ``--backend``), whether it
can run here (:meth:`Backend.unavailable`, with the reason), how it reads a file (:meth:`Backend.read`),
how it counts (:meth:`Backend.count`, the engine's dispatch), how arrays move to and from it
(:meth:`Backend.namespace`, :meth:`Backend.to_device`, :meth:`Backend.to_host`) and, when
distributed, the Dask client it counts on and the passes that keep the cells on the workers.

Backends are registered by object (:func:`register`) or by the dotted path of one
(:func:`register_lazy`, as dask's ``Dispatch.register_lazy`` defers importing a library): the module
is imported the first time the name is looked up. The built-in backends are registered lazily here,
so importing :mod:`gpurisk` imports none of them, and the GPU ones never import cuDF, CuPy or
dask-cuda until they count. Nothing outside this package compares backend names: code asks the
object (``inputs.backend_obj.distributed``, ``.gpu``).
"""
from __future__ import annotations

import importlib

from gpurisk.errors import BadInput, UnsupportedBackend

#: the name that lets the input and the machine decide (:func:`gpurisk.backends.resolve_backend`)
AUTO = "auto"
#: the in-process backend: used when nothing else is asked for, and the reference others are checked against
DEFAULT = "pandas"


class Backend:
    """One backend. Subclass it, set the class attributes, override what differs, and register an
    instance (see ``docs/backends.md``, "Adding a backend"). The defaults are an in-process backend
    that reads with pandas and counts with the one-piece engine."""

    #: the name given to ``--backend``, ``gpurisk.config.backend`` or ``backend=``
    name: str = ""
    #: offered to users (``--backend``, named in messages); False for the testing stand-ins
    listed: bool = True
    #: counts on a Dask cluster: records stay on the workers, the table keeps no record cells, and
    #: summaries (:meth:`summary`) can be reduced there without gathering the cells
    distributed: bool = False
    #: counts on a GPU: the table's arrays are device arrays (:meth:`namespace`)
    gpu: bool = False
    #: a CPU stand-in for a GPU backend (the strict namespace): a measure failing there has broken
    #: the array discipline, which the conformance kit reports instead of raising
    stand_in: bool = False

    def __repr__(self) -> str:
        return f"<gpurisk backend {self.name!r}>"

    # --- can it run here ----------------------------------------------------------------------
    def unavailable(self) -> str | None:
        """Why this backend cannot run here (one line), or None when it can. Never raises."""
        return None

    def available(self) -> bool:
        return self.unavailable() is None

    def require(self) -> None:
        """Raise :class:`UnsupportedBackend` (one line, the reason) when it cannot run here."""
        why = self.unavailable()
        if why:
            raise UnsupportedBackend(why)

    def owns(self, data) -> bool:
        """Whether ``data`` is one of this backend's collections (then, with no backend named, the
        input decides: it counts here)."""
        return False

    # --- reading and counting ------------------------------------------------------------------
    def read(self, source, *, columns=None, sep=None, encoding="utf-8", text_columns=()):
        """The frame of the file(s) at ``source`` this backend counts: in memory by default."""
        from gpurisk.io import read_table
        return read_table(source, sep=sep, columns=columns, encoding=encoding)

    def count(self, sample, keys, population=None, sample_flag=None, weights=None,
              missing="category"):
        """The :class:`~gpurisk.FreqTable` of ``sample`` over ``keys``: the engine's dispatch
        (:func:`gpurisk.freq.engine.build_table` calls it once the backend is resolved and required)."""
        raise NotImplementedError(f"backend {self.name!r} does not count")

    # --- arrays ---------------------------------------------------------------------------------
    def namespace(self):
        """The array namespace of the tables this backend builds (numpy unless on a device)."""
        import numpy
        return numpy

    def to_device(self, a):
        """The host array ``a`` in this backend's namespace."""
        from gpurisk.xp import to_device
        return to_device(a, self.namespace())

    def to_host(self, a):
        """A numpy array of ``a`` (a copy from the device, or ``a`` itself)."""
        from gpurisk.xp import to_host
        return to_host(a)

    def output_frame(self, rows, carry=()):
        """(an empty frame to write record-level columns into, ``rows`` where the carried columns
        are read from): a pandas frame by default."""
        import pandas as pd
        return pd.DataFrame(), rows

    # --- distributed backends only ----------------------------------------------------------------
    def client(self, **kw):
        """A context manager giving the ``distributed.Client`` this backend counts on (see
        :func:`gpurisk.backends.dask_client`)."""
        raise UnsupportedBackend(f"backend {self.name!r} does not count on a cluster")

    def _not_distributed(self, what: str):
        return UnsupportedBackend(f"{what} runs on a distributed backend, not {self.name!r}")

    def summary(self, sample, keys, **kw):
        """(plan, bucket summaries[, ...]) with the cells kept on the workers."""
        raise self._not_distributed("a summary kept on the workers")

    def write_records(self, source, keys, out_dir, **kw) -> dict:
        """Each record's cell counts written partition by partition."""
        raise self._not_distributed("writing record counts by partition")

    def record_pass(self, sample, table, columns, **kw) -> dict:
        """Each record's values of the cells' ``columns``, looked up on the workers."""
        raise self._not_distributed("a record pass on the workers")

    def record_codes(self, sample, table, **kw) -> list:
        """Each record's codes (the table's plan), encoded on the workers and brought back."""
        raise self._not_distributed("record codes taken on the workers")


#: name -> Backend, or name -> "module:attribute" not imported yet
_REGISTRY: dict = {}
#: names registered lazily and whether each is listed (known without importing it)
_LISTED: dict[str, bool] = {}


def register(backend: Backend, replace: bool = False) -> Backend:
    """Add ``backend`` under ``backend.name``; a name taken already is refused unless ``replace``."""
    name = backend.name
    if not name or name != name.strip().lower() or name == AUTO:
        raise ValueError(f"backend name {name!r}: give a lower-case name other than {AUTO!r}")
    if name in _REGISTRY and not replace:
        raise ValueError(f"backend {name!r} is registered already")
    _REGISTRY[name] = backend
    _LISTED[name] = bool(backend.listed)
    return backend


def register_lazy(name: str, path: str, listed: bool = True) -> None:
    """Register the backend object at ``path`` (``"package.module:ATTRIBUTE"``) under ``name``,
    importing the module only when the name is first looked up."""
    if name in _REGISTRY:
        raise ValueError(f"backend {name!r} is registered already")
    _REGISTRY[name] = path
    _LISTED[name] = listed


def unregister(name: str) -> None:
    """Remove ``name`` (a test's toy backend)."""
    _REGISTRY.pop(name, None)
    _LISTED.pop(name, None)


def names(listed_only: bool = True) -> tuple[str, ...]:
    """Registered names in registration order (those offered to users, or all)."""
    return tuple(n for n in _REGISTRY if _LISTED[n] or not listed_only)


def choices() -> tuple[str, ...]:
    """What ``--backend`` accepts: ``auto`` and the listed names."""
    return (AUTO, *names())


def is_registered(name) -> bool:
    return name in _REGISTRY


def is_auto(name) -> bool:
    """No backend named (None, ``""``) or ``auto``: the caller's rule decides."""
    return not name or name == AUTO


def get_backend(name: str) -> Backend:
    """The backend registered as ``name`` (its module imported on first use)."""
    entry = _REGISTRY.get(name)
    if entry is None:
        raise BadInput(f"backend {name!r} is not one of {', '.join(choices())}")
    if isinstance(entry, str):
        module, _, attr = entry.partition(":")
        obj = getattr(importlib.import_module(module), attr)
        if obj.name != name:
            raise ValueError(f"{entry} is backend {obj.name!r}, registered as {name!r}")
        _REGISTRY[name] = entry = obj
    return entry


def backend_of(data) -> Backend | None:
    """The listed backend whose collection ``data`` is (a Dask, cuDF or pandas frame), or None
    for paths and other objects."""
    for name in names():
        b = get_backend(name)
        if b.owns(data):
            return b
    return None


# the built-in backends, imported when first asked for: the GPU ones import RAPIDS only to count
register_lazy("pandas", "gpurisk.backends.cpu:PANDAS")
register_lazy("dask", "gpurisk.backends.cpu:DASK")
register_lazy("cudf", "gpurisk.backends.gpu:CUDF")
register_lazy("dask-cudf", "gpurisk.backends.gpu:DASK_CUDF")
register_lazy("strict", "gpurisk.testing.strict:STRICT", listed=False)
