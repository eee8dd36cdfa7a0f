"""The one locator of the real data used by tests, benchmarks and the plugin's tests."""
from __future__ import annotations

from gpurisk.testing import data as locator
from gpurisk.testing.data import find_shared_data


def _data_dir(base):
    d = base / "shared" / "data"
    d.mkdir(parents=True)
    (d / "README.md").write_text("data\n")
    return d


def test_environment_first_then_beside_the_repository_then_fallback(tmp_path, monkeypatch):
    monkeypatch.setattr(locator, "FALLBACK", tmp_path / "nowhere")
    monkeypatch.delenv("GPURISK_SHARED_DATA", raising=False)    # a user's setting is not the test's
    repo = tmp_path / "clone" / "gpurisk"
    repo.mkdir(parents=True)
    assert find_shared_data(repo) is None                       # nothing anywhere
    beside = _data_dir(tmp_path / "clone")
    assert find_shared_data(repo) == beside                     # ../shared/data of the clone
    env = _data_dir(tmp_path / "elsewhere")
    monkeypatch.setenv("GPURISK_SHARED_DATA", str(env))
    assert find_shared_data(repo) == env                        # the variable wins
    monkeypatch.setenv("GPURISK_SHARED_DATA", str(tmp_path / "empty"))
    assert find_shared_data(repo) == beside                     # a directory without README is skipped
