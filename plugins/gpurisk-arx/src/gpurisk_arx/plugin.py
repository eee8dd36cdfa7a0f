"""The module the entry point names: it registers the measures with gpurisk.

``pyproject.toml``::

    [project.entry-points.gpurisk]
    arx = "gpurisk_arx.plugin"
"""
from gpurisk import hookimpl

from .population import PopUniqueness
from .sample_risk import Journalist, Marketer, Prosecutor

MEASURES = [Prosecutor, Journalist, Marketer, PopUniqueness]


@hookimpl
def gpurisk_register_measures():
    return list(MEASURES)
