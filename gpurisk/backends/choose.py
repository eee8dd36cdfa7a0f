"""Which backend counts: a name from ``--backend``, ``gpurisk.config.backend`` or ``GPURISK_BACKEND``.

Names: ``pandas`` (in-process default), ``dask`` (pandas partitions on a Dask cluster), ``cudf`` (one
GPU), ``dask-cudf`` (cuDF partitions on a dask-cuda cluster), any other registered backend
(:mod:`gpurisk.backends.registry`) and ``auto``. With no name set anywhere, the input decides (a
Dask collection counts on ``dask``/``dask-cudf``, a cuDF frame on ``cudf``, anything else on
``pandas``). ``auto`` also takes a GPU when one is really usable: ``import cudf`` succeeds on machines
without a GPU, so a device is detected by CuPy's device count, never by an import; each backend not
taken is logged (logger ``gpurisk.backends``) with the reason.
"""
from __future__ import annotations

import importlib
import logging
import os

from gpurisk.backends.registry import AUTO, DEFAULT, backend_of, choices, get_backend, names
from gpurisk.errors import BadInput

log = logging.getLogger("gpurisk.backends")
#: the built-in names ``--backend`` takes (:func:`gpurisk.backends.choices` adds registered ones)
BACKENDS = ("auto", "pandas", "dask", "cudf", "dask-cudf")
ENV_BACKEND = "GPURISK_BACKEND"
ENV_SCHEDULER = "GPURISK_SCHEDULER"
ENV_WORKERS = "GPURISK_WORKERS"
ENV_MEMORY_LIMIT = "GPURISK_MEMORY_LIMIT"


class _Config:
    """Process-wide settings; ``gpurisk.config.backend = "dask"``.

    ``scheduler``: address of an existing Dask scheduler; ``workers``: worker processes of a local
    cluster; ``memory_limit``: memory limit per local worker (Dask's syntax, e.g. ``"2GiB"``).
    """

    def __init__(self):
        self.backend: str | None = None
        self.scheduler: str | None = None
        self.workers: int | None = None
        self.memory_limit: str | int | None = None


config = _Config()


# --- what is usable here --------------------------------------------------------------------------

def gpu_devices() -> tuple[int, str]:
    """(number of usable CUDA devices, why) -- never raises."""
    try:
        import cupy
    except Exception as exc:
        return 0, f"cupy is not importable ({type(exc).__name__}: {exc})"
    try:
        n = int(cupy.cuda.runtime.getDeviceCount())
    except Exception as exc:
        return 0, f"no usable CUDA device ({type(exc).__name__}: {exc})"
    if n < 1:
        return 0, "no CUDA device"
    return n, f"{n} CUDA device(s)"


def missing_modules(*mods: str) -> str | None:
    """The first of ``mods`` that cannot be imported, with why; None when all can."""
    for m in mods:
        try:
            importlib.import_module(m)
        except Exception as exc:
            return f"{m} is not importable ({type(exc).__name__}: {exc})"
    return None


_missing_modules = missing_modules   # the old private name


def data_kind(data) -> str | None:
    """The backend a collection belongs to, or None for paths and other objects."""
    b = backend_of(data)
    return None if b is None else b.name


def _auto(data) -> str:
    kind = backend_of(data)
    if kind is not None and (kind.distributed or kind.gpu):
        log.info("auto: the input is a %s collection: backend %s", kind.name, kind.name)
        return kind.name
    n, why = gpu_devices()
    if n == 0:
        log.info("auto: cudf and dask-cudf not taken: %s; backend pandas", why)
        return DEFAULT
    miss = missing_modules("cudf")
    if miss:
        log.info("auto: %s but cudf not taken: %s; backend pandas", why, miss)
        return DEFAULT
    if n > 1:
        miss = missing_modules("dask_cudf", "dask_cuda")
        if miss is None:
            log.info("auto: %s: backend dask-cudf", why)
            return "dask-cudf"
        log.info("auto: %s but dask-cudf not taken: %s", why, miss)
    log.info("auto: %s: backend cudf", why)
    return "cudf"


def resolve_backend(name: str | None = None, data=None) -> str:
    """The backend to count ``data`` on: ``name``, else the config, the environment, the input."""
    name = name or config.backend or os.environ.get(ENV_BACKEND)
    if not name:
        kind = backend_of(data)
        return DEFAULT if kind is None else kind.name
    name = name.strip().lower()
    if name == AUTO:
        return _auto(data)
    if name not in names():
        raise BadInput(f"backend {name!r} is not one of {', '.join(choices())}")
    return name


def require(name: str) -> None:
    """Raise :class:`UnsupportedBackend` (one line, the reason) when ``name`` cannot run here."""
    get_backend(name).require()
