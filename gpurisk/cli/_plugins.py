"""Commands added by plugins (the ``gpurisk_register_commands`` hook), loaded when first needed."""
from __future__ import annotations

import sys

import click


class PipeClosed(Exception):
    """The reader of standard output went away (not an OSError, so click does not catch it)."""


class PluginGroup(click.Group):
    """A click group that asks the plugins for more commands when it lists its commands or is
    asked for one it does not have; built-in commands never wait for the plugins."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._plugin_state = None        # the plugin set the plugin commands were made for
        self._plugin_commands: list[str] = []

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except BrokenPipeError:
            # click would turn it into exit code 1; gpurisk.cli.main exits 0 (``| head -1``)
            raise PipeClosed() from None

    def list_commands(self, ctx):
        self.load_plugin_commands()
        return super().list_commands(ctx)

    def get_command(self, ctx, name):
        if name not in self.commands or name in self._plugin_commands:
            self.load_plugin_commands()
        return super().get_command(ctx, name)

    def load_plugin_commands(self) -> None:
        """Call every plugin's ``gpurisk_register_commands(cli)`` once per set of plugins."""
        from gpurisk.plugins import get_plugin_manager
        pm = get_plugin_manager()
        state = (pm, frozenset((name, id(p)) for name, p in pm.list_name_plugin()))
        if self._plugin_state is not None and state[0] is self._plugin_state[0] \
                and state[1] == self._plugin_state[1]:
            return
        for name in self._plugin_commands:        # made for another set of plugins
            self.commands.pop(name, None)
        self._plugin_commands = []
        self._plugin_state = state
        for impl in pm.hook.gpurisk_register_commands.get_hookimpls():
            self._call(impl)

    def _call(self, impl) -> None:
        before = dict(self.commands)
        try:
            impl.function(*[{"cli": self}[a] for a in impl.argnames])
        except Exception as exc:  # a broken plugin must not break the other commands
            self.commands.clear()
            self.commands.update(before)
            _warn(impl.plugin_name, f"failed to register its commands and is skipped: "
                                    f"{type(exc).__name__}: {_first_line(exc)}")
            return
        for name, cmd in list(self.commands.items()):
            if name in before and before[name] is not cmd:
                self.commands[name] = before[name]
                _warn(impl.plugin_name, f"tried to replace the command {name!r}; ignored")
            elif name not in before:
                self._plugin_commands.append(name)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else ""


def _warn(plugin: str, what: str) -> None:
    from gpurisk.plugins import ENV_BLOCK
    sys.stderr.write(f"gpurisk: warning: plugin {plugin!r} {what}; to silence this, uninstall it or "
                     f"set {ENV_BLOCK}={plugin}\n")
