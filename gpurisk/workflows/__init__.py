"""What the commands do, one module per command: assess, scan, compare, validate, protect, dis,
design, record_risk, suda. Each has a ``*_with`` form on the settings objects
(:mod:`gpurisk.core.settings`: ``Design``, ``Run``, ``Reading``), which the command line calls, and a
keyword convenience (``gpurisk.scan(frame, keys, fraction=...)``) that builds them. Each reads,
checks and counts through one :class:`gpurisk.inputs.Inputs`; the algorithms stay in their packages
(:mod:`gpurisk.scan`, :mod:`gpurisk.protect`, :mod:`gpurisk.validation`, :mod:`gpurisk.dis`,
:mod:`gpurisk.models`)."""
