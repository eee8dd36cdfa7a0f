"""Where the real data lives (the plugin ships none): $GPURISK_SHARED_DATA, else the monorepo's
``../shared/data`` next to the repository root, else /work/shared/data."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[3]


def _find_data() -> Path:
    env = os.environ.get("GPURISK_SHARED_DATA")
    for cand in ([Path(env)] if env else []) + [REPO_ROOT.parent / "shared" / "data",
                                                 Path("/work/shared/data")]:
        if (cand / "README.md").exists():
            return cand
    return REPO_ROOT.parent / "shared" / "data"


DATA = _find_data()


def data_path(rel: str) -> Path:
    p = DATA / rel
    if not p.exists():
        pytest.skip(f"real data file {p} is not present")
    return p
