"""How the tool writes values, configs and tables for people: numbers in 4 significant digits, configs that
wrap between parameters, and tables that fit the terminal without cutting a name or a number.

A table (`fitted`) is tried in three layouts, the first that fits the width wins: the full table; a compact
one (columns whose value is the same in every row said once above it, no vertical rules, optional columns
left out and headers broken at underscores only where it takes that); and a vertical one (each row as a paragraph of `name=value` items, or as a record of
`name  value` lines), which fits any width."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from rich import box
from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text


def readable(v: float, keep_zeros: bool = False) -> str:
    """A measured value in 4 significant digits, never in exponent form: 43122.2 -> "43122", 0.39841 ->
    "0.3984"; `keep_zeros` ("281.0", not "281") lines a table's column up."""
    if abs(v) >= 1000:
        return f"{v:.0f}"
    return f"{v:#.4g}" if keep_zeros else f"{v:.4g}"


def config_items(config: dict) -> list[str]:
    """["block_size_x=256", "variant=7", ...]: the units a config wraps between."""
    return [f"{k}={v}" for k, v in config.items()]


def config_text(config: dict) -> str:
    """block_size_x=256, variant=7, ..."""
    return ", ".join(config_items(config))


def pack(items: Sequence[str], width: int, sep: str = ", ") -> list[str]:
    """`items` joined by `sep` in lines of at most `width` cells, broken only between items (the separator's
    trailing spaces dropped at a break); an item wider than a line has a line of its own, for the renderer
    to fold (prose, never a name or a number in practice)."""
    lines: list[str] = []
    line = ""
    for i, item in enumerate(items):
        last = i == len(items) - 1
        piece = item + ("" if last else sep.rstrip())
        if line and cell_len(line + sep[len(sep.rstrip()) :] + piece) <= width:
            line += sep[len(sep.rstrip()) :] + piece
        else:
            if line:
                lines.append(line)
            line = piece
    if line or not lines:
        lines.append(line)
    return lines


class Items:
    """A rich renderable of items (a config's `name=value`s, sizes, dtypes) that wraps between items, never
    inside one: in a table cell, a grid or on its own."""

    def __init__(self, items: Iterable[str], sep: str = ", ", style: str = "") -> None:
        self.items, self.sep, self.style = [str(i) for i in items], sep, style

    def __str__(self) -> str:
        return self.sep.join(self.items)

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        if not self.items:
            return Measurement(0, 0)
        widest = max(cell_len(i) + cell_len(self.sep.rstrip()) for i in self.items)
        return Measurement(widest, cell_len(str(self))).with_maximum(options.max_width)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        for line in pack(self.items, options.max_width, self.sep):
            yield Text(line, style=self.style, overflow="fold")


@dataclass
class Field:
    """A column of a `fitted` table. `numeric`: right-aligned; `wrap`: prose or Items, which may wrap
    (anything else is a name or a number, shown whole on one line); `flag`: a yes/no column, "*" in a table
    and its name alone in a row's items; `keep`: never said once above the table even where every row has
    the same value (the objective); `optional`: left out of a compact table that would not fit with it (said
    above it; the vertical layouts show every field)."""

    name: str
    numeric: bool = False
    wrap: bool = False
    flag: bool = False
    keep: bool = False
    optional: bool = False


def fitted(
    fields: Sequence[Field],
    rows: Sequence[Sequence[object]],
    width: int,
    *,
    title: str | None = None,
    vertical: str = "items",
) -> RenderableType:
    """The rows as a table that fits `width` (see the module's doc); `vertical` names the last layout:
    "items" (a numbered paragraph per row: long tables of short values) or "records" (a block per row,
    one line per field: few rows of long values)."""
    cells = [[_cell(f, v) for f, v in zip(fields, row, strict=True)] for row in rows]
    full = _table(fields, cells, title, box.HEAVY_HEAD, (0, 1), headers=[f.name for f in fields])
    if _fit(full, fields, width):
        return full
    same = [
        i
        for i, f in enumerate(fields)
        if len(rows) > 1 and not f.keep and len({str(c[i]) for c in cells}) == 1 and str(cells[0][i])
    ]
    kept = [i for i in range(len(fields)) if i not in same]
    optional = [i for i in kept if fields[i].optional]
    for shown in (kept, [i for i in kept if i not in optional]) if optional else (kept,):
        if not shown:
            break
        sub_fields = [fields[i] for i in shown]
        sub_cells = [[c[i] for i in shown] for c in cells]
        broken = [_header(f.name, _widest(c[j] for c in sub_cells)) for j, f in enumerate(sub_fields)]
        for headers in ([f.name for f in sub_fields], broken):  # whole names where they fit
            compact = _table(sub_fields, sub_cells, title, box.SIMPLE_HEAD, (0, 1, 0, 0), headers=headers, edge=False)
            if _fit(compact, sub_fields, width):
                break
        else:
            continue
        notes = Table.grid(padding=(0, 1))
        notes.add_column(no_wrap=True, style="dim")
        notes.add_column()
        if same:
            notes.add_row("in every row:", Items([f"{fields[i].name} {cells[0][i]}" for i in same]))
        if len(shown) < len(kept):
            notes.add_row("left out here:", Items([fields[i].name for i in kept if i not in shown]))
        return Group(notes, compact) if notes.row_count else compact
    return records(fields, rows, title) if vertical == "records" else _paragraphs(fields, cells, title)


