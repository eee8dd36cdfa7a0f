"""Checkpoints of ``gpurisk validate --resume DIR``: one JSON part per chunk of replicates.

``DIR/_validate.json`` holds the settings and a fingerprint of the population's counts; each finished
chunk of replicates of one sampling fraction is written (atomically: temporary name, then rename) as
``DIR/part-FFF-RRRRRRR.json`` with its result rows and the warnings it raised; when the last chunk of a
fraction is saved, ``DIR/done-FFF.json`` lists its parts. A run started again with
the same folder redraws the replicate samples from the same seeds (cheap) and skips every chunk whose
part exists (a fraction marked done is read back without drawing any sample), so a run killed at any
point resumes to the same numbers as an uninterrupted one. A folder
written for other settings or another population is refused, never silently mixed.
"""
from __future__ import annotations

import json
from pathlib import Path


from gpurisk.errors import BadInput
from gpurisk.core.messages import bad_input
from gpurisk.io import write_text_atomic
from gpurisk.io.checkpoint import fingerprint, load_checked

SETTINGS = "_validate.json"


def _fingerprint(settings: dict, F, cell_id) -> str:
    return fingerprint(settings, (F, cell_id))


class ChunkStore:
    def __init__(self, folder, settings: dict, F, cell_id):
        self.path = Path(folder)
        if self.path.exists() and not self.path.is_dir():
            raise bad_input(f"{{arg:--resume|resume}} {str(self.path)!r} is a file, not a folder")
        self.path.mkdir(parents=True, exist_ok=True)
        fp = _fingerprint(settings, F, cell_id)
        meta = self.path / SETTINGS
        if meta.exists():
            load_checked(meta, fp, unreadable=f"{meta} is not readable JSON",
                         mismatch=f"resume folder {str(self.path)!r} was written for another "
                                  "validation (population, keys, fractions, replicates, design, "
                                  "measures, seed or options differ); remove it or name another folder")
        else:
            if any(self.path.glob("part-*.json")):
                raise BadInput(f"resume folder {str(self.path)!r} holds parts but no {SETTINGS}")
            write_text_atomic(meta, json.dumps({"fingerprint": fp, "settings": settings},
                                               indent=2, default=str))
        for pattern in (".part-*", ".done-*"):      # temporary files of a killed run
            for tmp in self.path.glob(pattern):
                tmp.unlink(missing_ok=True)
        self.loaded = 0
        self.saved = 0

    def _part(self, fi: int, first: int) -> Path:
        return self.path / f"part-{fi:03d}-{first:07d}.json"

    def _done(self, fi: int) -> Path:
        return self.path / f"done-{fi:03d}.json"

    def complete(self, fi: int) -> bool:
        """Every chunk of fraction ``fi`` is saved (its ``done`` marker is written after the last)."""
        return self._done(fi).exists()

    def mark_complete(self, fi: int) -> None:
        parts = sorted(p.name for p in self.path.glob(f"part-{fi:03d}-*.json"))
        write_text_atomic(self._done(fi), json.dumps({"parts": parts}))

    def load_all(self, fi: int):
        """The saved chunks of a complete fraction, in replicate order."""
        meta = self._done(fi)
        try:
            parts = json.loads(meta.read_text())["parts"]
        except (OSError, ValueError, KeyError, TypeError):
            raise BadInput(f"checkpoint {meta} is not readable JSON; remove it to redo the "
                           "fraction's check") from None
        for name in parts:
            fi_, first = name[len("part-"):-len(".json")].split("-")
            got = self.load(int(fi_), int(first))
            if got is None:
                raise BadInput(f"resume folder {str(self.path)!r}: {name} is missing though "
                               f"{meta.name} lists it; remove {meta.name} to redo the fraction")
            yield got

    def load(self, fi: int, first: int):
        p = self._part(fi, first)
        if not p.exists():
            return None
        try:
            doc = json.loads(p.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise BadInput(f"checkpoint {p} is not readable JSON ({exc}); remove it to redo it") from None
        self.loaded += 1
        return doc["rows"], {k: list(v) for k, v in doc["caught"].items()}

    def save(self, fi: int, first: int, rows: list[dict], caught: dict) -> None:
        write_text_atomic(self._part(fi, first), json.dumps({"rows": rows, "caught": caught}))
        self.saved += 1
