"""The module the entry point names: it registers the measures with gpurisk.

``pyproject.toml``::

    [project.entry-points.gpurisk]
    classic = "gpurisk_classic.plugin"
"""
from gpurisk import hookimpl

from .household import HouseholdRisk
from .individual import IndividualRisk
from .kanonymity import KAnonymity
from .ldiversity import LDiversity

MEASURES = [IndividualRisk, HouseholdRisk, KAnonymity, LDiversity]


@hookimpl
def gpurisk_register_measures():
    return list(MEASURES)
