"""The built-in commands, added by this built-in plugin through ``gpurisk_register_commands``: the
hook third-party plugins use (as datasette registers its own commands). Listed in
:data:`gpurisk.plugins.BUILTIN_PLUGINS`; its hook runs before any other plugin's, so a plugin cannot
replace a built-in command."""
from __future__ import annotations

import importlib

from gpurisk.hookspecs import hookimpl

#: modules that each add commands to the ``gpurisk`` group with ``register(cli)``
COMMAND_MODULES = ("assess", "measures", "validate", "dis", "design", "scan", "compare", "report",
                   "record_risk", "suda", "protect")


@hookimpl
def gpurisk_register_commands(cli):
    for mod in COMMAND_MODULES:
        importlib.import_module(f"gpurisk.cli.{mod}").register(cli)
