"""The counting engine: encode keys, form cell ids, count, locate records."""
from .engine import build_table
from .table import FreqTable
from .records import write_record_counts
from .summary import CellSummary, summarize

__all__ = ["build_table", "FreqTable", "write_record_counts", "summarize", "CellSummary"]
