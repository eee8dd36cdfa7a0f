"""Options shared by several commands, and small parsers."""
from __future__ import annotations

import contextlib
import json

import click

from gpurisk.errors import BadInput


def console(stderr: bool = False):
    """The rich Console every command prints with. In a terminal it fits the terminal; when the
    output goes to a file or a pipe, lines are not wrapped at 80 columns (issue 20): the width is
    $COLUMNS if set, else 240, and text is never folded."""
    import os
    import sys

    from rich.console import Console

    class _Console(Console):
        def on_broken_pipe(self) -> None:
            # rich would exit 1; gpurisk.cli.main exits 0 quietly (``gpurisk ... | head -1``)
            self.quiet = True
            raise BrokenPipeError()

    stream = sys.stderr if stderr else sys.stdout
    if stream.isatty():
        return _Console(stderr=stderr)
    cols = os.environ.get("COLUMNS", "")
    return _Console(stderr=stderr, width=int(cols) if cols.isdigit() else 240, soft_wrap=True)


@contextlib.contextmanager
def progress_bar(what: str, force: bool | None = None):
    """A rich progress bar on standard error while a long step runs, as a callback
    ``update(done, total)``; None (nothing drawn) when standard error is not a terminal, so piped
    or logged runs stay clean. ``force`` (``--progress/--no-progress``) overrides the terminal test;
    forced onto a file or pipe, the bar's final state is written once at the end (as scan does)."""
    import sys
    tty = sys.stderr.isatty()
    show = tty if force is None else force
    if not show:
        yield None
        return
    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                               TimeElapsedColumn, TimeRemainingColumn)
    with Progress(TextColumn(what), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  TextColumn("eta"), TimeRemainingColumn(), console=console(stderr=True),
                  transient=tty) as bar:
        task = bar.add_task(what, total=None)

        def update(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)
        yield update


def echo_json(doc, default=None) -> None:
    """``doc`` as indented JSON on standard output (the ``--json`` of every command)."""
    import sys
    json.dump(doc, sys.stdout, indent=2, default=default)
    sys.stdout.write("\n")


def print_plain(header: list[str], rows: list[list[str]]) -> None:
    """A plain table: a header line, then one line per row, fields separated by tabs (greppable,
    ``cut -f``; ``column -t -s $'\t'`` aligns it). A field's own tabs and newlines become spaces.
    ``gpurisk measures`` and ``gpurisk plugins`` print this; their ``--json`` gives every field."""
    def clean(v) -> str:
        return " ".join(str(v).split()) if v is not None else ""
    for r in [header, *rows]:
        click.echo("\t".join(clean(v) for v in r).rstrip())


def registry_rows(registry) -> list[dict]:
    """Each registered class's ``describe()``, with the plugin and package that registered it; a
    measure the commands run by default as the headline (or beside it) although its class says
    ``default = False`` (a model fit) gets ``headline: true``."""
    from gpurisk.measures.headline import BESIDE, HEADLINE
    rows = [dict(r.cls.describe(), plugin=r.plugin, package=r.package) for r in registry.values()]
    for d in rows:
        if "default" in d and d.get("name") in (HEADLINE, *BESIDE):
            d["headline"] = True
    return rows


def fmt_value(v, digits=6) -> str:
    """A number for a table: :func:`gpurisk.core.display.fmt` with 6 significant digits."""
    from gpurisk.core.display import fmt
    return fmt(v, digits)


def split_list(value: str | None) -> list[str] | None:
    if value is None:
        return None
    items = [v.strip() for v in value.split(",") if v.strip()]
    return items or None


def parse_options(pairs: tuple[str, ...]) -> dict[str, dict]:
    """``--option theta_hat_dis.K=50000`` -> {"theta_hat_dis": {"K": 50000}}, checked against the
    measures' declared options (:func:`gpurisk.plugins.check_options`) before anything is read.

    Values are parsed as JSON (text that is not JSON stays text); a str option keeps the text as
    typed. An unknown measure or option, a wrong type or a value out of range is BadInput.
    """
    from gpurisk.plugins import check_options
    out: dict[str, dict] = {}
    texts: dict[tuple[str, str], str] = {}
    for p in pairs:
        if "=" not in p or "." not in p.split("=", 1)[0]:
            raise BadInput(f"--option {p!r} is not MEASURE.NAME=VALUE")
        lhs, rhs = p.split("=", 1)
        measure, key = lhs.split(".", 1)
        try:
            val = json.loads(rhs)
        except json.JSONDecodeError:
            val = rhs
        out.setdefault(measure, {})[key] = val
        texts[(measure, key)] = rhs
    return check_options(out, texts)


