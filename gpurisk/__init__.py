"""gpurisk: disclosure risk of microdata releases.

Public API::

    import gpurisk
    result = gpurisk.assess(frame, keys=["age", "sex"], fraction=0.01)
    result.measures["theta_hat"].value
    result.to_dict()
"""
__version__ = "0.1.0"

from gpurisk.errors import (BadInput, GpuriskError, GpuriskWarning, PluginError,  # noqa: E402
                            UnsupportedBackend)
from gpurisk import xp  # noqa: E402  (array namespaces: gpurisk.xp.to_host, gpurisk.xp.scalar)
from gpurisk.hookspecs import hookimpl  # noqa: E402
from gpurisk.measure import Context, Measure, Result  # noqa: E402
from gpurisk.options import Option  # noqa: E402
from gpurisk.freq.table import FreqTable  # noqa: E402
from gpurisk.freq.engine import build_table  # noqa: E402
from gpurisk.workflows.assess import Assessment, assess  # noqa: E402
from gpurisk.core.evaluate import run_measures  # noqa: E402  (the one measure runner)
from gpurisk.core.settings import Design, Reading, Run  # noqa: E402  (settings shared by every command)
from gpurisk.backends import config  # noqa: E402
from gpurisk.io import read_table  # noqa: E402
from gpurisk.validation import Validation, validate  # noqa: E402
from gpurisk.io import write_results  # noqa: E402
from gpurisk.freq.within import CellValueCounts, cell_value_counts  # noqa: E402

__all__ = ["assess", "Assessment", "build_table", "run_measures", "FreqTable", "Measure", "Result",
           "Context", "hookimpl", "BadInput", "GpuriskError", "PluginError", "UnsupportedBackend",
           "config", "read_table", "__version__", "validate", "Validation", "Option"]
__all__ += ["write_results", "cell_value_counts", "CellValueCounts"]
from gpurisk.scan import ScanResult, read_scan, scan  # noqa: E402
__all__ += ["scan", "ScanResult", "read_scan"]
from gpurisk.inputs import Inputs  # noqa: E402
from gpurisk.models.record_risk import RecordRisk, record_risk  # noqa: E402
from gpurisk.workflows import design  # noqa: E402  (gpurisk.design.stratified works after `import gpurisk`)
from gpurisk import dis  # noqa: E402  (gpurisk.dis.dis, gpurisk.dis.run_dis)
__all__ += ["Inputs", "record_risk", "RecordRisk", "design", "dis", "xp", "GpuriskWarning"]
from gpurisk.workflows.suda import SudaResult, suda  # noqa: E402  (SUDA / DIS-SUDA per record)
__all__ += ["suda", "SudaResult", "Design", "Run", "Reading"]
