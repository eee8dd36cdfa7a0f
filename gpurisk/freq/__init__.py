"""The counting engine: encode keys, form cell ids, count, locate records."""
from gpurisk.freq.engine import build_table
from gpurisk.freq.table import FreqTable
from gpurisk.freq.sources import summarize, write_record_counts
from gpurisk.freq.summary import CellSummary

__all__ = ["build_table", "FreqTable", "write_record_counts", "summarize", "CellSummary"]
