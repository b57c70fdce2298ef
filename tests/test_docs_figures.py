"""The headline figures are said three times (README.md, the site's overview and its results page): each table
must say what the README says, workload by workload, or a reader meets two figures for one measurement."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NUMBER = re.compile(r"\d+(?:\.\d+)?")


def figures(path: Path) -> dict[str, tuple[list[str], list[str]]]:
    """{workload: the numbers of its 'what is tuned' cell, and of its 'best' cell}, from the table headed `| workload |`, its
    continuation rows (an empty first cell, as the README wraps long cells) merged into the row above."""
    lines = path.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| workload | what is tuned"))
    rows: dict[str, tuple[list[str], list[str]]] = {}
    name = ""
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells[0]:
            name = re.sub(r"[\[\]`]|\(.*\)", "", cells[0])
            rows[name] = ([], [])
        for column, cell in zip(rows[name], cells[1:], strict=True):
            column += NUMBER.findall(cell)
    return rows


@pytest.mark.parametrize("page", ["docs/index.md", "docs/results/index.md"])
def test_the_sites_tables_say_what_the_readme_says(page):
    readme = figures(ROOT / "README.md")
    assert len(readme) >= 5 and all(best for _, best in readme.values())
    assert figures(ROOT / page) == readme
