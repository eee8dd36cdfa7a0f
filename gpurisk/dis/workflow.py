"""``gpurisk dis``'s workflow under its first path: it lives in :mod:`gpurisk.workflows.dis`."""
from gpurisk.workflows.dis import dis, dis_with  # noqa: F401

__all__ = ["dis", "dis_with"]
