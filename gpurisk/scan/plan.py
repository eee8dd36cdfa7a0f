"""Which key combinations a scan evaluates.

Three ways to name them, combinable:

- every subset of a pool of key variables with ``min_size <= size <= max_size`` (pool order kept
  inside each combination; subsets listed by size, then lexicographically in pool order);
- named scenarios from a TOML file (``[scenarios]`` table: ``name = ["age", "sex"]`` or
  ``[scenarios.name] keys = [...]``), keys in the order written;
- a fundamental key plus each other pool variable in turn (Elliot's "additional impact" analysis):
  the fundamental key itself, then fundamental + v for every pool variable v outside it.

Each combination has a unique ``combo`` id (the scenario name for scenarios, else the key names joined
by commas) and a seed derived from the scan's seed and its key *set*, so its random numbers never
depend on the order in which combinations run.
"""
from __future__ import annotations

import hashlib
import itertools
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

from gpurisk.core.messages import bad_input
from gpurisk.errors import BadInput


#: without --max-size, a pool may have at most this many subsets
MAX_UNBOUNDED = 10_000

#: a plan of more combinations is refused before any is listed (``max_combinations`` /
#: ``--max-combinations`` raise it)
MAX_COMBINATIONS = 1_000_000

#: bytes one combination holds while a scan runs, measured on adult (8 keys, 20 measures,
#: ``bench/bench_plan_size.py``): its entry in the plan (~250 B), its row of the result frame
#: (~2 KB, also read back from ``-o``) and, without ``-o``, its row kept until the end (~11 KB)
PLAN_BYTES, FRAME_BYTES, ROW_BYTES = 250, 2_100, 11_000
#: seconds one combination takes at the least (adult, 20 measures: 1 to 5 ms)
SECONDS_PER_COMBINATION = 0.001


def count_subsets(n: int, max_size: int, min_size: int = 1) -> int:
    """Subsets of an ``n``-variable pool with ``min_size <= size <= max_size`` (math.comb; no
    subset is listed)."""
    hi = min(int(max_size), n)
    if hi < min_size:
        return 0
    if min_size <= 1 and hi == n:
        return 2 ** n - 1
    return sum(math.comb(n, r) for r in range(int(min_size), hi + 1))


