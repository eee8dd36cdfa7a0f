"""The ``gpurisk`` group and its entry point :func:`main`: every error that is the input's fault is one
line ``gpurisk: error: ...`` and exit code 2."""
from __future__ import annotations

import atexit
import os
import sys
import threading

import click

from gpurisk import __version__
from gpurisk.errors import GpuriskError
from gpurisk.cli._plugins import Interrupted, PipeClosed, PluginGroup


# every command, the built-in ones too, comes from the gpurisk_register_commands hook
# (gpurisk.cli.builtin adds the built-in ones; see gpurisk.cli._plugins.PluginGroup)
@click.group(cls=PluginGroup,
             context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="gpurisk")
def cli():
    """Disclosure risk of a microdata release: which key variables make re-identification likely."""


def main(argv=None) -> None:
    """Entry point: run the group, turning gpurisk errors into one line and exit code 2.

    Called with no ``argv`` it is the process's entry point (the ``gpurisk`` script, ``python -m
    gpurisk``): once the command's output is flushed the process ends with its exit code, even when
    a measure left a non-daemon thread running (see :func:`_leave`). With ``argv`` (a caller's own
    process) it only raises ``SystemExit``, as click does."""
    if argv is not None:
        return _run(argv)
    _terminate_cleanly()
    _redeliver_lost_interrupts()
    try:
        _run(None)
    except SystemExit as exc:
        _leave(exc.code)
        raise
    _leave(None)


class Terminated(BaseException):
    """SIGTERM (or SIGHUP) reached the process: raised in the main thread so that every
    ``finally`` runs (locks released, temporary files removed) and the command ends in one line
    (see :func:`main`)."""

    def __init__(self, name: str = "SIGTERM"):
        super().__init__(name)
        self.name = name


def _terminate_cleanly() -> None:
    """SIGTERM (``kill PID``, a batch system's time limit) and SIGHUP (the terminal closed) raise
    :class:`Terminated` in the main thread instead of ending the process where it stands; the
    default would skip every cleanup (a ``validate --resume`` left its lock file behind)."""
    import signal

    def on_term(signum, frame):
        raise Terminated(signal.Signals(signum).name)
    for name in ("SIGTERM", "SIGHUP"):
        sig = getattr(signal, name, None)
        try:
            if sig is not None and signal.getsignal(sig) in (signal.SIG_DFL, None):
                signal.signal(sig, on_term)
        except (ValueError, OSError):   # not the main thread
            pass


def _redeliver_lost_interrupts() -> None:
    """Ctrl-C (or SIGTERM) that lands while Python runs a garbage-collection callback or a
    finalizer is printed as "Exception ignored in ..." with a KeyboardInterrupt traceback and then
    dropped: the command ran on to the end, exit 0. The local Dask cluster's scheduler, in this
    process, hooks every full collection (``distributed.gc``): 3 of 11 Ctrl-Cs sent to a Dask scan
    the moment its first rows were written were lost so (0 of 14 sent 0.2-2 s later). It now goes
    unprinted and is raised again 50 ms later, from a thread of its own: the signal is tripped anew
    and its handler runs at the main thread's next check, outside the callback (in another one it
    comes back here). Not tripped in the hook itself: the interpreter checks for signals right
    after the call, so it would be raised in the hook and dropped for good."""
    import _thread
    import signal
    previous = sys.unraisablehook
    trip = getattr(_thread.interrupt_main, "__wrapped__", _thread.interrupt_main)

    def again(signum):
        import time
        time.sleep(0.05)
        trip(signum)

    def hook(unraisable):
        exc = unraisable.exc_type
        if exc is not None and issubclass(exc, (KeyboardInterrupt, Terminated)):
            signum = getattr(signal, getattr(unraisable.exc_value, "name", "SIGINT"), signal.SIGINT)
            threading.Thread(target=again, args=(signum,), daemon=True,
                             name="gpurisk-interrupt-again").start()
            return
        previous(unraisable)
    sys.unraisablehook = hook


def resume_hint(argv) -> str:
    """How to go on after a run that stopped part way, from its command line."""
    args = [str(a) for a in (sys.argv[1:] if argv is None else argv)]
    cmd = next((a for a in args if not a.startswith("-")), "")

    def given(*flags):
        return any(a in flags or a.startswith(tuple(f"{f}=" for f in flags)) for a in args)
    if cmd == "scan" and given("-o", "--output"):
        return ("the rows finished so far are kept: run the same command with --resume to finish "
                "the scan")
    if cmd == "validate" and given("--resume"):
        return "the chunks finished so far are kept: run the same command again to go on"
    if cmd == "dis" and given("--state"):
        return "the batches finished so far are kept in --state: run the same command again"
    if cmd == "protect" and given("--checkpoint"):
        return "the search so far is kept in --checkpoint: run the same command again"
    return "no output was left half-written: run the command again"


def _leave(code) -> None:
    """End the process now with ``code`` if a non-daemon thread other than the main one is alive
    (a plugin's measure that started one and never joined it): the interpreter would wait for it
    before exiting. Also once Arrow is loaded: its C++ thread pools, torn down with the interpreter,
    sometimes abort the process after the command has finished ("terminate called without an active
    exception", exit 134 instead of the command's code; apache/arrow#34314; seen here about once in
    25 runs of a bad-input error on a loaded machine). Standard output and error are flushed and the
    ``atexit`` handlers run first (local Dask clusters close there, temporary folders are removed);
    the threads are not waited for."""
    left = [t for t in threading.enumerate()
            if t is not threading.main_thread() and not t.daemon and t.is_alive()]
    if not left and "pyarrow" not in sys.modules:
        return
    if code is not None and not isinstance(code, int):     # sys.exit("text") prints the text
        sys.stderr.write(f"{code}\n")
        code = 1
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):   # the reader went away
            pass
    os._exit(code or 0)


