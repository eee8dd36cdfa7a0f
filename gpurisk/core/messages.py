"""Messages phrased for where they appear: the flag on the command line (``--population POP``),
the parameter in the Python API (``population=POP``).

A measure's reason for not running (``Result.reason``) names the setting that would make it run.
It is written once, in a neutral form with named placeholders::

    "needs population counts F_j: give {population} or {sample_flag}"
    "show it with {option:tau1_hat.show_unreliable=true}"

:data:`SETTINGS` lists the placeholders; ``{option:MEASURE.NAME=VALUE}`` names a measure option
(``--option MEASURE.NAME=VALUE``, ``options={'MEASURE': {'NAME': VALUE}}``); ``{arg:--flag|name}``
names any other setting by its flag and its parameter (``{arg:--suppress-limit|suppress_limit}``),
or by both phrasings in full (``{arg:--keys age,sex|keys=['age', 'sex']}``,
``{arg:gpurisk protect --plan|gpurisk.protect(plan=...)}``: the command line's side holds a ``--``;
no ``{``, ``}`` or ``|`` inside).
A text without placeholders is left as it is, so plugins' plain reasons keep working.

Where each form goes:

- in memory, a reason is a :class:`Reason`: a ``str`` whose text is phrased for the side that
  made it (the Python API by default; the ``gpurisk`` command runs under :func:`side` ``"cli"``),
  keeping the neutral form in ``.template`` (``.cli`` and ``.python`` give either phrasing);
- **files store the neutral form** (a scan's ``*_reason`` columns, ``assess -o`` files), because
  both sides read them; :func:`gpurisk.read_scan` phrases them for the Python API, the commands
  that read a scan (``gpurisk report``) for the command line. A program that reads a scan file with
  pandas directly sees the placeholders; :func:`phrase` turns them into either form.

Raised errors follow the same idea with :class:`gpurisk.errors.BadInput` (``BadInput(text,
cli=...)``); :func:`bad_input` builds one from a neutral template.
"""
from __future__ import annotations

import re
from contextlib import contextmanager

#: placeholder -> (command line, Python API)
SETTINGS = {
    "population": ("--population POP", "population=POP"),
    "sample_flag": ("--sample-flag COL", "sample_flag=COL"),
    "fraction": ("--fraction PI", "fraction=PI"),
    "weights": ("--weights COL", "weights=COL"),
    "population_size": ("--population-size N", "population_size=N"),
    "dis_fraction": ("--dis-fraction F", "dis_fraction=F"),
    "backend_pandas": ("--backend pandas", "backend='pandas'"),
}
SIDES = ("python", "cli")

_PLACE = re.compile(r"\{(" + "|".join(SETTINGS) + r")\}|\{option:([\w-]+)\.([\w-]+)=([^{}]*)\}"
                    r"|\{arg:([^{}|]*--[^{}|]*)\|([^{}|]+)\}")
_side = "python"


def current_side() -> str:
    """``"cli"`` inside a ``gpurisk`` command, else ``"python"``."""
    return _side


@contextmanager
def side(where: str):
    """Phrase the messages made inside the block for ``where`` (``"cli"`` or ``"python"``)."""
    global _side
    if where not in SIDES:
        raise ValueError(f"side {where!r}: use 'python' or 'cli'")
    before, _side = _side, where
    try:
        yield
    finally:
        _side = before


def _python_value(v: str) -> str:
    if v in ("true", "false"):
        return v.capitalize()
    if re.fullmatch(r"[A-Z][A-Z0-9_]*|-?\d+(\.\d+)?", v):      # a placeholder (COLUMN) or a number
        return v
    return repr(v)


def _one(m: re.Match, where: str) -> str:
    if m.group(1):
        return SETTINGS[m.group(1)][0 if where == "cli" else 1]
    if m.group(5):
        return m.group(5) if where == "cli" else m.group(6)
    measure, name, value = m.group(2), m.group(3), m.group(4)
    if where == "cli":
        return f"--option {measure}.{name}={value}"
    return f"options={{{measure!r}: {{{name!r}: {_python_value(value)}}}}}"


def phrase(text, where: str | None = None):
    """``text`` (a template, a :class:`Reason` or a plain text) phrased for ``where`` (default: the
    current side). None and non-text values come back unchanged."""
    if not isinstance(text, str):
        return text
    where = where or _side
    template = getattr(text, "template", text)
    if "{" not in template:
        return str(template)
    return _PLACE.sub(lambda m: _one(m, where), template)


def stored(text):
    """The neutral form of ``text`` (what files store)."""
    return getattr(text, "template", text) if isinstance(text, str) else text


def has_placeholder(text) -> bool:
    return isinstance(text, str) and bool(_PLACE.search(getattr(text, "template", text)))


class Reason(str):
    """A reason text phrased for the side that made it; ``template`` keeps the neutral form."""

    template: str

    def __new__(cls, template: str, where: str | None = None):
        template = stored(template)
        obj = super().__new__(cls, phrase(template, where))
        obj.template = template
        return obj

    @property
    def cli(self) -> str:
        return phrase(self.template, "cli")

    @property
    def python(self) -> str:
        return phrase(self.template, "python")

    def __reduce__(self):          # unpickled (a Dask worker's result) in the reader's phrasing
        return (Reason, (self.template,))


def reason(text):
    """``text`` as a :class:`Reason` when it holds a placeholder, else unchanged."""
    return Reason(text) if has_placeholder(text) else text


def phrase_frame(frame, where: str | None = None):
    """A scan's rows with the ``*_reason`` columns (and ``reason``) phrased for ``where``."""
    cols = [c for c in frame.columns if str(c).endswith("_reason") or c == "reason"]
    if not cols:
        return frame
    frame = frame.copy()
    for c in cols:
        frame[c] = [phrase(v, where) if isinstance(v, str) else v for v in frame[c]]
    return frame


def bad_input(template: str):
    """A :class:`~gpurisk.errors.BadInput` from a neutral template: the Python API's text, with the
    command line's (``cli_message``)."""
    from gpurisk.errors import BadInput
    return BadInput(phrase(template, "python"), cli=phrase(template, "cli"))
