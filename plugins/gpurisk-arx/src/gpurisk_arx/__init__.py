"""gpurisk-arx: ARX's re-identification risk models as a gpurisk plugin.

Measures (registered through the entry point ``gpurisk_arx.plugin``): ``prosecutor``, ``journalist``,
``marketer`` and ``pop_uniqueness``. The fits behind ``pop_uniqueness`` are in
:mod:`gpurisk_arx.uniqueness` (``estimate(sample(Z, N), model)``).
"""
from .population import PopUniqueness
from .sample_risk import Journalist, Marketer, Prosecutor
from .uniqueness import Fit, estimate, sample

__version__ = "0.1.0"
__all__ = ["Prosecutor", "Journalist", "Marketer", "PopUniqueness", "Fit", "estimate", "sample"]
