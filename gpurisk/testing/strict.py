"""A strict array namespace that behaves like CuPy where it matters, on a machine without a GPU.

Arrays of :data:`xp` hold numpy arrays but refuse every implicit conversion to the host, as CuPy
does for ``np.asarray`` and more strictly than CuPy for the conversions that CuPy allows but that
copy from the device each time (a sync per call on a GPU):

- ``np.asarray(a)``, ``np.<function>(a)`` and numpy ufuncs on ``a`` (``__array__``,
  ``__array_function__``, ``__array_ufunc__``): TypeError;
- ``float(a)``, ``int(a)``, ``bool(a)``, ``a.item()``, ``a.tolist()``, iterating over ``a``,
  ``len()`` of a 0-d array: TypeError;
- mixing with numpy arrays in operators, or indexing with a numpy array: TypeError (CuPy refuses
  these too);
- only the functions CuPy has are offered (:data:`FUNCTIONS`); ``xp.repeat`` refuses array repeats and
  ``xp.sort``/``xp.argsort`` any ``kind`` but "stable", as CuPy does.

Reductions return 0-d arrays, as on CuPy. The one way back to the host is
:func:`gpurisk.xp.to_host` / :func:`gpurisk.xp.scalar` (``a.get()``, CuPy's method). Arrays marked
read-only (:func:`gpurisk.xp.readonly`) refuse writes, like numpy's.

Used by the tests and by the conformance kit (:func:`gpurisk.testing.check_measure`): a measure that
runs on a table of this namespace makes no host round-trip and calls nothing CuPy lacks.
"""
from __future__ import annotations

import operator
from typing import Any

import numpy as np

from gpurisk.backends.registry import Backend

__all__ = ["StrictArray", "StrictNamespace", "xp", "StrictError", "strict_table", "StrictBackend",
           "STRICT"]


class StrictError(TypeError):
    """An implicit host conversion or a numpy-only call on a (simulated) device array."""


def _refuse(what: str):
    raise StrictError(f"{what} of a device array: on a GPU this copies to the host or fails; "
                      "use the table's namespace (table.xp) and gpurisk.xp.to_host/scalar where a "
                      "host value is really needed")


def _unwrap(v, where: str = "argument"):
    if isinstance(v, StrictArray):
        return v._a
    if isinstance(v, np.ndarray):
        raise StrictError(f"a numpy array passed as {where} of a device array operation "
                          "(CuPy refuses host arrays here; move it with xp.asarray first)")
    if isinstance(v, (list, tuple)):
        return type(v)(_unwrap(x, where) for x in v)
    return v


def _wrap(v):
    if isinstance(v, np.ndarray):
        return StrictArray(v)
    if isinstance(v, np.generic):
        return StrictArray(np.asarray(v))
    if isinstance(v, tuple):
        return tuple(_wrap(x) for x in v)
    if isinstance(v, list):
        return [_wrap(x) for x in v]
    return v


def _index(key):
    if isinstance(key, tuple):
        return tuple(_index(k) for k in key)
    if isinstance(key, StrictArray):
        return key._a
    if isinstance(key, np.ndarray):
        raise StrictError("a device array indexed with a numpy array (move it with xp.asarray)")
    if isinstance(key, list):
        raise StrictError("a device array indexed with a list (move it with xp.asarray)")
    return key


