"""gpurisk.core.kept: made once per key, the least recently used forgotten first."""
from __future__ import annotations

import threading
from collections import OrderedDict

from gpurisk.core.kept import kept


def test_made_once_and_the_least_recently_used_forgotten():
    store, lock, made = OrderedDict(), threading.Lock(), []
    for k in (1, 2, 1, 3, 1):
        assert kept(store, lock, k, lambda k=k: made.append(k) or 10 * k, 2) == 10 * k
    assert made == [1, 2, 3]                 # 1 was asked for again before 3 came: 2 went
    assert list(store) == [3, 1]


def test_by_size_the_newest_is_kept_even_alone_over_the_limit():
    store, lock = OrderedDict(), threading.Lock()
    for k, n in (("a", 4), ("b", 4), ("c", 3)):
        kept(store, lock, k, lambda n=n: "x" * n, 8, size=len)
    assert list(store) == ["b", "c"]         # 4 + 4 + 3 > 8: the oldest went
    kept(store, lock, "d", lambda: "x" * 20, 8, size=len)
    assert list(store) == ["d"]
