"""The plugin manager and the measure registry.

Built-in measure modules are registered first, by the same call as third-party plugins; then the
entry-point group ``gpurisk`` is loaded by pluggy (``load_setuptools_entrypoints``, one entry point
at a time), unless ``GPURISK_DISABLE_PLUGIN_AUTOLOAD`` is set. Plugins named (entry-point name or
distribution name) in ``GPURISK_BLOCK_PLUGINS`` (comma separated) are blocked. A plugin that fails
to import is skipped with one warning line on standard error and listed by :func:`failed_plugins`.
Nothing is loaded at import time: the manager is built on first use.
"""
from __future__ import annotations

import importlib
import inspect
import os
import sys
from dataclasses import dataclass
from importlib import metadata

import pluggy

from gpurisk import hookspecs
from gpurisk.errors import BadInput, PluginError
from gpurisk.measure import Measure

ENTRY_POINT_GROUP = "gpurisk"
ENV_DISABLE = "GPURISK_DISABLE_PLUGIN_AUTOLOAD"
ENV_BLOCK = "GPURISK_BLOCK_PLUGINS"

#: built-in plugin modules, registered in this order
BUILTIN_PLUGINS = (
    "gpurisk.cli.builtin",           # the built-in commands (gpurisk_register_commands)
    "gpurisk.measures.theta_hat",
    "gpurisk.measures.matches_hat",
    "gpurisk.measures.matches",
    "gpurisk.measures.matches_ll",
    "gpurisk.measures.tau1_ll",
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
    "gpurisk.dis.perturb.swap",
    "gpurisk.dis.perturb.pram",
    "gpurisk.measures.pop_uniques",
    "gpurisk.measures.sample_uniques",
    "gpurisk.measures.risk_fishing",
    "gpurisk.measures.risk_fishing_subsample",
    "gpurisk.measures.risk_response",
    "gpurisk.measures.risk_broad",
    "gpurisk.measures.bethlehem_flag",
    "gpurisk.measures.search_risk",
    "gpurisk.measures.suda",
    "gpurisk.protect.losses",
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


@dataclass(frozen=True)
class FailedPlugin:
    """An entry-point plugin that could not be loaded; gpurisk goes on without it."""

    plugin: str        # entry-point name
    package: str       # distribution
    version: str
    error: str         # "ExceptionType: first line of the message"

    def warning(self) -> str:
        return (f"gpurisk: warning: plugin {self.plugin!r} ({self.package} {self.version}".rstrip()
                + f") failed to load and is skipped: {self.error}; to silence this, uninstall it or "
                f"set {ENV_BLOCK}={self.plugin}")


_failed: dict[str, FailedPlugin] = {}


def _error_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0]}" if text else type(exc).__name__


def _entry_points() -> list[tuple[str, str, str]]:
    """(entry-point name, distribution, version) of every entry point in the group, first wins."""
    seen: dict[str, tuple[str, str, str]] = {}
    for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
        dist = getattr(ep, "dist", None)
        seen.setdefault(ep.name, (ep.name, dist.name if dist is not None else "",
                                  dist.version if dist is not None else ""))
    return list(seen.values())


def _load_entry_points(pm: pluggy.PluginManager, blocked: set[str]) -> None:
    """pluggy's own loader, one entry point at a time, so that one broken plugin is skipped alone.

    A plugin whose import (or registration) raises is recorded in :func:`failed_plugins` and named
    in one warning line on standard error; the others load.
    """
    for name, dist, version in _entry_points():
        if name in blocked or dist in blocked:
            pm.set_blocked(name)   # pluggy skips blocked names
            continue
        if pm.get_plugin(name) is not None or pm.is_blocked(name):
            continue
        try:
            pm.load_setuptools_entrypoints(ENTRY_POINT_GROUP, name=name)
        except Exception as exc:  # a broken third-party package must not break gpurisk
            if pm.get_plugin(name) is not None:   # imported, then failed: leave no half of it
                pm.unregister(name=name)
            failed = FailedPlugin(name, dist, version, _error_line(exc))
            _failed[name] = failed
            sys.stderr.write(failed.warning() + "\n")