class StrictArray:
    """A numpy array posing as a device array (see the module docstring)."""

    __slots__ = ("_a",)
    __hash__ = None  # type: ignore[assignment]

    def __init__(self, a: np.ndarray):
        object.__setattr__(self, "_a", a)

    # --- metadata (host-side on CuPy too) ----------------------------------------------------
    shape = property(lambda self: self._a.shape)
    ndim = property(lambda self: self._a.ndim)
    dtype = property(lambda self: self._a.dtype)
    size = property(lambda self: self._a.size)
    nbytes = property(lambda self: self._a.nbytes)
    itemsize = property(lambda self: self._a.itemsize)
    T = property(lambda self: StrictArray(self._a.T))

    def __array_namespace__(self, api_version=None):
        return xp

    def __repr__(self) -> str:
        return f"StrictArray(shape={self.shape}, dtype={self.dtype})"

    # --- the sanctioned way back (CuPy's name) -------------------------------------------------
    def get(self) -> np.ndarray:
        return self._a.copy()

    def __gpurisk_readonly__(self) -> "StrictArray":
        self._a.flags.writeable = False
        return self

    # --- refused conversions -----------------------------------------------------------------
    def __array__(self, *a, **k):
        _refuse("np.asarray()")

    def __array_function__(self, func, types, args, kwargs):
        _refuse(f"numpy.{getattr(func, '__name__', func)}()")

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        _refuse(f"numpy ufunc {ufunc.__name__}")

    def __float__(self):
        _refuse("float()")

    def __int__(self):
        _refuse("int()")

    def __index__(self):
        _refuse("int() (as an index)")

    def __complex__(self):
        _refuse("complex()")

    def __bool__(self):
        _refuse("bool() (an `if` or `and`)")

    def __iter__(self):
        _refuse("iteration")

    def __len__(self):
        if self._a.ndim == 0:
            _refuse("len()")
        return self._a.shape[0]

    def item(self, *a):
        _refuse(".item()")

    def tolist(self):
        _refuse(".tolist()")

    def __setattr__(self, name, value):
        raise AttributeError(f"cannot set {name!r} on a device array")

    # --- indexing ------------------------------------------------------------------------------
    def __getitem__(self, key):
        return _wrap(self._a[_index(key)])

    def __setitem__(self, key, value):
        self._a[_index(key)] = _unwrap(value, "the assigned value")

    # --- methods CuPy's ndarray has ------------------------------------------------------------
    def astype(self, dtype, copy=True, **kw):
        return StrictArray(self._a.astype(dtype, copy=copy, **kw))

    def sort(self, axis=-1, kind=None):
        _check_kind(kind)
        self._a.sort(axis=axis)

    def argsort(self, axis=-1, kind=None):
        _check_kind(kind)
        return StrictArray(self._a.argsort(axis=axis, kind="stable"))

    def fill(self, value):
        self._a.fill(_unwrap(value))


def _method(name):
    def m(self, *args, **kwargs):
        return _wrap(getattr(self._a, name)(*_unwrap(args), **{k: _unwrap(v) for k, v in kwargs.items()}))
    m.__name__ = name
    return m


def _no_initial(name):
    def m(self, *args, **kwargs):
        if "initial" in kwargs or "where" in kwargs:
            raise StrictError(f".{name}(initial=/where=): CuPy's ndarray.{name} takes neither")
        return _wrap(getattr(self._a, name)(*_unwrap(args), **kwargs))
    m.__name__ = name
    return m


for _name in ("sum", "prod", "mean", "std", "var", "any", "all", "cumsum", "cumprod",
              "argmax", "argmin", "nonzero", "ravel", "reshape", "copy", "view", "transpose",
              "squeeze", "take", "clip", "round", "dot", "repeat", "flatten", "swapaxes", "conj"):
    setattr(StrictArray, _name, _method(_name))
StrictArray.min = _no_initial("min")
StrictArray.max = _no_initial("max")


def _binop(op, reflected=False):
    def f(self, other):
        if isinstance(other, StrictArray):
            o = other._a
        elif isinstance(other, np.ndarray):
            raise StrictError("a device array combined with a numpy array in an operator "
                              "(CuPy refuses this; move it with xp.asarray)")
        elif isinstance(other, (bool, int, float, complex, np.generic)):
            o = other
        else:
            return NotImplemented
        return _wrap(op(o, self._a) if reflected else op(self._a, o))
    return f


def _iop(op):
    def f(self, other):
        if isinstance(other, np.ndarray):
            raise StrictError("a device array combined with a numpy array in an operator")
        op(self._a, _unwrap(other))
        return self
    return f


for _n, _op in (("add", operator.add), ("sub", operator.sub), ("mul", operator.mul),
                ("truediv", operator.truediv), ("floordiv", operator.floordiv),
                ("mod", operator.mod), ("pow", operator.pow), ("and", operator.and_),
                ("or", operator.or_), ("xor", operator.xor), ("lshift", operator.lshift),
                ("rshift", operator.rshift), ("matmul", operator.matmul)):
    setattr(StrictArray, f"__{_n}__", _binop(_op))
    setattr(StrictArray, f"__r{_n}__", _binop(_op, reflected=True))
    setattr(StrictArray, f"__i{_n}__", _iop(getattr(operator, f"i{_n}")))
for _n, _op in (("lt", operator.lt), ("le", operator.le), ("gt", operator.gt),
                ("ge", operator.ge), ("eq", operator.eq), ("ne", operator.ne)):
    setattr(StrictArray, f"__{_n}__", _binop(_op))
