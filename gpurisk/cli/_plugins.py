"""The commands of the ``gpurisk`` group, all added through the ``gpurisk_register_commands`` hook
(the built-in ones by the built-in plugin :mod:`gpurisk.cli.builtin`, first), loaded when first
needed."""
from __future__ import annotations

import sys

import click


class PipeClosed(Exception):
    """The reader of standard output went away (not an OSError, so click does not catch it)."""


class Interrupted(BaseException):
    """Ctrl-C during a command: raised past click (which would print an empty line first), so that
    :func:`gpurisk.cli.main` ends with one line."""


class PluginGroup(click.Group):
    """A click group whose commands come from the plugins' ``gpurisk_register_commands`` hooks,
    called when it first lists its commands or is asked for one (again when the set of plugins
    changes). The built-in plugins' hooks run first, so no plugin replaces a built-in command."""

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
        except KeyboardInterrupt:
            raise Interrupted() from None

    def list_commands(self, ctx):
        self.load_plugin_commands()
        return super().list_commands(ctx)

    def get_command(self, ctx, name):
        self.load_plugin_commands()
        return super().get_command(ctx, name)

    def load_plugin_commands(self) -> None:
        """Call every plugin's ``gpurisk_register_commands(cli)`` once per set of plugins, the
        built-in plugins' first."""
        from gpurisk.plugins import BUILTIN_PLUGINS, get_plugin_manager
        pm = get_plugin_manager()
        state = (pm, frozenset((name, id(p)) for name, p in pm.list_name_plugin()))
        if self._plugin_state is not None and state[0] is self._plugin_state[0] \
                and state[1] == self._plugin_state[1]:
            return
        for name in self._plugin_commands:        # made for another set of plugins
            self.commands.pop(name, None)
        self._plugin_commands = []
        self._plugin_state = state
        impls = pm.hook.gpurisk_register_commands.get_hookimpls()
        for impl in sorted(impls, key=lambda i: i.plugin_name not in BUILTIN_PLUGINS):
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