def _distributions(pm: pluggy.PluginManager) -> dict[str, tuple[str, str]]:
    """plugin name -> (distribution, version) of every plugin loaded from an entry point."""
    if hasattr(pm, "list_plugin_distributions"):      # pluggy >= 1.6
        pairs = [(p, d.metadata["name"], d.version) for p, d in pm.list_plugin_distributions()]
    else:
        pairs = [(p, d.project_name, d.version) for p, d in pm.list_plugin_distinfo()]
    return {pm.get_name(p): (name, version) for p, name, version in pairs
            if pm.get_name(p) is not None}


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
    _failed.clear()
    if not _truthy(os.environ.get(ENV_DISABLE)):
        _load_entry_points(pm, blocked)
    try:
        pm.check_pending()
    except pluggy.PluginValidationError as exc:
        raise PluginError(f"a plugin implements an unknown hook: {exc}") from exc
    _pm = pm
    return pm


def failed_plugins() -> list[FailedPlugin]:
    """Plugins that failed to load: an entry point whose import raised, or a plugin whose
    registration hook raised or returned something other than named classes (found by building
    the registries, which this does)."""
    get_plugin_manager()
    measure_registry()
    perturbation_registry()
    loss_registry()
    return list(_failed.values())


def unknown_measure_hint() -> str:
    """"; plugin 'x' (dist) failed to load: ..." for each failed plugin, or "" when none failed."""
    return "".join(f"; plugin {f.plugin!r} ({f.package}) failed to load ({f.error}), its measures "
                   f"are unavailable" for f in failed_plugins())


def reset() -> None:
    """Forget the plugin manager and registry (tests, or after installing a plugin)."""
    global _pm, _registry
    _pm = None
    _registry = None


def register(plugin, name: str | None = None) -> None:
    """Register a plugin object or module at run time (notebooks, tests)."""
    global _registry
    pm = get_plugin_manager()
    if name is not None and pm.is_blocked(name):      # pluggy would ignore it without a word
        raise PluginError(f"plugin {name!r} is blocked ({ENV_BLOCK}); it was not registered")
    pm.register(plugin, name=name)
    _registry = None


def unregister(name: str) -> None:
    global _registry
    pm = get_plugin_manager()
    plugin = pm.get_plugin(name)
    if plugin is not None:
        pm.unregister(plugin)
    _registry = None


def plugin_info(pm: pluggy.PluginManager, plugin_name: str,
                dists: dict[str, tuple[str, str]] | None = None) -> tuple[str, str]:
    """(distribution, version) of a registered plugin (``dists``: :func:`_distributions`, if known)."""
    dists = _distributions(pm) if dists is None else dists
    if plugin_name in dists:
        return dists[plugin_name]
    if plugin_name.startswith("gpurisk."):
        return "gpurisk", _own_version()
    return "(registered at run time)", ""


def measure_registry() -> dict[str, Registered]:
    """name -> Registered, for every measure of every plugin; duplicate names are an error."""
    global _registry
    if _registry is not None:
        return _registry
    reg = _registered(get_plugin_manager().hook.gpurisk_register_measures, Measure, "measure",
                      "gpurisk.Measure")
    _registry = reg
    return reg


def plugins_list() -> list[dict[str, str]]:
    """Every registered plugin with its package and version, then every plugin that failed to load
    (those rows add ``"status": "failed"`` and ``"error"``). A plugin blocked by
    ``GPURISK_BLOCK_PLUGINS`` (pluggy keeps its name with no plugin) is listed with ``"status":
    "blocked"``: its package and version when it is an installed entry point or a built-in module,
    ``(not installed)`` for a name that matches none."""
    pm = get_plugin_manager()
    dists = _distributions(pm)
    out = []
    failed = failed_plugins()
    eps = {name: (dist, version) for name, dist, version in _entry_points()}
    blocked_dists = {dist for dist, _ in eps.values()}
    for name, plugin in pm.list_name_plugin():
        if name in _failed:
            continue
        if plugin is None:                # blocked: pluggy lists the name, nothing was loaded
            if name in blocked_dists and name not in eps:
                continue                  # blocked by its distribution's name: its entry point's row says so
            package, version = eps.get(name) or (
                ("gpurisk", _own_version()) if name in BUILTIN_PLUGINS else ("(not installed)", ""))
            out.append({"plugin": name, "package": package, "version": version,
                        "status": "blocked"})
            continue
        package, version = plugin_info(pm, name, dists)
        out.append({"plugin": name, "package": package, "version": version})
    for f in failed:
        out.append({"plugin": f.plugin, "package": f.package, "version": f.version,
                    "status": "failed", "error": f.error})
    return out


