"""Values made once per process and looked up by key, the least recently used forgotten first.

A scan's combinations, or a worker's buckets, ask for the same costly thing many times (a pair's
one-dimensional search, a batch's lattice plan, a key's drawn cells); the caller keeps one
``OrderedDict`` and one lock for it at module level and asks :func:`kept` for each value.
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, Callable, Hashable


def kept(store: OrderedDict, lock: threading.Lock, key: Hashable, make: Callable[[], Any],
         limit: int, size: Callable[[Any], int] | None = None) -> Any:
    """``store[key]`` (now the most recently used), or ``make()`` kept there. Then the least
    recently used are forgotten while there are more than ``limit`` values, or, with ``size``,
    while their sizes add up to more than ``limit`` (the newest is always kept). ``make`` runs
    outside the lock: two threads may both make a missing value, and either is kept (they are
    the same)."""
    with lock:
        if key in store:
            store.move_to_end(key)
            return store[key]
    value = make()
    with lock:
        store[key] = value
        if size is None:
            while len(store) > limit:
                store.popitem(last=False)
        else:
            total = sum(size(v) for v in store.values())
            while total > limit and len(store) > 1:
                total -= size(store.popitem(last=False)[1])
    return value
