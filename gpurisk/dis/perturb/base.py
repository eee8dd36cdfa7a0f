"""What a perturbation is, how ``--perturb NAME:opt=value,...`` is parsed, and shared kernels.

A perturbation (record swapping, PRAM, ...) is a class registered through the
``gpurisk_register_perturbations`` hook (see :mod:`gpurisk.hookspecs`), like a measure. It is built
from its options (``Perturbation(**options)``, strings from the command line are coerced by the
class) and turns the per-record key codes of a file into the codes of a perturbed release:

- ``codes``: one integer array of length n per key variable (codes index ``categories[v]``),
- ``extra``: codes of the other columns the perturbation reads (``columns()``: pairing variables,
  a higher region), keyed by column name,
- ``rng``: a ``numpy.random.Generator``; every random choice comes from it (runs are seeded).

:meth:`Perturbation.perturb_batch` returns ``size`` independent perturbed files at once, as one
``(size, n)`` array per key: the built-ins draw all of them in the same array operations. The
default implementation calls :meth:`Perturbation.perturb` ``size`` times (a loop over replicates,
never over records), so a plugin may implement only ``perturb``.
"""
from __future__ import annotations

import json
from typing import Any, ClassVar, Mapping, Sequence

import numpy as np

from gpurisk.errors import BadInput
from gpurisk.core.messages import bad_input


class Perturbation:
    """Base class of every perturbation, built-in or third-party."""

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    reference: ClassVar[str] = ""
    #: options and their defaults; ``None`` means "required" or "not set"
    options: ClassVar[Mapping[str, Any]] = {}

    def __init__(self, **options: Any) -> None:
        unknown = sorted(set(options) - set(self.options))
        if unknown:
            raise BadInput(f"perturbation {self.name!r}: unknown option(s) {', '.join(unknown)}; "
                           f"options: {', '.join(self.options) or '(none)'}")
        self.opts = {**self.options, **options}

    # --- what the host asks ------------------------------------------------------------------
    def columns(self, keys: Sequence[str]) -> list[str]:
        """Columns besides the keys that :meth:`perturb` reads (their codes arrive in ``extra``)."""
        return []

    def check(self, keys: Sequence[str], categories: Sequence[Sequence], codes=None) -> None:
        """Raise :class:`BadInput` when the options do not fit these keys (called once, with the
        records' codes when the host has them)."""

    def perturb(self, codes: list[np.ndarray], categories: list[list], rng: np.random.Generator,
                *, keys: Sequence[str], extra: Mapping[str, np.ndarray] | None = None
                ) -> list[np.ndarray]:
        """One perturbed file: a list of code arrays, one per key, each of length n."""
        return [a[0] for a in self.perturb_batch(codes, categories, rng, keys=keys, extra=extra,
                                                 size=1)]

    def perturb_batch(self, codes: list[np.ndarray], categories: list[list],
                      rng: np.random.Generator, *, keys: Sequence[str],
                      extra: Mapping[str, np.ndarray] | None = None, size: int = 1
                      ) -> list[np.ndarray]:
        """``size`` independent perturbed files: one ``(size, n)`` array per key.

        ``codes`` are 1-d (one file, perturbed ``size`` times) or ``(size, n)`` (replicate b
        starts from row b, when perturbations are chained).
        """
        if type(self).perturb is Perturbation.perturb:
            raise NotImplementedError(f"{type(self).__name__} implements neither perturb nor "
                                      "perturb_batch")
        reps = [self.perturb([c[b] if np.ndim(c) == 2 else c for c in codes], categories, rng,
                             keys=keys, extra=extra) for b in range(size)]
        return [np.stack([r[v] for r in reps]) for v in range(len(codes))]

    @classmethod
    def describe(cls) -> dict[str, Any]:
        return {"name": cls.name, "description": cls.description, "reference": cls.reference,
                "options": dict(cls.options)}

    def __repr__(self) -> str:
        set_ = {k: v for k, v in self.opts.items() if v is not None}
        return f"{self.name}:" + ",".join(f"{k}={v}" for k, v in set_.items())


# --- parsing -----------------------------------------------------------------------------------
def parse_spec(spec: str) -> tuple[str, dict[str, str]]:
    """``"swap:fraction=0.1,geo=state,pairing=age+sex"`` -> ("swap", {"fraction": "0.1", ...})."""
    spec = spec.strip()
    if not spec:
        raise bad_input("empty {arg:--perturb|perturb} specification")
    name, _, rest = spec.partition(":")
    name = name.strip()
    opts: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in rest.split(","))):
        if "=" not in part:
            raise bad_input(f"{{arg:--perturb|perturb}} {spec!r}: {part!r} is not OPTION=VALUE")
        k, v = part.split("=", 1)
        if k.strip() in opts:
            raise bad_input(f"{{arg:--perturb|perturb}} {spec!r}: option {k.strip()!r} given twice")
        opts[k.strip()] = v.strip()
    return name, opts