def _registered(hook, base: type, kind: str, public: str) -> dict[str, Registered]:
    """name -> Registered for every class the implementations of ``hook`` return, in registration
    order: each a subclass of ``base`` with a name; ``public`` is the base class's name for plugin
    authors.

    A third-party plugin whose hook raises, or returns something that is not a named ``base``
    subclass, is recorded as failed (:func:`failed_plugins`, one warning line) and skipped, with
    everything it registers; the other plugins go on working. The same fault in a built-in module
    is a bug and a :class:`PluginError`; so is one name registered twice (which measure a name means
    must never depend on the order plugins load in)."""
    pm = get_plugin_manager()
    dists = _distributions(pm)
    reg: dict[str, Registered] = {}
    for impl in hook.get_hookimpls():
        if impl.plugin_name in _failed:
            continue
        try:
            found = _classes(impl, base, kind, public)
        except PluginError as exc:
            if impl.plugin_name.startswith("gpurisk."):
                raise
            package, version = plugin_info(pm, impl.plugin_name, dists)
            _skip_failed(pm, FailedPlugin(impl.plugin_name, package, version, str(exc)))
            continue
        for cls in found:
            if cls.name in reg:
                raise PluginError(f"{kind} {cls.name!r} is registered twice: by plugin "
                                  f"{reg[cls.name].plugin!r} and by plugin {impl.plugin_name!r}")
            package, version = plugin_info(pm, impl.plugin_name, dists)
            reg[cls.name] = Registered(cls, impl.plugin_name, package, version)
    return reg


def _classes(impl, base: type, kind: str, public: str) -> list[type]:
    """The classes one hook implementation returns, checked; PluginError (one line) if it raises or
    returns anything else."""
    try:
        found = list(impl.function() or [])
    except Exception as exc:  # a third-party hook's own fault
        raise PluginError(f"its {impl.function.__name__} hook raised {_error_line(exc)}") from None
    for cls in found:
        if not (inspect.isclass(cls) and issubclass(cls, base)):
            raise PluginError(f"plugin {impl.plugin_name!r} registered a {type(cls).__name__}, "
                              f"which is not a {public} subclass")
        if not cls.name or not isinstance(cls.name, str):
            raise PluginError(f"plugin {impl.plugin_name!r}: {kind} class {cls.__name__} has no name")
    return found


def _skip_failed(pm: pluggy.PluginManager, failed: FailedPlugin) -> None:
    """Record a plugin that failed while registering, warn once, and unregister it whole."""
    _failed[failed.plugin] = failed
    sys.stderr.write(failed.warning() + "\n")
    plugin = pm.get_plugin(failed.plugin)
    if plugin is not None:
        pm.unregister(plugin)


def perturbation_registry() -> dict[str, Registered]:
    """name -> Registered, for every perturbation of every plugin; duplicate names are an error.

    Not cached: it is cheap, and it stays right after :func:`register` / :func:`reset`.
    """
    from gpurisk.dis.perturb.base import Perturbation
    return _registered(get_plugin_manager().hook.gpurisk_register_perturbations, Perturbation,
                       "perturbation", "gpurisk.dis.perturb.Perturbation")


def loss_registry() -> dict[str, Registered]:
    """name -> Registered, for every information-loss measure of every plugin (``protect``);
    duplicate names are an error. Not cached, as :func:`perturbation_registry`."""
    from gpurisk.protect.loss import Loss
    return _registered(get_plugin_manager().hook.gpurisk_register_losses, Loss, "loss",
                       "gpurisk.protect.Loss")


def _own_version() -> str:
    """gpurisk's version, without importing the package's __init__ (which imports this module)."""
    import sys
    mod = sys.modules.get("gpurisk")
    if mod is not None and getattr(mod, "__version__", None):
        return mod.__version__
    try:
        return metadata.version("gpurisk")
    except metadata.PackageNotFoundError:  # pragma: no cover - a bare source tree
        return ""


def check_options(options, texts=None) -> dict:
    """``options`` checked against every registered measure's declared options and converted (see
    :func:`gpurisk.options.check_options`); BadInput in one line for anything else."""
    from gpurisk.options import check_options as check
    return check(options, texts, registry=measure_registry(), hint=unknown_measure_hint())


def make_perturbation(spec):
    """A registered Perturbation from an instance, a spec string (``"swap:fraction=0.1"``) or a
    (name, options) pair."""
    from gpurisk.dis.perturb.base import Perturbation, parse_spec
    if isinstance(spec, Perturbation):
        return spec
    name, opts = parse_spec(spec) if isinstance(spec, str) else spec
    reg = perturbation_registry()
    if name not in reg:
        raise BadInput(f"unknown perturbation {name!r}; registered: {', '.join(reg) or '(none)'}")
    return reg[name].cls(**dict(opts))