for _n, _op in (("neg", operator.neg), ("pos", operator.pos), ("invert", operator.invert),
                ("abs", operator.abs)):
    setattr(StrictArray, f"__{_n}__", (lambda op: lambda self: StrictArray(op(self._a)))(_op))


def _check_kind(kind):
    if kind not in (None, "stable"):
        raise StrictError(f"sort kind={kind!r}: CuPy sorts stably and accepts no other kind")


#: numpy functions that CuPy also has, offered by the strict namespace
FUNCTIONS = frozenset("""
abs absolute add all any arange argmax argmin argsort argwhere array asarray ascontiguousarray
bincount bitwise_and bitwise_or bitwise_xor broadcast_to ceil clip concatenate copy count_nonzero
cumprod cumsum diff divide dot einsum empty empty_like equal exp expm1 flatnonzero floor
floor_divide full full_like greater greater_equal isfinite isin isinf isnan left_shift less
less_equal lexsort log log1p log2 logaddexp logical_and logical_not logical_or matmul max maximum
mean min minimum mod multiply negative nonzero not_equal ones ones_like power prod ravel
remainder repeat reshape right_shift round searchsorted sign sort sqrt square stack subtract sum
take unique unravel_index ravel_multi_index where zeros zeros_like cumsum outer tile
""".split())

_CONSTANTS = {"newaxis": None, "pi": np.pi, "e": np.e, "inf": np.inf, "nan": np.nan}
_DTYPES = ("bool_", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
           "float16", "float32", "float64", "complex64", "complex128", "intp", "dtype", "finfo",
           "iinfo", "integer", "floating", "signedinteger", "unsignedinteger", "number")


class StrictNamespace:
    """The namespace of :class:`StrictArray` (``table.xp`` of a strict table)."""

    __name__ = "gpurisk.testing.strict.xp"
    bool = np.bool_

    def __getattr__(self, name: str) -> Any:
        if name in _CONSTANTS:
            return _CONSTANTS[name]
        if name in _DTYPES:
            return getattr(np, name)
        if name not in FUNCTIONS:
            raise StrictError(f"xp.{name} is not offered by the strict namespace (CuPy lacks it, "
                              "or it converts to the host)")
        fn = getattr(np, name)

        def call(*args, **kwargs):
            if name in ("sort", "argsort"):
                _check_kind(kwargs.pop("kind", None))
                if name == "argsort":
                    kwargs["kind"] = "stable"
            if name == "repeat":
                r = args[1] if len(args) > 1 else kwargs.get("repeats")
                if isinstance(r, (StrictArray, np.ndarray)):
                    raise StrictError("xp.repeat with an array of repeats: CuPy takes an int, a "
                                      "list or a tuple")
            if name in ("asarray", "array", "ascontiguousarray"):   # host to device: allowed
                a = args[0]
                a = a._a if isinstance(a, StrictArray) else a
                return StrictArray(fn(a, *args[1:], **kwargs))
            return _wrap(fn(*_unwrap(args), **{k: _unwrap(v) for k, v in kwargs.items()}))
        call.__name__ = name
        return call

    def __repr__(self) -> str:
        return "<strict array namespace (CuPy-like, no host conversion)>"


#: the strict namespace
xp = StrictNamespace()


def strict_table(sample, keys, population=None, sample_flag=None, weights=None,
                 missing: str = "category"):
    """The FreqTable of pandas frames counted by the one-piece engine as the cuDF backend runs it,
    with its arrays in the strict namespace: the plan comes from the distinct values and the keys are
    encoded against it on the host, as cuDF's would be on the device, then moved with
    ``xp.asarray``; counting, merging, the f <= F check and each record's cell run in the strict
    namespace."""
    from gpurisk.freq.piece import build_table_piece
    return build_table_piece(sample, list(keys), population=population, sample_flag=sample_flag,
                             weights=weights, missing=missing, xp=xp, backend="strict",
                             plan_first=True)


class StrictBackend(Backend):
    """The strict namespace as a backend for the conformance kit (not offered by ``--backend``):
    the cuDF backend's count on the CPU, its arrays in :data:`xp`. A measure failing on it has
    broken the GPU path's array discipline, which the kit reports instead of raising."""

    name = "strict"
    listed = False
    stand_in = True

    def count(self, sample, keys, population=None, sample_flag=None, weights=None,
              missing="category"):
        return strict_table(sample, keys, population=population, sample_flag=sample_flag,
                            weights=weights, missing=missing)

    def namespace(self):
        return xp


#: the strict backend, registered lazily as ``strict`` by :mod:`gpurisk.backends.registry`
STRICT = StrictBackend()
