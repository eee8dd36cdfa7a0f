"""Where the real data lives (the plugin ships none): $GPURISK_SHARED_DATA, else the monorepo's
``../shared/data`` next to the repository root, else /work/shared/data."""
from __future__ import annotations

from pathlib import Path

import pytest

from gpurisk.testing.data import find_shared_data

REPO_ROOT = Path(__file__).resolve().parents[3]
DATA = find_shared_data(REPO_ROOT) or REPO_ROOT.parent / "shared" / "data"
#: ARX's TestRiskMetrics data: all nine columns of arx/adult.csv are keys
ADULT_KEYS = ["sex", "age", "race", "marital-status", "education", "native-country", "workclass",
              "occupation", "salary-class"]
FARS_KEYS = ["iage", "irace", "ideathmon", "ideathday", "isex", "ihispanic", "istatenum", "iinjury"]


def data_path(rel: str) -> Path:
    p = DATA / rel
    if not p.exists():
        pytest.skip(f"real data file {p} is not present")
    return p
