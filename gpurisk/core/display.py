"""Short text and HTML views of result objects, for the console and notebooks (``_repr_html_``).

Every view is a few lines whatever the data's size: what the object is, how many records or
combinations, the top figures. Counts print as integers (``39320``, never ``3.932e+04``); other
figures with four significant digits. HTML is escaped (key names and measure names come from the
user's file and plugins).
"""
from __future__ import annotations

import math
from html import escape
from typing import Any, Iterable, Sequence


def fmt(v: Any, digits: int = 4) -> str:
    """A figure for display, the one number formatter of the commands and result views: '—' when
    missing or not finite, yes/no for a boolean, whole numbers as integers (18050, never
    1.805e+04), others to ``digits`` significant digits."""
    if v is None:
        return "—"
    if hasattr(v, "item") and getattr(v, "ndim", 0) == 0:
        v = v.item()
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if not math.isfinite(v):
            return "—"
        if v.is_integer() and abs(v) < 1e15:
            return str(int(v))
        return f"{v:.{digits}g}"
    return str(v)


def html_table(title: str, rows: Iterable[Sequence[Any]], header: Sequence[str] = (),
               notes: Iterable[str] = ()) -> str:
    """A small escaped HTML table: a caption, an optional header row, one row per item."""
    out = ['<div class="gpurisk-result"><table>',
           f'<caption style="text-align:left"><b>{escape(title)}</b></caption>']
    if header:
        out.append("<thead><tr>" + "".join(f"<th>{escape(str(h))}</th>" for h in header)
                   + "</tr></thead>")
    out.append("<tbody>")
    for row in rows:
        cells = [escape(c if isinstance(c, str) else fmt(c)) for c in row]
        out.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    out.append("</tbody></table>")
    for note in notes:
        out.append(f"<p>{escape(note)}</p>")
    out.append("</div>")
    return "\n".join(out)


def note_lines(measure: str, notes: Iterable[tuple[Any, Any]]) -> list[str]:
    """The † lines under a table of rows: ``notes`` is ``(row label, the note measure gives on
    that row's figure)`` in row order (None or "" where a row has none). Rows whose notes differ
    only in their figures (the same words, other numbers) share one line, which gives the first
    one's note and names the rows, so a ranking whose estimate carries the same kind of note in
    eight of its ten rows says it once."""
    import re
    groups: dict[str, tuple[list[Any], str]] = {}
    for label, note in notes:
        if not isinstance(note, str) or not note.strip():
            continue
        shape = re.sub(r"[0-9][0-9.,·eE+\-−]*", "#", note)
        groups.setdefault(shape, ([], note))[0].append(label)
    out = []
    for rows, note in groups.values():
        which = (f"row {rows[0]}" if len(rows) == 1 else
                 f"rows {', '.join(map(str, rows))} (the figures are row {rows[0]}'s)")
        out.append(f"† {measure}'s note, {which}: {note}")
    return out
