"""The counting engine: encode keys, form cell ids, count, locate records."""
from .engine import build_table
from .table import FreqTable

__all__ = ["build_table", "FreqTable"]
