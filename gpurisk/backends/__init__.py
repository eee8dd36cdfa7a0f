"""Backends: where and how records are counted (pandas, Dask, cuDF, dask-cuda, and any registered).

- :mod:`gpurisk.backends.registry`: one :class:`Backend` object per backend, registered by name
  (lazily for the built-in ones: ``import gpurisk`` imports no GPU library);
- :mod:`gpurisk.backends.choose`: which backend counts (``--backend``, ``gpurisk.config``,
  ``GPURISK_BACKEND``, the input's type, ``auto``) and whether it can run here;
- :mod:`gpurisk.backends.cpu`, :mod:`gpurisk.backends.gpu`: the built-in backends;
- :mod:`gpurisk.backends.cluster`: the Dask clusters the distributed backends count on.
"""
from gpurisk.backends.registry import (AUTO, DEFAULT, Backend, backend_of, choices, get_backend,  # noqa: F401
                                       is_auto, is_registered, names, register, register_lazy, unregister)
from gpurisk.backends.choose import (BACKENDS, ENV_BACKEND, ENV_MEMORY_LIMIT, ENV_SCHEDULER,  # noqa: F401
                                     ENV_WORKERS, _missing_modules, config, data_kind, gpu_devices,
                                     missing_modules, require, resolve_backend)
from gpurisk.backends.cluster import (ENV_STALL, MIN_WORKER_MEMORY, STALL_SECONDS, _LOCAL,  # noqa: F401
                                      _close_local, _local_client, _stall_seconds, dask_client,
                                      memory_limit_bytes, worker_memory_note)

__all__ = ["Backend", "AUTO", "DEFAULT", "register", "register_lazy", "unregister", "names", "choices",
           "get_backend", "backend_of", "is_auto", "is_registered", "BACKENDS", "config", "resolve_backend",
           "require", "data_kind", "gpu_devices", "missing_modules", "dask_client",
           "memory_limit_bytes", "worker_memory_note", "MIN_WORKER_MEMORY", "ENV_BACKEND",
           "ENV_SCHEDULER", "ENV_WORKERS", "ENV_MEMORY_LIMIT", "ENV_STALL", "STALL_SECONDS"]