def _set_config(name):
    """A click callback storing an option in gpurisk.config (commands need no extra parameter)."""
    def cb(ctx, param, value):
        if value is not None:
            from gpurisk.backends import config
            setattr(config, name, value)
        return value
    return cb


def _set_memory_limit(ctx, param, value):
    if value is not None:
        from gpurisk.backends import config, memory_limit_bytes
        try:
            config.memory_limit = memory_limit_bytes(value)
        except BadInput as exc:
            raise click.BadParameter(str(exc)) from None
    return value


def _reading(recode=(), **vals):
    from gpurisk.core.settings import Reading
    return Reading(recode=list(recode), **vals)


def input_options(f=None, *, recode: bool = True, cluster: bool = True,
                  backend_help: str = "auto|pandas|dask|cudf|dask-cudf (default: $GPURISK_BACKEND "
                                      "or pandas)",
                  high_cardinality_help: str = "accept a key with more than 1000 distinct values "
                                               "and more than n/2 (refused by default: a continuous "
                                               "variable or an identifier used as a key)"):
    """How the records are read, the options every command that reads records has, from this one
    place: --sep, --encoding, --missing, --recode, --allow-high-cardinality, --backend, and the
    local cluster's --scheduler, --workers, --memory-limit (``cluster=False`` leaves those three
    out, ``recode=False`` --recode). The command receives one
    :class:`gpurisk.core.settings.Reading` as ``reading`` (what :class:`gpurisk.inputs.Inputs` reads,
    checks and counts with). ``@input_options`` or ``@input_options(recode=False, ...)``."""
    names = ("sep", "encoding", "missing", "allow_high_cardinality", "backend") + ("recode",) * recode

    def deco(f):
        f = _packed(names, "reading", _reading)(f)
        if cluster:
            f = click.option("--workers", type=click.IntRange(min=1), default=None,
                             expose_value=False, callback=_set_config("workers"), metavar="N",
                             help="worker processes of the local Dask cluster (default: "
                                  "$GPURISK_WORKERS, else the cores, at most 8; dask-cudf: one per "
                                  "GPU)")(f)
            f = click.option("--memory-limit", default=None, expose_value=False, metavar="SIZE",
                             callback=_set_memory_limit,
                             help="memory of each worker of the local Dask cluster, e.g. 1.5GiB "
                                  "(default: $GPURISK_MEMORY_LIMIT, else Dask's share of this "
                                  "machine's memory)")(f)
            f = click.option("--scheduler", default=None, expose_value=False, metavar="ADDRESS",
                             callback=_set_config("scheduler"),
                             help="address of an existing Dask scheduler, e.g. tcp://10.0.0.5:8786 "
                                  "(default: $GPURISK_SCHEDULER, else a local cluster for the "
                                  "run)")(f)
        f = click.option("--backend", default=None, metavar="NAME", help=backend_help)(f)
        f = click.option("--allow-high-cardinality", is_flag=True, help=high_cardinality_help)(f)
        if recode:
            f = click.option("--recode", multiple=True, metavar="KEY=SPEC",
                             help="regroup a key: bands:W[:ORIGIN], breaks:B1,B2, map:FILE, "
                                  "hierarchy:FILE:LEVEL (repeatable)")(f)
        f = click.option("--missing", type=click.Choice(["category", "error"]), default="category",
                         show_default=True,
                         help="a missing key value is its own category, or an error")(f)
        f = click.option("--encoding", default="utf-8", show_default=True,
                         help="text encoding of CSV input")(f)
        return click.option("--sep", default=None, help="CSV separator (default: detected)")(f)
    return deco(f) if f is not None else deco


