"""Models fitted to the counts: the two-way log-linear model by IPF (:mod:`.loglinear`) and the
record-level risk under intruder search methods built on it (:mod:`.record_model`; its workflow is
:mod:`gpurisk.workflows.record_risk`), SUDA (:mod:`.suda`), the complex designs (:mod:`.design`),
and the log-linear layer behind τ̂1 and Ê: the model choices (:mod:`.forest`, :mod:`.eb_forest`,
:mod:`.risk_choice`), the fits of a table (:mod:`.table_fits`), each sample unique's prior
(:mod:`.prior`) and terms (:mod:`.terms`), and the estimate with its interval
(:mod:`.loglinear_risk`).

**The public API** for plugins is what this package itself exports (``from gpurisk.models import
...``; the names in ``__all__``, each imported when first asked for). The modules under it are
gpurisk's own and may change between releases; a plugin imports none of them
(tests/test_models_api.py checks the plugins shipped here):

- ``Margins``: a sample's codes, counts and their one- and two-way margins;
- ``choose_forest``, ``doubtful``: the held-out tests' forest of two-way interactions and the
  forests one test away; ``tree_order``: a tree's edges as (parent, child), parents first;
- ``choose_eb_forest``, ``orient_eb_forest``: the forest kept by each pair's evidence and its
  rooted form's arcs (Ê's default model);
- ``choose_risk_forest``: the forest Skinner & Shlomo's risk criterion chooses;
- ``category_ranks``: each key's categories' ranks, independent of how a table coded them;
- ``sample_margins``, ``eb_means``: a table's sample margins and Ê's fitted model, kept on the
  table; ``lone_uniques``: how many sample uniques are alone in a category of some key;
  ``loo_prior``: each sample unique's leave-one-out prior; ``nb_terms``, ``unique_terms``: the
  Poisson-gamma terms of τ̂1 and Ê per unique; ``loglinear_estimate``: τ̂1 or Ê of a table with
  its s.e. and bounds, as tau1_ll and matches_ll report it.
"""
from __future__ import annotations

import importlib

#: public name: (module, name there)
_PUBLIC = {
    "Margins": ("gpurisk.models.forest", "Margins"),
    "choose_forest": ("gpurisk.models.forest", "choose_forest"),
    "doubtful": ("gpurisk.models.forest", "doubtful"),
    "tree_order": ("gpurisk.models.forest", "tree_order"),
    "choose_eb_forest": ("gpurisk.models.eb_forest", "choose"),
    "orient_eb_forest": ("gpurisk.models.eb_forest", "orient"),
    "choose_risk_forest": ("gpurisk.models.risk_choice", "choose"),
    "category_ranks": ("gpurisk.models.model_choice", "category_ranks"),
    "sample_margins": ("gpurisk.models.table_fits", "sample_margins"),
    "lone_uniques": ("gpurisk.models.table_fits", "lone_uniques"),
    "eb_means": ("gpurisk.models.table_fits", "eb_means"),
    "loo_prior": ("gpurisk.models.prior", "loo_prior"),
    "nb_terms": ("gpurisk.models.terms", "nb_terms"),
    "unique_terms": ("gpurisk.models.terms", "unique_terms"),
    "loglinear_estimate": ("gpurisk.models.loglinear_risk", "estimate"),
}
__all__ = sorted(_PUBLIC)


def __getattr__(name: str):
    """A public name, imported from its module when first asked for (``import gpurisk.models``
    stays cheap: the numeric modules load only when used)."""
    if name not in _PUBLIC:
        raise AttributeError(f"module 'gpurisk.models' has no attribute {name!r}")
    module, attr = _PUBLIC[name]
    value = getattr(importlib.import_module(module), attr)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
