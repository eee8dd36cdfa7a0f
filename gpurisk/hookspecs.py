"""Every hook gpurisk calls. Plugins implement them with :data:`gpurisk.hookimpl`.

Built-in measures are registered through exactly these hooks, by modules under
:mod:`gpurisk.measures`; third-party packages register a module or object under the entry-point
group ``gpurisk``::

    [project.entry-points.gpurisk]
    myplugin = "my_package.plugin"
"""
import pluggy

PROJECT = "gpurisk"
hookspec = pluggy.HookspecMarker(PROJECT)


@hookspec
def gpurisk_register_measures():
    """Return a list of :class:`gpurisk.Measure` subclasses.

    Each class needs a unique ``name``; a second class with the same name, from any plugin, is an
    error that names both plugins.
    """

@hookspec
def gpurisk_register_perturbations():
    """Return a list of :class:`gpurisk.dis.perturb.Perturbation` subclasses.

    A perturbation (record swapping, PRAM, ...) turns the key codes of a file into the codes of a
    perturbed release; ``gpurisk dis`` measures pr(cm|um) on it (SPEC §6). Each class needs a
    unique ``name`` (``--perturb NAME:opt=value,...``); a second class with the same name, from any
    plugin, is an error that names both plugins.
    """

@hookspec
def gpurisk_register_losses():
    """Return a list of :class:`gpurisk.protect.Loss` subclasses (information-loss measures).

    ``gpurisk protect --loss NAME`` ranks the nodes of the generalisation lattice by a loss (SPEC
    §11: ``precision``, ``nonuniform_entropy``, ``discernibility`` and ``suppressed`` are built in).
    Each class needs a unique ``name``; a second class with the same name, from any plugin, is an
    error that names both plugins.
    """

@hookspec
def gpurisk_register_commands(cli):
    """Add commands to the ``gpurisk`` command line; ``cli`` is its :class:`click.Group`.

    Called once, when the command line first lists or looks up its commands (``gpurisk --help``,
    ``gpurisk NAME``). The built-in commands come through this hook too, from the built-in plugin
    :mod:`gpurisk.cli.builtin`, whose hook runs first::

        @gpurisk.hookimpl
        def gpurisk_register_commands(cli):
            @cli.command(help="Count the records of SAMPLE.")
            @click.argument("sample")
            def count(sample):
                click.echo(len(gpurisk.read_table(sample)))

    A command may not replace a built-in one (it is ignored, with a warning); a hook that raises is
    skipped with one warning line naming the plugin, and the other commands still work. Raise
    :class:`gpurisk.BadInput` in a command for a one-line ``gpurisk: error: ...`` and exit code 2.
    """


#: decorator for hook implementations, re-exported as ``gpurisk.hookimpl``
hookimpl = pluggy.HookimplMarker(PROJECT)
