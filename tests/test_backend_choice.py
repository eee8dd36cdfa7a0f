"""Which backend counts: names, config, environment, the input's type, and ``auto``'s GPU detection
(simulated CuPy/cuDF modules: ``import cudf`` can succeed where no device is usable)."""
from __future__ import annotations

import logging
import sys
import types

import pandas as pd
import pytest

import gpurisk
from gpurisk import backends
from gpurisk.backends import gpu_devices, require, resolve_backend
from gpurisk.errors import BadInput, UnsupportedBackend


@pytest.fixture(autouse=True)
def _clean(monkeypatch):
    monkeypatch.delenv("GPURISK_BACKEND", raising=False)
    monkeypatch.setattr(backends.config, "backend", None)


def _fake_cupy(count=None, error=None):
    rt = types.SimpleNamespace()

    def getDeviceCount():
        if error:
            raise error
        return count
    rt.getDeviceCount = getDeviceCount
    mod = types.ModuleType("cupy")
    mod.cuda = types.SimpleNamespace(runtime=rt)
    return mod


def test_names_config_env(monkeypatch):
    assert resolve_backend() == "pandas"
    assert resolve_backend(" Dask ") == "dask"
    with pytest.raises(BadInput, match="'spark' is not one of auto, pandas, dask, cudf, dask-cudf"):
        resolve_backend("spark")
    monkeypatch.setenv("GPURISK_BACKEND", "dask")
    assert resolve_backend() == "dask"
    gpurisk.config.backend = "pandas"          # config before the environment
    assert resolve_backend() == "pandas"
    assert resolve_backend("dask") == "dask"   # the argument before both


def test_input_type_decides_when_nothing_is_set():
    dd = pytest.importorskip("dask.dataframe")
    frame = pd.DataFrame({"a": [1, 2]})
    assert resolve_backend(None, frame) == "pandas"
    assert resolve_backend(None, dd.from_pandas(frame, npartitions=1)) == "dask"
    assert resolve_backend("auto", dd.from_pandas(frame, npartitions=1)) == "dask"


def test_auto_without_cupy(monkeypatch, caplog):
    monkeypatch.setitem(sys.modules, "cupy", None)   # import cupy raises ImportError
    n, why = gpu_devices()
    assert n == 0 and why.startswith("cupy is not importable")
    with caplog.at_level(logging.INFO, logger="gpurisk.backends"):
        assert resolve_backend("auto", pd.DataFrame()) == "pandas"
    assert "cudf and dask-cudf not taken: cupy is not importable" in caplog.text


def test_auto_with_cudf_importable_but_no_device(monkeypatch, caplog):
    monkeypatch.setitem(sys.modules, "cupy", _fake_cupy(error=RuntimeError("cudaErrorNoDevice")))
    monkeypatch.setitem(sys.modules, "cudf", types.ModuleType("cudf"))
    with caplog.at_level(logging.INFO, logger="gpurisk.backends"):
        assert resolve_backend("auto") == "pandas"
    assert "no usable CUDA device (RuntimeError: cudaErrorNoDevice)" in caplog.text
    with pytest.raises(UnsupportedBackend, match="backend 'cudf' needs a CUDA GPU: no usable"):
        require("cudf")
    monkeypatch.setitem(sys.modules, "cupy", _fake_cupy(count=0))
    assert gpu_devices() == (0, "no CUDA device")


def test_auto_takes_a_usable_gpu(monkeypatch, caplog):
    monkeypatch.setitem(sys.modules, "cupy", _fake_cupy(count=1))
    monkeypatch.setitem(sys.modules, "cudf", None)
    with caplog.at_level(logging.INFO, logger="gpurisk.backends"):
        assert resolve_backend("auto") == "pandas"
    assert "cudf not taken: cudf is not importable" in caplog.text
    monkeypatch.setitem(sys.modules, "cudf", types.ModuleType("cudf"))
    assert resolve_backend("auto") == "cudf"
    monkeypatch.setitem(sys.modules, "cupy", _fake_cupy(count=2))
    monkeypatch.setitem(sys.modules, "dask_cudf", None)
    assert resolve_backend("auto") == "cudf"       # two GPUs, but no dask-cudf
    monkeypatch.setitem(sys.modules, "dask_cudf", types.ModuleType("dask_cudf"))
    monkeypatch.setitem(sys.modules, "dask_cuda", types.ModuleType("dask_cuda"))
    assert resolve_backend("auto") == "dask-cudf"


def test_explicit_gpu_backend_without_gpu_is_one_line(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", None)
    with pytest.raises(UnsupportedBackend) as e:
        gpurisk.build_table(pd.DataFrame({"a": [1]}), ["a"], backend="dask-cudf")
    assert "\n" not in str(e.value) and "needs a CUDA GPU" in str(e.value)