def _size(nbytes: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB", "PB"):
        if nbytes < 1000 or unit == "PB":
            return f"{nbytes:.0f} {unit}" if unit == "B" else f"{nbytes:.1f} {unit}"
        nbytes /= 1000
    return ""  # pragma: no cover


def _duration(seconds: float) -> str:
    for unit, length in (("years", 365 * 86400), ("days", 86400), ("hours", 3600), ("minutes", 60)):
        if seconds >= length:
            return f"{seconds / length:,.1f} {unit}"
    return f"{seconds:.0f} s"


def _count(n: int) -> str:
    return f"{n:,}" if n < 10 ** 15 else f"about 10^{math.floor(math.log10(n))}"


def check_plan_size(count: int, what: str, limit: int | None = None,
                    to_disk: bool = False, hint: str | None = "{arg:--max-combinations N|max_combinations=N}") -> None:
    """BadInput (one line: the count, the memory and time it would take, the limit and how to raise
    it) for a plan of more than ``limit`` combinations (default :data:`MAX_COMBINATIONS`)."""
    limit = MAX_COMBINATIONS if limit is None else limit
    if count <= limit:
        return
    per = PLAN_BYTES + FRAME_BYTES + (0 if to_disk else ROW_BYTES)
    raise_it = f", or raise it with {hint}" if hint else ""
    raise bad_input(f"the plan has {_count(count)} combinations ({what}): about "
                   f"{_size(count * per)} of memory and at least "
                   f"{_duration(count * SECONDS_PER_COMBINATION)} at 1 ms a combination; the limit "
                   f"is {limit:,} (give a smaller {{arg:--max-size|max_size}} or fewer {{arg:--keys|keys}}{raise_it})")


def check_max_combinations(value) -> int:
    """``max_combinations`` as a positive int (BadInput otherwise)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value \
            or value < 1 or int(value) != value:
        raise bad_input(f"{{arg:--max-combinations|max_combinations}} must be a whole number >= 1, got {value!r}")
    return int(value)


@dataclass(frozen=True)
class Combination:
    keys: tuple[str, ...]
    combo: str
    scenario: str | None = None

    @property
    def size(self) -> int:
        return len(self.keys)


def combo_seed(seed: int, keys: Iterable[str]) -> int:
    """A 63-bit seed from the scan seed and the combination's key set (order-free)."""
    text = f"{int(seed)}\x1f" + "\x1f".join(sorted(keys))
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little") >> 1


def _check_names(keys: Sequence[str], what: str) -> tuple[str, ...]:
    from gpurisk.inputs import key_list       # one check of key names for every command
    return tuple(key_list(keys, what))


def subsets(pool: Sequence[str], max_size: int | None = None, min_size: int = 1,
            limit: int | None = None, to_disk: bool = False,
            hint: str | None = "{arg:--max-combinations N|max_combinations=N}", already: int = 0) -> list[Combination]:
    """Every subset of ``pool`` (see the module docstring), counted first: a plan of more than
    ``limit`` combinations with the ``already`` planned is refused before any subset is listed."""
    pool = _check_names(pool, "{arg:--keys|keys}")
    if max_size is None and 2 ** len(pool) - 1 > MAX_UNBOUNDED:
        raise bad_input(f"{{arg:--keys|keys}} names {len(pool)} variables, "
                        f"{_count(2 ** len(pool) - 1)} subsets in all; give {{arg:--max-size|max_size}}")
    max_size = len(pool) if max_size is None else int(max_size)
    if min_size < 1:
        raise bad_input(f"{{arg:--min-size|min_size}} must be at least 1, got {min_size}")
    if max_size < min_size:
        raise bad_input(f"{{arg:--max-size {max_size}|max_size={max_size}}} is below "
                        f"{{arg:--min-size {min_size}|min_size={min_size}}}")
    max_size = min(max_size, len(pool))
    more = f" and {already:,} others" if already else ""
    check_plan_size(already + count_subsets(len(pool), max_size, min_size),   # before any is listed
                    f"every subset of {len(pool)} {{arg:--keys|keys}} of size {min_size} to {max_size}{more}",
                    limit, to_disk, hint)
    out = []
    for r in range(int(min_size), max_size + 1):
        for c in itertools.combinations(pool, r):
            out.append(Combination(c, ",".join(c)))
    return out


def plus_each(fundamental: Sequence[str], pool: Sequence[str]) -> list[Combination]:
    fund = _check_names(fundamental, "{arg:--fundamental|fundamental}")
    pool = tuple(pool or ())
    out = [Combination(fund, ",".join(fund), "fundamental")]
    for v in pool:
        if v in fund:
            continue
        keys = fund + (v,)
        out.append(Combination(keys, ",".join(keys), f"+{v}"))
    if len(out) == 1:
        raise bad_input("{arg:--plus-each|plus_each=True}: the pool ({arg:--keys|keys}) has no variable outside "
                        "the fundamental key")
    return out


def load_scenarios(path) -> list[Combination]:
    """Named scenarios from a TOML file (see the module docstring)."""
    p = Path(path)
    if not p.exists():
        raise BadInput(f"scenario file {str(path)!r} does not exist")
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        try:
            import tomli as tomllib  # type: ignore[no-redef]
        except ModuleNotFoundError:
            raise BadInput("reading a TOML scenario file needs Python 3.11 or the tomli package") from None
    try:
        doc = tomllib.loads(p.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise BadInput(f"scenario file {p}: not valid TOML ({exc})") from None
    table = doc.get("scenarios")
    if not isinstance(table, dict) or not table:
        raise BadInput(f"scenario file {p}: no [scenarios] table (write name = [\"key\", ...] under it)")
    out = []
    for name, spec in table.items():
        keys = spec.get("keys") if isinstance(spec, dict) else spec
        if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
            raise BadInput(f"scenario file {p}: scenario {name!r} needs a list of key names")
        keys = _check_names(keys, f"scenario {name!r}")
        out.append(Combination(keys, str(name), str(name)))
    return out


def build_plan(pool: Sequence[str] | None = None, max_size: int | None = None, min_size: int = 1,
               scenarios=None, fundamental: Sequence[str] | None = None,
               plus_each_flag: bool = False, max_combinations: int | None = None,
               to_disk: bool = False, hint: str | None = "{arg:--max-combinations N|max_combinations=N}") -> list[Combination]:
    """The combinations of one scan, in their reporting order, with unique ``combo`` ids. A plan of
    more than ``max_combinations`` (default :data:`MAX_COMBINATIONS`) is refused, counted before
    any subset is listed (:func:`check_plan_size`; ``to_disk``: the rows go to ``-o``)."""
    limit = MAX_COMBINATIONS if max_combinations is None else check_max_combinations(max_combinations)
    combos: list[Combination] = []
    if fundamental:
        if not plus_each_flag:
            raise bad_input("{arg:--fundamental|fundamental} needs {arg:--plus-each|plus_each=True} (evaluate the key "
                        "plus each other variable)")
        combos += plus_each(fundamental, pool or ())
    elif plus_each_flag:
        raise bad_input("{arg:--plus-each|plus_each=True} needs {arg:--fundamental KEYS|fundamental=KEYS}")
    if scenarios is not None:
        combos += scenarios if isinstance(scenarios, list) else load_scenarios(scenarios)
    check_plan_size(len(combos), "scenarios and the fundamental key plus each", limit, to_disk, hint)
    if pool and (max_size is not None or not combos):
        combos += subsets(pool, max_size, min_size, limit=limit, to_disk=to_disk, hint=hint,
                          already=len(combos))
    if not combos:
        raise bad_input("nothing to scan: give {arg:--keys|keys} (with {arg:--max-size|max_size}), "
                        "{arg:--scenarios|scenarios} or {arg:--fundamental|fundamental} with "
                        "{arg:--plus-each|plus_each}")
    seen: dict[str, Combination] = {}
    out = []
    for c in combos:
        if c.combo in seen:
            if seen[c.combo].keys == c.keys:
                continue
            raise BadInput(f"combination id {c.combo!r} names two different key sets")
        seen[c.combo] = c
        out.append(c)
    return out


def root_keys(pool: Sequence[str] | None, combos: Sequence[Combination]) -> list[str]:
    """Every key any combination uses: pool order first, then first appearance."""
    used = dict.fromkeys(k for c in combos for k in c.keys)
    out = [k for k in (pool or ()) if k in used]
    out += [k for k in used if k not in out]
    return out
