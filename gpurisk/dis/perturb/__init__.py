"""Perturbations of a file (record swapping, PRAM, ...) and their plugin interface. SPEC §6.

Built-in perturbations are plugins registered through ``gpurisk_register_perturbations``, exactly
like a third-party plugin (see :data:`gpurisk.plugins.BUILTIN_PLUGINS`). ``gpurisk.dis`` measures
pr(cm|um) on the perturbed files.
"""
from gpurisk.dis.perturb.base import Perturbation, parse_spec

__all__ = ["Perturbation", "parse_spec"]
