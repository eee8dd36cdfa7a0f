"""Exceptions gpurisk raises. Every message is one line naming the problem (column, value, cells)."""


class GpuriskError(Exception):
    """Base class of gpurisk's own errors."""


class BadInput(GpuriskError, ValueError):
    """The input cannot give a correct answer: a missing column, an out-of-domain value, f_j > F_j, ...

    The command line prints ``gpurisk: error: <message>`` and exits with code 2. A message that
    names a setting can be phrased for each place it appears: ``BadInput(python_text, cli=cli_text)``
    names the Python parameter (``missing='category'``) in the API and the flag
    (``--missing category``) on the command line, which prints :meth:`cli_message`.
    """

    cli: str | None = None

    def __init__(self, *args, cli: str | None = None):
        super().__init__(*args)
        if cli is not None:
            self.cli = cli

    def cli_message(self) -> str:
        """The message as the command line shows it (the flags' names)."""
        return self.cli if self.cli is not None else str(self)


class PluginError(GpuriskError):
    """A plugin is broken: a duplicate measure name, a misspelt hook, a bad class."""


class UnsupportedBackend(GpuriskError):
    """A backend was asked for that cannot run here (no GPU, missing library)."""


class GpuriskWarning(UserWarning):
    """A result that holds but deserves a look (an iterative fit stopped before converging, a given
    size that differs from the data's). The Python API emits it through :mod:`warnings`; the command
    line prints it once as ``warning: ...``; the result objects keep it in ``.warnings``."""
