"""The plugin manager and the measure registry.

Built-in measure modules are registered first, by the same call as third-party plugins; then the
entry-point group ``gpurisk`` is loaded, unless ``GPURISK_DISABLE_PLUGIN_AUTOLOAD`` is set. Plugins
named (entry-point name or distribution name) in ``GPURISK_BLOCK_PLUGINS`` (comma separated) are
blocked. Nothing is loaded at import time: the manager is built on first use.
"""
from __future__ import annotations

import importlib
import inspect
import os
from dataclasses import dataclass
from importlib import metadata

import pluggy

from . import hookspecs
from .errors import PluginError
from .measure import Measure

ENTRY_POINT_GROUP = "gpurisk"
ENV_DISABLE = "GPURISK_DISABLE_PLUGIN_AUTOLOAD"
ENV_BLOCK = "GPURISK_BLOCK_PLUGINS"

#: built-in plugin modules, registered in this order
BUILTIN_PLUGINS = (
    "gpurisk.measures.theta_hat",
    "gpurisk.measures.theta",
    "gpurisk.measures.pr_pu",
    "gpurisk.measures.pr_pu_su",
    "gpurisk.measures.match_prob_a",
    "gpurisk.measures.theta_hat_dis",
    "gpurisk.measures.tau1",
    "gpurisk.measures.tau1_hat",
    "gpurisk.measures.pr_cm_um",
    "gpurisk.measures.theta_hat_misclass",
    "gpurisk.measures.theta_hat_weighted",
    "gpurisk.perturb.swap",
    "gpurisk.perturb.pram",
    "gpurisk.measures.pop_uniques",
    "gpurisk.measures.sample_uniques",
    "gpurisk.measures.risk_fishing",
    "gpurisk.measures.risk_fishing_subsample",
    "gpurisk.measures.risk_response",
    "gpurisk.measures.risk_broad",
    "gpurisk.measures.bethlehem_flag",
    "gpurisk.measures.search_risk",
)

_pm: pluggy.PluginManager | None = None
_registry: dict[str, "Registered"] | None = None


@dataclass(frozen=True)
class Registered:
    cls: type[Measure]
    plugin: str        # plugin name as registered with pluggy
    package: str       # distribution that provides it ("gpurisk" for built-ins)
    version: str


def _truthy(value: str | None) -> bool:
    return bool(value) and value.strip().lower() not in ("0", "false", "no", "")


def blocked_names() -> set[str]:
    return {b.strip() for b in os.environ.get(ENV_BLOCK, "").split(",") if b.strip()}


def get_plugin_manager() -> pluggy.PluginManager:
    """The (cached) plugin manager with built-ins and, unless disabled, entry-point plugins."""
    global _pm
    if _pm is not None:
        return _pm
    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    blocked = blocked_names()
    for b in blocked:
        pm.set_blocked(b)
    for modname in BUILTIN_PLUGINS:
        if modname not in blocked:
            pm.register(importlib.import_module(modname), name=modname)
    if not _truthy(os.environ.get(ENV_DISABLE)):
        for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
            dist = ep.dist.name if ep.dist is not None else ""
            if ep.name in blocked or dist in blocked or pm.is_registered(ep.name):
                continue
            if pm.get_plugin(ep.name) is not None or pm.is_blocked(ep.name):
                continue
            try:
                plugin = ep.load()
            except Exception as exc:  # a broken third-party package must not break gpurisk
                raise PluginError(f"plugin {ep.name!r} ({dist}) failed to import: "
                                  f"{type(exc).__name__}: {exc}") from exc
            pm.register(plugin, name=ep.name)
            pm._gpurisk_dists = getattr(pm, "_gpurisk_dists", {})  # type: ignore[attr-defined]
            pm._gpurisk_dists[ep.name] = (dist, ep.dist.version if ep.dist else "")  # type: ignore[attr-defined]
    try:
        pm.check_pending()
    except pluggy.PluginValidationError as exc:
        raise PluginError(f"a plugin implements an unknown hook: {exc}") from exc
    _pm = pm
    return pm


def reset() -> None:
    """Forget the plugin manager and registry (tests, or after installing a plugin)."""
    global _pm, _registry
    _pm = None
    _registry = None


def register(plugin, name: str | None = None) -> None:
    """Register a plugin object or module at run time (notebooks, tests)."""
    global _registry
    get_plugin_manager().register(plugin, name=name)
    _registry = None


def unregister(name: str) -> None:
    global _registry
    pm = get_plugin_manager()
    plugin = pm.get_plugin(name)
    if plugin is not None:
        pm.unregister(plugin)
    _registry = None


def plugin_info(pm: pluggy.PluginManager, plugin_name: str) -> tuple[str, str]:
    dists = getattr(pm, "_gpurisk_dists", {})
    if plugin_name in dists:
        return dists[plugin_name]
    if plugin_name.startswith("gpurisk."):
        from . import __version__
        return "gpurisk", __version__
    return "(registered at run time)", ""


def measure_registry() -> dict[str, Registered]:
    """name -> Registered, for every measure of every plugin; duplicate names are an error."""
    global _registry
    if _registry is not None:
        return _registry
    pm = get_plugin_manager()
    reg: dict[str, Registered] = {}
    for impl in pm.hook.gpurisk_register_measures.get_hookimpls():  # registration order
        classes = impl.function() or []
        for cls in classes:
            if not (inspect.isclass(cls) and issubclass(cls, Measure)):
                raise PluginError(f"plugin {impl.plugin_name!r} registered {cls!r}, "
                                  "which is not a gpurisk.Measure subclass")
            if not cls.name or not isinstance(cls.name, str):
                raise PluginError(f"plugin {impl.plugin_name!r}: measure class {cls.__name__} has no name")
            if cls.name in reg:
                raise PluginError(f"measure {cls.name!r} is registered twice: by plugin "
                                  f"{reg[cls.name].plugin!r} and by plugin {impl.plugin_name!r}")
            package, version = plugin_info(pm, impl.plugin_name)
            reg[cls.name] = Registered(cls, impl.plugin_name, package, version)
    _registry = reg
    return reg


def plugins_list() -> list[dict[str, str]]:
    """Every registered plugin with its package and version."""
    pm = get_plugin_manager()
    out = []
    for name, _plugin in pm.list_name_plugin():
        package, version = plugin_info(pm, name)
        out.append({"plugin": name, "package": package, "version": version})
    return out


def perturbation_registry() -> dict[str, Registered]:
    """name -> Registered, for every perturbation of every plugin; duplicate names are an error.

    Not cached: it is cheap, and it stays right after :func:`register` / :func:`reset`.
    """
    from .perturb.base import Perturbation
    pm = get_plugin_manager()
    reg: dict[str, Registered] = {}
    for impl in pm.hook.gpurisk_register_perturbations.get_hookimpls():
        for cls in impl.function() or []:
            if not (inspect.isclass(cls) and issubclass(cls, Perturbation)):
                raise PluginError(f"plugin {impl.plugin_name!r} registered {cls!r}, "
                                  "which is not a gpurisk.perturb.Perturbation subclass")
            if not cls.name or not isinstance(cls.name, str):
                raise PluginError(f"plugin {impl.plugin_name!r}: perturbation class "
                                  f"{cls.__name__} has no name")
            if cls.name in reg:
                raise PluginError(f"perturbation {cls.name!r} is registered twice: by plugin "
                                  f"{reg[cls.name].plugin!r} and by plugin {impl.plugin_name!r}")
            package, version = plugin_info(pm, impl.plugin_name)
            reg[cls.name] = Registered(cls, impl.plugin_name, package, version)
    return reg
