"""Record-level risk under its first path: the model is :mod:`gpurisk.models.record_model`, the
workflow :mod:`gpurisk.workflows.record_risk`."""
from gpurisk.models.record_model import (DEFAULT_THRESHOLDS, RecordRisk, RiskModel,  # noqa: F401
                                         build_model, cached_fit, method_summary,
                                         resolve_population_size, selected_records, summarize,
                                         table3_rows, write_records, write_risk_part)
from gpurisk.workflows.record_risk import record_risk, record_risk_with  # noqa: F401

__all__ = ["record_risk", "record_risk_with", "RecordRisk", "RiskModel", "build_model",
           "cached_fit", "method_summary", "resolve_population_size", "selected_records",
           "summarize", "table3_rows", "write_records", "write_risk_part", "DEFAULT_THRESHOLDS"]