# --- option groups shared by the commands, declared once -------------------------------------------
def _packed(names: tuple[str, ...], target: str, build):
    """A decorator: the command receives one ``target`` object built by ``build`` from the options
    ``names`` (which it then does not receive one by one)."""
    import functools

    def deco(f):
        @functools.wraps(f)            # keeps click's params declared below this group
        def wrapper(*args, **kw):
            vals = {n: kw.pop(n) for n in names if n in kw}
            kw[target] = build(**vals)
            return f(*args, **kw)
        return wrapper
    return deco


def _design(**vals):
    from gpurisk.core.settings import Design
    return Design(**vals)


def design_options(*, population: bool = True, sample_flag: bool = True, weights: bool = True,
                   fraction_required: bool = False,
                   fraction_help: str = "sampling fraction π in (0, 1]",
                   sample_flag_help: str = "boolean column marking the sample in a register",
                   weights_help: str = "design-weight column", metavar: str | None = None):
    """The sampling design: --fraction, --population, --sample-flag, --weights (each may be left
    out, and its help worded for the command). The command receives one
    :class:`gpurisk.core.settings.Design` as ``design``, checked before anything is read."""
    names = ("fraction",) + ("population",) * population + ("sample_flag",) * sample_flag + \
        ("weights",) * weights

    def deco(f):
        f = _packed(names, "design", _design)(f)
        if weights:
            f = click.option("--weights", default=None, metavar=metavar, help=weights_help)(f)
        if sample_flag:
            f = click.option("--sample-flag", default=None, metavar=metavar,
                             help=sample_flag_help)(f)
        if population:
            f = click.option("--population", default=None,
                             help="file with the population's records")(f)
        return click.option("--fraction", type=float, default=None, required=fraction_required,
                            help=fraction_help)(f)
    return deco


def _run(measures=None, opts=(), **vals):
    from gpurisk.core.settings import Run
    return Run(measures=split_list(measures), options=parse_options(opts) if opts else {}, **vals)


def run_options(*, measures: bool = True, option: bool = True, alpha: bool = True,
                timeout: bool = True,
                measures_help: str = "comma-separated measures (default: all)",
                seed_help: str = "seed of random procedures",
                option_help: str = "a measure's option, e.g. theta_hat_dis.K=1000000 (repeatable)"):
    """What to compute: --measures, --option, --alpha, --seed, --measure-timeout (each but --seed
    may be left out). The command receives one :class:`gpurisk.core.settings.Run` as ``run``: the
    options checked against the measures' declarations, α, seed and time limit against theirs."""
    names = ("measures",) * measures + ("opts",) * option + ("alpha",) * alpha + ("seed",) + \
        ("measure_timeout",) * timeout

    def deco(f):
        f = _packed(names, "run", _run)(f)
        if timeout:
            from gpurisk.core.settings import DEFAULT_MEASURE_TIMEOUT
            f = click.option("--measure-timeout", type=float, default=DEFAULT_MEASURE_TIMEOUT,
                             show_default=True, metavar="SECONDS",
                             help="report a measure that runs longer as not applicable and go on "
                                  "(the measure's thread cannot be stopped; it finishes in the "
                                  "background)")(f)
        f = click.option("--seed", type=int, default=0, show_default=True, help=seed_help)(f)
        if alpha:
            f = click.option("--alpha", type=float, default=0.01, show_default=True,
                             help="one-sided level of upper bounds")(f)
        if option:
            f = click.option("--option", "opts", multiple=True, metavar="MEASURE.NAME=VALUE",
                             help=option_help)(f)
        if measures:
            f = click.option("--measures", default=None, help=measures_help)(f)
        return f
    return deco


def output_options(*, json_help: str = "print the JSON document", output: bool = True,
                   output_metavar: str = "FILE", output_help: str = ""):
    """--json (``as_json``) and, unless ``output=False``, -o/--output (``output``)."""
    def deco(f):
        if output:
            f = click.option("-o", "--output", "output", default=None, metavar=output_metavar,
                             help=output_help)(f)
        return click.option("--json", "as_json", is_flag=True, help=json_help)(f)
    return deco
