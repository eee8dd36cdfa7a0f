"""The ``gpurisk`` command line. Each command lives in its own module of this package;
:mod:`.builtin` adds them through the same hook as plugins' commands.

Every error that is the input's fault prints one line ``gpurisk: error: ...`` and exits with 2.
Plugins add commands through the ``gpurisk_register_commands`` hook (see :mod:`._plugins`).
"""
from gpurisk.cli.app import cli, main
from gpurisk.cli.builtin import COMMAND_MODULES

__all__ = ["COMMAND_MODULES", "cli", "main"]
