"""Models fitted to the counts: the two-way log-linear model by IPF (:mod:`.loglinear`) and the
record-level risk under intruder search methods built on it (:mod:`.record_model`; its workflow is
:mod:`gpurisk.workflows.record_risk`), SUDA (:mod:`.suda`), the complex designs (:mod:`.design`)."""