def _quiet_shutdown() -> None:
    """A local Dask cluster, where one was started, closes at exit without logging the work it
    cut short (:mod:`gpurisk.backends.interrupts`)."""
    if "distributed" in sys.modules:
        from gpurisk.backends.interrupts import quiet_shutdown
        quiet_shutdown()


def _run(argv) -> None:
    from gpurisk.core.messages import side
    with side("cli"):      # reasons and errors name the flags (--population), not parameters
        _run_cli(argv)


def _run_cli(argv) -> None:
    try:
        cli.main(args=argv, prog_name="gpurisk", standalone_mode=False)
        sys.stdout.flush()            # a closed pipe shows here, not at interpreter exit
    except (BrokenPipeError, PipeClosed):
        _reader_went_away()
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.exceptions.NoArgsIsHelpError as exc:   # `gpurisk` alone: its help, not an error
        click.echo(exc.ctx.get_help() if exc.ctx is not None else cli.get_help(click.Context(cli)))
        sys.exit(0)
    except click.Abort:
        _quiet_shutdown()
        click.echo(f"gpurisk: interrupted; {resume_hint(argv)}", err=True)
        sys.exit(130)
    except Terminated as exc:
        click.echo(f"gpurisk: terminated ({exc.name}); {resume_hint(argv)}", err=True)
        sys.exit(143 if exc.name == "SIGTERM" else 129)
    except click.UsageError as exc:       # a bad option value, a missing argument: one line
        where = exc.ctx.command_path if exc.ctx is not None else "gpurisk"
        click.echo(f"gpurisk: error: {exc.format_message()} (see '{where} --help')", err=True)
        sys.exit(2)
    except click.ClickException as exc:
        exc.show()
        sys.exit(2 if exc.exit_code in (1, 2) else exc.exit_code)
    except GpuriskError as exc:        # a setting names its flag here (--alpha 7), not alpha=7
        text = exc.cli_message() if hasattr(exc, "cli_message") else str(exc)
        if type(exc).__name__ == "ClusterLost":
            text = f"{text}; {resume_hint(argv)}"
        click.echo(f"gpurisk: error: {text}", err=True)
        sys.exit(2)
    except (KeyboardInterrupt, Interrupted):
        _quiet_shutdown()
        click.echo(f"gpurisk: interrupted; {resume_hint(argv)}", err=True)
        sys.exit(130)
    except Exception as exc:  # a bug: one line unless GPURISK_DEBUG asks for the traceback
        if os.environ.get("GPURISK_DEBUG"):
            raise
        if type(exc).__name__ == "KilledWorker":  # distributed gave up on a task that killed workers
            try:
                what = str(exc).splitlines()[0]
            except Exception:  # its str() needs scheduler state
                what = "KilledWorker"
            from gpurisk.backends import worker_memory_note
            limit = worker_memory_note()
            click.echo(f"gpurisk: error: Dask workers died running one task ({what}); out of memory? "
                       f"{limit + ': ' if limit else ''}rerun with more memory per worker "
                       "(--memory-limit) or fewer workers (--workers) "
                       "(scan: add --resume to keep finished rows)",
                       err=True)
            sys.exit(1)
        said = _withheld(exc)
        click.echo(f"gpurisk: internal error: {type(exc).__name__}{_raised_at(exc)}"
                   f"{': ' + said if said else ''} (set GPURISK_DEBUG=1 for the traceback)",
                   err=True)
        sys.exit(1)


def _raised_at(exc: BaseException) -> str:
    """Where an unexpected exception was raised, as `` (at distributed/utils.py:587)``: the file
    under its package's folder and the line, no values. A bare ``assert`` of a library has no
    message, and a one-off seen once in a test run (``AssertionError:`` and nothing else) could not
    be traced without it."""
    tb = exc.__traceback__
    if tb is None:
        return ""
    while tb.tb_next is not None:
        tb = tb.tb_next
    parts = os.path.normpath(tb.tb_frame.f_code.co_filename).split(os.sep)
    for mark in ("site-packages", "dist-packages", "lib"):
        if mark in parts[:-1]:
            i = len(parts) - 1 - parts[::-1].index(mark)
            parts = parts[i + 1:]
            break
    else:
        if "gpurisk" in parts[:-1]:
            parts = parts[len(parts) - 1 - parts[::-1].index("gpurisk"):]
    return f" (at {'/'.join(parts[-3:])}:{tb.tb_lineno})"


def _withheld(exc: BaseException) -> str:
    """An unexpected exception's first line, its quoted parts withheld: a library's message may
    quote a record's value (pandas: ``Unable to parse string "..."``), which never goes out."""
    import re
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return re.sub(r"\"[^\"]*\"|'[^']*'", "<withheld>", text)


def _reader_went_away() -> None:
    """``gpurisk assess ... | head -1``: the reader closed the pipe. That is what the user asked for,
    so exit 0 quietly (as ``cat``/``ls`` do under SIGPIPE's default, without the 141), pointing
    standard output at /dev/null so Python's final flush cannot raise again."""
    try:
        fd = sys.stdout.fileno()
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, fd)
        os.close(null)
    except (AttributeError, OSError, ValueError):   # stdout is not a real file (tests, embedding)
        pass
    sys.exit(0)
