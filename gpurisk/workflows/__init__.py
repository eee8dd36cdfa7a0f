"""What the commands do, one module per workflow: assess (one key combination, every measure) and
design (θ̂ under complex designs). The scan (:mod:`gpurisk.scan`), validation
(:mod:`gpurisk.validation`), record-level risk (:mod:`gpurisk.models.record_risk`) and data
intrusion simulation (:mod:`gpurisk.dis`) have packages of their own. Each reads, checks and counts
through :class:`gpurisk.inputs.Inputs`."""
