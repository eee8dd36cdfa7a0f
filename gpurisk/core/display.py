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
