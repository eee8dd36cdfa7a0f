"""The recommended protection for the decision page, from a ``protect`` plan (the JSON that
``protect --plan`` writes, or :attr:`gpurisk.protect.Protection.plan`): each key's released level
by its name (the hierarchy spec, or the ARX file and its column), the information loss, the
criteria it meets and the values it suppresses, with their share of the records."""
from __future__ import annotations

import json
from pathlib import Path

from gpurisk.errors import BadInput
from gpurisk.core.messages import bad_input
from gpurisk.protect.hierarchy import level_name, level_names  # noqa: F401  (re-exported)


def load_plan(plan) -> dict:
    """A plan document: a dict, a :class:`~gpurisk.protect.Protection`, or a JSON file."""
    if hasattr(plan, "plan") and isinstance(plan.plan, dict):
        return plan.plan
    if isinstance(plan, dict):
        return plan
    p = Path(plan)
    try:
        doc = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise bad_input(f"{{arg:--plan|protection}} {str(plan)!r}: no such file") from None
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        raise bad_input(f"{{arg:--plan|protection}} {p.name!r} is not a readable plan ({type(exc).__name__})") from None
    if not isinstance(doc, dict) or "gpurisk_protect_plan" not in doc or "node" not in doc:
        raise bad_input(f"{{arg:--plan|protection}} {p.name!r} is not a plan written by {{arg:gpurisk protect --plan|gpurisk.protect(plan=...)}}")
    return doc


def summary(plan, n: int | None = None) -> dict:
    """What the page shows of a protect run."""
    doc = load_plan(plan)
    hier = doc.get("hierarchies") or {}
    keys = []
    for k in doc.get("keys", []):
        lvl = int(doc["node"].get(k, 0))
        names = level_names(k, list(hier.get(k, [])))
        keys.append({"key": k, "level": lvl, "height": len(names) - 1,
                     "name": level_name(names, lvl),
                     "changed": lvl > 0})
    sup = doc.get("suppress") or {}
    records = int(sup.get("records") or 0)
    values = {k: int(v) for k, v in (sup.get("values") or {}).items() if v}
    crit = []
    for text, worst in (doc.get("released_worst") or doc.get("worst") or {}).items():
        crit.append({"criterion": text, "value": worst})
    return {"keys": keys, "loss": doc.get("loss"), "loss_value": doc.get("loss_value"),
            "loss_scaled": doc.get("loss_scaled"), "criteria": crit,
            "suppressed_records": records,
            "suppressed_share": (records / n) if n else None, "suppressed_values": values,
            "suppress_mode": sup.get("mode"), "perturb": (doc.get("perturb") or {}).get("specs"),
            "data_sha256": (doc.get("data") or {}).get("sha256"),
            "release_sha256": doc.get("release_sha256")}


def check_plan_keys(plan, scan_keys) -> None:
    """A plan whose keys are not among the scan's keys protects other variables than those the page
    judges: refused in one line (the page would recommend its protection without a word)."""
    doc = load_plan(plan)
    check_keys_of("{arg:--plan|protection}", "the plan protects", doc.get("keys"), scan_keys,
                  "give the plan of a protect run on this scan's keys (or scan the plan's keys)")


def check_keys_of(flag: str, what: str, keys, scan_keys, advice: str) -> None:
    """One line when any of ``keys`` (of a plan, a SUDA summary) is not among ``scan_keys``."""
    keys = [str(k) for k in (keys or [])]
    scan_keys = [str(k) for k in (scan_keys or [])]
    if not keys or not scan_keys:
        return
    other = [k for k in keys if k not in scan_keys]
    if other:
        which = ("none of them is" if len(other) == len(keys) else
                 f"{', '.join(map(repr, other))} {'is' if len(other) == 1 else 'are'} not")
        raise bad_input(f"{flag}: {what} the keys {', '.join(keys)}; {which} among the scan's keys "
                        f"({', '.join(scan_keys)}): {advice}")
