"""A third-party plugin installed the way pip would leave it, without pip: a module and a
``*.dist-info`` folder whose ``entry_points.txt`` names it in the group ``gpurisk``. Put the folder
on ``sys.path`` (or PYTHONPATH for a subprocess) and gpurisk finds it as an entry point."""
from __future__ import annotations

from pathlib import Path


def install(folder, dist_name: str, ep: str, module: str, src: str, version: str = "0.1") -> Path:
    folder = Path(folder)
    (folder / f"{module}.py").write_text(src)
    info = folder / f"{dist_name.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist_name}\nVersion: {version}\n")
    (info / "entry_points.txt").write_text(f"[gpurisk]\n{ep} = {module}\n")
    return folder