def _cell(field: Field, value: object) -> Text | Items:
    """A table's cell: Items as they are, anything else as plain text (never read as rich markup)."""
    if field.flag:
        return Text("*" if value else "")
    return value if isinstance(value, Items) else Text("" if value is None else str(value))


def _table(
    fields: Sequence[Field],
    cells: list[list[Text | Items]],
    title: str | None,
    style: box.Box,
    padding: tuple[int, int] | tuple[int, int, int, int],
    *,
    headers: list[str],
    edge: bool = True,
) -> Table:
    table = Table(title=title, box=style, padding=padding, show_edge=edge, pad_edge=edge, highlight=False)
    for f, header in zip(fields, headers, strict=True):
        # fold, never an ellipsis: even where rich must squeeze a column, no character is lost
        table.add_column(Text(header), justify="right" if f.numeric else "left", no_wrap=not f.wrap, overflow="fold")
    for row in cells:
        table.add_row(*row)
    return table


def _fit(table: Table, fields: Sequence[Field], width: int) -> bool:
    """Whether `table` fits `width` with every name and number whole (its columns that do not wrap at their
    widest, those that wrap at least at their widest word or item); if so, the wrapping columns get widths
    within it (the room left shared out evenly, a column that wants less than its share whole), so that rich
    never squeezes a column below its widest word."""
    console = Console(width=10**5)
    spans = []
    for column in table.columns:
        ms = [Measurement.get(console, console.options, c) for c in (column.header, *column.cells)]
        spans.append((max(m.minimum for m in ms), max(m.maximum for m in ms)))
    overhead = console.measure(table).maximum - sum(hi for _, hi in spans)
    wraps = [j for j, f in enumerate(fields) if f.wrap]
    least = overhead + sum(spans[j][0] if j in wraps else spans[j][1] for j in range(len(spans)))
    if least > width:
        return False
    room = width - least
    wanted = sorted(wraps, key=lambda j: spans[j][1] - spans[j][0])  # the least wanting whole first
    for n, j in enumerate(wanted):
        extra = min(spans[j][1] - spans[j][0], room // (len(wanted) - n))
        table.columns[j].width, room = spans[j][0] + extra, room - extra
    return True


def _widest(values: Iterable[Text | Items]) -> int:
    return max((cell_len(str(v)) for v in values if not isinstance(v, Items)), default=0)


def _header(name: str, width: int) -> str:
    """A header broken after its underscores and at its spaces (items_per_thread -> items_/per_/thread) into
    lines as wide as its column's values, where that is narrower than the name."""
    lines = []
    for word in name.split(" "):
        pieces = [p + "_" for p in word.split("_")]
        pieces[-1] = pieces[-1][:-1]
        lines += pack(pieces, max(width, 1), sep="")
    return "\n".join(pack(lines, max(width, 1), sep=" "))


def _paragraphs(fields: Sequence[Field], cells: list[list[Text | Items]], title: str | None) -> RenderableType:
    grid = Table.grid(padding=(0, 1))
    grid.add_column(justify="right", no_wrap=True, style="dim")
    grid.add_column()
    for n, row in enumerate(cells, 1):
        items = [i for f, c in zip(fields, row, strict=True) if str(c) for i in _items(f, c)]
        grid.add_row(f"{n}.", Items(items, sep="  "))
    return Group(Text(title, style="italic"), grid) if title else grid


def _items(field: Field, cell: Text | Items) -> list[str]:
    """A cell as the items of a row's paragraph: `name=value`; a flag by its name; Items one by one."""
    if field.flag:
        return [field.name]
    if isinstance(cell, Items):
        return [f"{field.name}: {cell.items[0]}", *cell.items[1:]] if cell.items else []
    return [f"{field.name}={cell}" if not field.wrap else f"{field.name}: {cell}"]


def records(fields: Sequence[Field], rows: Sequence[Sequence[object]], title: str | None = None) -> RenderableType:
    """Each row as a block: its first field's value in bold, then a `name  value` line per other field (a
    value that wraps keeps to its own column): fits any width."""
    cells = [[_cell(f, v) for f, v in zip(fields, row, strict=True)] for row in rows]
    parts: list[RenderableType] = [Text(title, style="italic")] if title else []
    for row in cells:
        parts.append(Text(str(row[0]), style="bold"))
        grid = Table.grid(padding=(0, 1))
        grid.add_column(no_wrap=True, style="dim")
        grid.add_column(overflow="fold")
        for f, c in zip(fields[1:], row[1:], strict=True):
            if str(c):
                grid.add_row(" " + f.name, c)
        parts.append(grid)
    return Group(*parts)
