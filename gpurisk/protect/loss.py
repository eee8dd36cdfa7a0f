"""What an information-loss measure of ``protect`` is (SPEC §11).

A loss is a class registered through the ``gpurisk_register_losses`` hook (see
:mod:`gpurisk.hookspecs`), as measures are. The search calls :meth:`Loss.compute` once per node of
the generalisation lattice with a :class:`Node`: the node's level of each key, the keys' hierarchies
on the data (:class:`gpurisk.protect.hierarchy.KeyLevels`: category counts and the maps of every
level) and, on demand, the node's table over all keys (a roll-up of the finest table; ask for it
only if the loss needs the equivalence classes: set ``reads = "table"``). A loss must be 0 at the
bottom node and never fall when a key is generalised further.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Mapping, Sequence


@dataclass
class Node:
    """One node of the lattice, as a loss sees it."""

    levels: tuple[int, ...]
    #: each key's levels on the data, in the order of ``levels``
    keys: Sequence[Any]
    #: sample records
    n: int
    #: key values set to missing by local suppression, per key name (none yet: zeros)
    suppressed: Mapping[str, int] = field(default_factory=dict)
    #: records with at least one suppressed value
    suppressed_records: int = 0
    _table: Callable[[], Any] | None = field(default=None, repr=False)
    _suppressed_counts: Callable[[], Mapping[str, Any]] | None = field(default=None, repr=False)

    @property
    def heights(self) -> tuple[int, ...]:
        return tuple(k.height for k in self.keys)

    def suppressed_counts(self, key: str):
        """The suppressed records' count in each original category of ``key`` (numpy), or None
        when nothing is suppressed."""
        if not self.suppressed_records or self._suppressed_counts is None:
            return None
        return self._suppressed_counts()[key]

    @property
    def table(self):
        """The node's FreqTable over every key (built on first use): the equivalence classes of
        the released records that are not suppressed."""
        if self._table is None:
            raise ValueError("this node has no table")
        return self._table()


class Loss:
    """Base class of every information-loss measure, built-in or third-party."""

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    reference: ClassVar[str] = ""
    #: "levels" (the node's levels and the keys' category counts only) or "table" (the node's
    #: equivalence classes, i.e. its table over every key)
    reads: ClassVar[str] = "levels"

    def compute(self, node: Node) -> float:  # pragma: no cover - abstract
        raise NotImplementedError

    @classmethod
    def describe(cls) -> dict[str, Any]:
        return {"name": cls.name, "description": cls.description, "reference": cls.reference,
                "reads": cls.reads}
