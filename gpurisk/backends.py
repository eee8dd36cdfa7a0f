"""Which backend counts: a name from ``--backend``, ``gpurisk.config.backend`` or ``GPURISK_BACKEND``.

Names: ``pandas`` (in-process default), ``dask``, ``cudf``, ``dask-cudf``, ``auto``.
"""
from __future__ import annotations

import logging
import os

from .errors import BadInput, UnsupportedBackend

log = logging.getLogger("gpurisk.backends")
BACKENDS = ("auto", "pandas", "dask", "cudf", "dask-cudf")
ENV_BACKEND = "GPURISK_BACKEND"


class _Config:
    """Process-wide settings; ``gpurisk.config.backend = "dask"``."""

    def __init__(self):
        self.backend: str | None = None


config = _Config()


def resolve_backend(name: str | None = None) -> str:
    name = name or config.backend or os.environ.get(ENV_BACKEND) or "pandas"
    name = name.strip().lower()
    if name not in BACKENDS:
        raise BadInput(f"backend {name!r} is not one of {', '.join(BACKENDS)}")
    if name == "auto":
        return "pandas"
    return name


def dispatch_build(name: str, sample, keys, **kw):
    raise UnsupportedBackend(f"backend {name!r} is not available in this build")
