"""`tuner report`: one self-contained HTML page of figures for a workload, drawn from the store: convergence of
each campaign, the sweep tables as plots, the tuned best against the vendor references per size, failures by
class, and the best against the ceiling measured in its own campaign. Modules: data (reading the store),
figures (matplotlib), page (the sections and the HTML)."""

from __future__ import annotations

from pathlib import Path

from tuner.errors import TunerError
from tuner.store import safe_name


def write_report(
    workload: str,
    size: str | None = None,
    dtype: str | None = None,
    out_dir: str | Path = ".",
    *,
    gpu: str | None = None,
    root: Path | None = None,
) -> dict:
    """Write the page into `out_dir` (or to it, where it names an .html file) and return a summary of it (path, GPU, size, dtype, per section its figures
    or why it has none and its notes, and how many of the space's valid configs the selected size measured):
    what `tuner report --json` prints."""
    from tuner.report import data as report_data
    from tuner.report.page import render, sections

    gathered = report_data.gather(workload, size, dtype, gpu=gpu, root=root)
    parts = sections(gathered)
    text = render(gathered, parts)
    sel = gathered.selection
    size_name = str(sel.rows["size"].iloc[0])
    out = Path(out_dir)
    path = out / f"{safe_name(f'{workload}-{size_name}-{sel.dtype}')}.html"
    if out.suffix.lower() in (".html", ".htm") and not out.is_dir():  # the page's own file named, not a folder
        out, path = out.parent, out
    try:
        out.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as e:
        raise TunerError(f"cannot write the report to {path}: {e.strerror}") from None
    return {
        "path": str(path),
        "workload": workload,
        "gpu": gathered.gpu,
        "size": size_name,
        "dtype": sel.dtype,
        "objective": gathered.objective,
        "bytes": len(text.encode("utf-8")),
        "figures": sum(len(p.figures) for p in parts),
        "sections": {
            p.key: {
                "title": p.title,
                "figures": [f.name for f in p.figures],
                "empty": p.empty or None,
                "notes": p.notes,
            }
            for p in parts
        },
        "coverage": {
            "configs": int(sel.rows["config"].nunique()),
            "valid_configs": gathered.valid_configs,
        },
        "notes": gathered.notes,
        "degraded": gathered.degraded.as_dict() if gathered.degraded else None,
    }


__all__ = ["write_report"]
