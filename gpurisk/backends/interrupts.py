"""Ctrl-C on a run with a local Dask cluster: one line, not one traceback per worker.

A terminal sends SIGINT to every process of its foreground group, and the worker processes of the
local cluster gpurisk starts (:func:`gpurisk.backends.cluster._local_client`) are in that group:
each printed its asyncio traceback ("Process Dask Worker process (from Nanny): ...
KeyboardInterrupt", about 65 lines for two workers) after gpurisk's own line, and the client
logged the gather it had left ("Task exception was never retrieved ... AllExit"). The run's own
process handles the interrupt (the rows finished are kept, the cluster is closed at exit), so the
workers ignore SIGINT (:class:`IgnoreInterrupts`, a worker plugin of the local cluster only: the
workers of an outside scheduler are someone else's), and the CLI quietens asyncio's log before
it closes the cluster (:func:`quiet_shutdown`).
"""
from __future__ import annotations

import logging
import signal
import threading

from distributed.diagnostics.plugin import WorkerPlugin


class IgnoreInterrupts(WorkerPlugin):
    """A worker plugin: the worker process ignores SIGINT (set in its main thread, where its event
    loop runs; nothing where the plugin runs elsewhere, e.g. a worker in this process)."""

    name = "gpurisk-ignore-interrupts"

    def setup(self, worker):
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, signal.SIG_IGN)


def quiet_shutdown() -> None:
    """After an interrupt: asyncio's and distributed's loggers say nothing below CRITICAL while the
    local cluster closes (a gather cut short is logged as a task exception never retrieved)."""
    for name in ("asyncio", "distributed", "tornado"):
        logging.getLogger(name).setLevel(logging.CRITICAL)
