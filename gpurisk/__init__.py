"""gpurisk: disclosure risk of microdata releases.

Public API::

    import gpurisk
    result = gpurisk.assess(frame, keys=["age", "sex"], fraction=0.01)
    result.measures["theta_hat"].value
    result.to_dict()
"""
__version__ = "0.1.0"

from .errors import BadInput, GpuriskError, PluginError, UnsupportedBackend  # noqa: E402
from . import xp  # noqa: E402  (array namespaces: gpurisk.xp.to_host, gpurisk.xp.scalar)
from .hookspecs import hookimpl  # noqa: E402
from .measure import Context, Measure, Result  # noqa: E402
from .options import Option  # noqa: E402
from .freq.table import FreqTable  # noqa: E402
from .freq.engine import build_table  # noqa: E402
from .assess import Assessment, assess, run_measures  # noqa: E402
from .backends import config  # noqa: E402
from .io import read_table  # noqa: E402
from .validation import Validation, validate  # noqa: E402
from .io import write_results  # noqa: E402
from .freq.within import CellValueCounts, cell_value_counts  # noqa: E402

__all__ = ["assess", "Assessment", "build_table", "run_measures", "FreqTable", "Measure", "Result",
           "Context", "hookimpl", "BadInput", "GpuriskError", "PluginError", "UnsupportedBackend",
           "config", "read_table", "__version__", "validate", "Validation", "Option"]
__all__ += ["write_results", "cell_value_counts", "CellValueCounts"]
from .scan import ScanResult, read_scan, scan  # noqa: E402
__all__ += ["scan", "ScanResult", "read_scan"]