# --- option coercion (command-line strings or Python values) -----------------------------------
def as_float(name: str, opt: str, value, lo: float, hi: float, lo_open=False) -> float:
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise BadInput(f"perturbation {name!r}: {opt}={value!r} is not a number") from None
    if not (lo < x if lo_open else lo <= x) or not x <= hi:
        raise BadInput(f"perturbation {name!r}: {opt}={value!r} is outside "
                       f"{'(' if lo_open else '['}{lo:g}, {hi:g}]")
    return x


def as_list(value) -> list[str]:
    """``"age+sex"`` or ``["age", "sex"]`` -> ["age", "sex"]; None / "" / "none" -> []."""
    if value is None:
        return []
    if isinstance(value, str):
        if value.strip().lower() in ("", "none", "random"):
            return []
        return [v.strip() for v in value.replace(";", "+").split("+") if v.strip()]
    return [str(v) for v in value]


def as_bool(name: str, opt: str, value) -> bool:
    if isinstance(value, bool):
        return value
    s = str(value).strip().lower()
    if s in ("1", "true", "yes", "on"):
        return True
    if s in ("0", "false", "no", "off"):
        return False
    raise BadInput(f"perturbation {name!r}: {opt}={value!r} is not true/false")


def load_json_option(name: str, opt: str, value):
    """A JSON value given inline, as a path to a .json file, or already parsed."""
    if not isinstance(value, str):
        return value
    s = value.strip()
    if s.startswith(("{", "[")):
        try:
            return json.loads(s)
        except json.JSONDecodeError as exc:
            raise BadInput(f"perturbation {name!r}: {opt} is not valid JSON ({exc.msg})") from None
    from pathlib import Path
    p = Path(s)
    if not p.exists():
        raise BadInput(f"perturbation {name!r}: {opt}={s!r} is neither JSON nor an existing file")
    try:
        return json.loads(p.read_text())
    except json.JSONDecodeError as exc:
        raise BadInput(f"perturbation {name!r}: {p} is not valid JSON ({exc.msg} at line "
                       f"{exc.lineno})") from None


# --- kernels -----------------------------------------------------------------------------------
def sample_rows(cum: np.ndarray, codes: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Draw a new code for each record from row ``codes`` of a transition matrix.

    ``cum`` is the row-wise cumulative sum of the K x K matrix (last column exactly 1); ``u`` are
    uniforms in [0, 1) of the same shape as ``codes``. One ``searchsorted`` on the rows laid end to
    end, each row shifted by its index: row c occupies (c, c + 1], so c + u falls in row c and the
    first entry above it is the inverse-CDF draw. No loop over records or categories.
    """
    K = cum.shape[0]
    flat = (cum + np.arange(K, dtype=np.float64)[:, None]).ravel()
    c = codes.astype(np.int64, copy=False)
    pos = np.searchsorted(flat, c + u, side="right")
    return np.minimum(pos - c * K, K - 1)


def stable_order(keys: np.ndarray) -> np.ndarray:
    """Stable argsort of non-negative integer keys; radix sorts of 16-bit digits when they fit
    in 32 bits (numpy's stable sort is a radix sort for 16-bit types)."""
    if keys.size == 0:
        return np.zeros(0, np.int64)
    mx = int(keys.max())
    if mx < 1 << 16:
        return np.argsort(keys.astype(np.uint16), kind="stable")
    if mx < 1 << 32:
        o = np.argsort((keys & 0xFFFF).astype(np.uint16), kind="stable")
        return o[np.argsort((keys[o] >> 16).astype(np.uint16), kind="stable")]
    return np.argsort(keys, kind="stable")


def group_rank(group: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(order, rank): records in a random order within ascending groups, and each one's rank
    within its group. A random permutation followed by a stable sort on the group: every order
    within a group is equally likely. ``group`` holds non-negative integers."""
    perm = rng.permutation(group.size)
    order = perm[stable_order(group[perm])]
    g = group[order]
    if not g.size:
        return order, np.zeros(0, np.int64)
    start = np.concatenate(([True], g[1:] != g[:-1]))
    first = np.maximum.accumulate(np.where(start, np.arange(g.size), 0))
    rank = np.empty(g.size, np.int64)
    rank[order] = np.arange(g.size) - first
    return order, rank


def combine_codes(arrays: Sequence[np.ndarray], cards: Sequence[int]) -> np.ndarray:
    """Order-preserving int64 code of several code arrays (any one shape), with headroom below
    2**62 (:func:`gpurisk.freq.cellid.combined_ids`)."""
    from gpurisk.freq.cellid import combined_ids
    return combined_ids([np.asarray(a) for a in arrays], [int(k) for k in cards], limit=2**62)
