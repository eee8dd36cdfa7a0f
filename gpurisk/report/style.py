"""The pages' shared style sheet and the Jinja2 environment of ``templates/``."""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

TEMPLATES = Path(__file__).with_name("templates")

#: inline CSS of every gpurisk page: tables scroll inside their box, long words wrap
CSS = (TEMPLATES / "style.css").read_text(encoding="utf-8")


@lru_cache(maxsize=1)
def environment():
    """The Jinja2 environment: templates of this package, HTML autoescaped."""
    try:
        import jinja2
    except ModuleNotFoundError:      # pragma: no cover - a dependency
        from gpurisk.errors import BadInput
        raise BadInput("gpurisk report renders with jinja2: pip install jinja2") from None
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)),
                             autoescape=jinja2.select_autoescape(["html", "j2"]),
                             trim_blocks=True, lstrip_blocks=True)
    env.filters["soft"] = soft
    return env


def soft(text, after: str = "_/") -> "markupsafe.Markup":  # noqa: F821
    """``text`` escaped, with a break opportunity (``<wbr>``) after each of ``after``: a long name
    (``k_anonymity.k_achieved>=3``) wraps at its parts in a narrow column instead of widening the
    table; numbers keep whole (``.`` is not in the default)."""
    import re

    from markupsafe import Markup, escape
    if not after:
        return escape(text)
    return Markup(re.sub("([" + re.escape(after) + "])", r"\1<wbr>", str(escape(text))))
