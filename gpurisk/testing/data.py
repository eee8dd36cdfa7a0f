"""Where the project's real microdata (``shared/data``, not shipped in the package) is found.

Tests, benchmarks and plugin tests all look in the same places, in this order: the directory named
by ``$GPURISK_SHARED_DATA``; ``shared/data`` beside each given repository root (the layout CI uses:
the clone with ``../shared`` next to it); ``/work/shared/data``. A candidate counts when it holds the
data's ``README.md``.
"""
from __future__ import annotations

import os
from pathlib import Path

#: the last place looked, after the environment variable and the repository roots
FALLBACK = Path("/work/shared/data")


def find_shared_data(*repo_roots) -> Path | None:
    """The real-data directory, or None where there is none (see the module docstring)."""
    env = os.environ.get("GPURISK_SHARED_DATA")
    cands = ([Path(env)] if env else []) + [Path(r).parent / "shared" / "data" for r in repo_roots]
    for cand in cands + [FALLBACK]:
        if (cand / "README.md").exists():
            return cand
    return None
