"""gpurisk-classic: the measures sdcMicro, mu-Argus and ARX users rely on, as a gpurisk plugin.

Measures (registered through the entry point ``gpurisk_classic.plugin``): ``indiv_risk``,
``household_risk``, ``k_anonymity``, ``l_diversity``. The functions below give the per-cell and
per-record values behind them.
"""
from .household import HouseholdRisk, household_of_records
from .individual import IndividualRisk, estimated_population, record_risk
from .kanonymity import KAnonymity
from .ldiversity import LDiversity, cell_diversity
from .risk import cell_risk

__version__ = "0.1.0"
__all__ = ["cell_risk", "record_risk", "estimated_population", "household_of_records",
           "cell_diversity", "IndividualRisk", "HouseholdRisk", "KAnonymity", "LDiversity"]
