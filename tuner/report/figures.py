"""The report's figures, drawn with matplotlib (its object API: no pyplot state, no display) and handed back
as SVG data URIs, so the page carries them and opens with no network and no files beside it."""

from __future__ import annotations

import base64
import io
import math
from dataclasses import dataclass

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.axis import Axis
from matplotlib.colors import to_rgb
from matplotlib.figure import Figure as MplFigure
from matplotlib.font_manager import FontProperties
from matplotlib.layout_engine import ConstrainedLayoutEngine
from matplotlib.lines import Line2D
from matplotlib.textpath import TextToPath
from matplotlib.ticker import FixedLocator, FuncFormatter, MaxNLocator, NullFormatter

from tuner.answers.compare_report import log_ticks
from tuner.formatting import readable

FAILURE_COLORS = {
    "compile": "#8c564b",
    "launch": "#d62728",
    "runtime": "#ff7f0e",
    "wrong_answer": "#9467bd",
    "timeout": "#7f7f7f",
    "invalid": "#bcbd22",
}


@dataclass
class Figure:
    """One drawn figure: what it shows (alt text and caption) and the image as a data URI."""

    name: str
    caption: str
    uri: str


def to_uri(fig: MplFigure) -> str:
    buffer = io.BytesIO()
    # the same bytes for the same data: no date, and the SVG's ids from a fixed salt, not a random one (a report
    # kept as a CI artifact would otherwise differ on every run)
    with matplotlib.rc_context({"svg.hashsalt": "tuner report"}):
        fig.savefig(buffer, format="svg", bbox_inches="tight", metadata={"Date": None})
    return "data:image/svg+xml;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def _grid(
    count: int, columns: int = 3, width: float = 4.2, height: float = 3.2, wspace: float = 0.02
) -> tuple[MplFigure, list[Axes]]:
    """A figure of `count` panels, `columns` to a row, `wspace` (of a panel's width) between the columns."""
    cols = min(columns, count)
    rows = math.ceil(count / cols)
    fig = MplFigure(figsize=(width * cols, height * rows), layout=ConstrainedLayoutEngine(wspace=wspace))
    axes = fig.subplots(rows, cols, squeeze=False).ravel()
    for ax in axes[count:]:
        ax.set_visible(False)
    return fig, list(axes[:count])


LOG_SPAN = 10.0  # a best so far whose largest value is this many times its smallest gets a log axis
LINE_STYLES = ("-", "--", ":", "-.")  # the campaigns of one strategy, one after the other


def integer_ticks(axis: Axis, most: float) -> None:
    """Ticks at whole numbers only (a count, up to `most`): 1, 2, 3 ..., never 2.5; on a log axis 1, 3, 10, 30 ...
    (or decades), spaced so that their labels do not run together."""
    if axis.get_scale() == "log":
        axis.set_major_locator(FixedLocator(log_ticks(1, most, most=6, whole=True)))
        axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:.0f}"))
        axis.set_minor_formatter(NullFormatter())
    else:
        axis.set_major_locator(MaxNLocator(integer=True))


def log_if_wide(ax: Axes, values: pd.Series, maximize: bool) -> bool:
    """A log y axis where a lower-is-better best so far is positive and spans LOG_SPAN or more: the first
    evaluations' times would squash the converged part flat at the bottom of a linear axis, which a log axis
    spreads out (a higher-is-better best converges at the top, where a linear axis already gives it more room
    than a log one would). Ticked in plain numbers, enough of them to read the converged part; whether set."""
    v = values.astype(float).to_numpy()
    v = v[np.isfinite(v)]
    if maximize or not len(v) or v.min() <= 0 or v.max() / v.min() < LOG_SPAN:
        return False
    ax.set_yscale("log")
    ax.yaxis.set_major_locator(FixedLocator(log_ticks(float(v.min()), float(v.max()))))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda t, _: readable(float(t))))
    ax.yaxis.set_minor_formatter(NullFormatter())
    return True


def campaign_styles(count: int, color: str) -> list[dict]:
    """The lines of `count` campaigns of one strategy: its colour, from darker to lighter, each with a line style
    of its own, so that campaigns of one strategy can be told apart while the colour still says the strategy."""
    base = np.array(to_rgb(color))
    out = []
    for i in range(count):
        t = 0.0 if count == 1 else -0.35 + 0.85 * i / (count - 1)  # below 0: mixed with black, above: with white
        shade = base * (1 + t) if t < 0 else base + (1 - base) * t
        out.append({"color": tuple(float(c) for c in shade), "linestyle": LINE_STYLES[i % len(LINE_STYLES)]})
    return out


def convergence(frame: pd.DataFrame, objective: str, maximize: bool) -> MplFigure:
    """One panel per size: each campaign's best so far against evaluations, coloured by strategy (a shade and a
    line style per campaign, a dot where it ended: its final best), integer ticks on the evaluations, a log y
    axis where the best so far spans LOG_SPAN or more; one legend, by strategy, above the panels."""
    sizes = list(dict.fromkeys(frame["size"]))
    strategies = sorted(frame["strategy"].unique())
    colors = {s: f"C{i % 10}" for i, s in enumerate(strategies)}
    fig, axes = _grid(len(sizes))
    for ax, size in zip(axes, sizes):
        at_size = frame[frame["size"] == size]
        runs = at_size.drop_duplicates("campaign_id")
        counts = runs["strategy"].astype(str).value_counts()
        for strategy in sorted(counts.index):
            ids = sorted(runs.loc[runs["strategy"].astype(str) == strategy, "campaign_id"])
            for campaign, style in zip(ids, campaign_styles(len(ids), colors[strategy])):
                run = at_size[at_size["campaign_id"] == campaign]
                x, y = run["evaluation"].to_numpy(), run["best"].astype(float).to_numpy()
                ax.step(x, y, where="post", linewidth=1.4, **style)
                ax.plot(x[-1:], y[-1:], "o", markersize=4, color=style["color"], zorder=3)  # the final best
        if at_size["evaluation"].max() > 100:
            ax.set_xscale("log")
        integer_ticks(ax.xaxis, float(at_size["evaluation"].max()))
        ax.margins(x=0.04, y=0.06)  # the last evaluation's rise and dot clear of the frame
        log_if_wide(ax, at_size["best"], maximize)
        campaigns = [f"{n} {s}" for s, n in sorted(counts.items())]
        total = int(counts.sum())
        ax.set_title(f"{size}: {', '.join(campaigns)} campaign{'s' * (total > 1)}", fontsize=10)
        ax.set_xlabel("evaluations")
        ax.set_ylabel(f"best {objective} so far ({'higher' if maximize else 'lower'} is better)", fontsize=8)
        ax.grid(alpha=0.3)
    handles = [Line2D([], [], color=colors[s], linewidth=1.4, marker="o", markersize=4) for s in strategies]
    legend_above(fig, handles, strategies, ncol=min(len(strategies), 6))
    return fig


def legend_above(fig: MplFigure, handles: list, labels: list[str], ncol: int = 4) -> None:
    """The figure's one legend, above its panels: it hides no data (a legend inside a panel sits on a curve's
    final rise or on a bar's dot)."""
    fig.legend(handles, labels, loc="outside upper center", ncol=max(1, ncol), fontsize=8, frameon=False)


def sweeps(tables: dict[str, pd.DataFrame], objective: str) -> MplFigure:
    """One panel per parameter: the best (bar) and median (dot) objective per value; the legend above the
    panels."""
    fig, axes = _grid(len(tables), columns=3, width=3.8, height=2.8)
    for ax, (param, table) in zip(axes, tables.items()):
        x = np.arange(len(table))
        best, median = table[f"best {objective}"].astype(float), table[f"median {objective}"].astype(float)
        ax.bar(x, best, color="C0", alpha=0.8, label="best")
        ax.plot(x, median, "o", color="C1", markersize=4, label="median")
        ax.set_xticks(x, [str(v) for v in table[param]], rotation=45 if len(table) > 5 else 0, fontsize=8)
        ax.set_xlabel(param)
        ax.set_ylabel(objective, fontsize=8)
        ax.grid(axis="y", alpha=0.3)
    handles, labels = axes[0].get_legend_handles_labels()
    legend_above(fig, handles, [f"{label} {objective} of the value's configurations" for label in labels])
    return fig


CELL_FONT = (7.0, 10.0)  # points: the smallest text in a heat map's cell that still reads, and the largest used


def text_width(text: str, size: float) -> float:
    """The width of `text` in points at font size `size`, in the font the figures draw with."""
    width, _, _ = TextToPath().get_text_width_height_descent(text, FontProperties(size=size), ismath=False)
    return float(width)


def cell_font(fig: MplFigure, ax: Axes, cells: np.ma.MaskedArray) -> float:
    """The largest font size, up to CELL_FONT's largest, at which every value of a placed heat map fits its
    cell (its width with a margin each side, its height with room above and below); 0 for a map with no value."""
    labels = [readable(float(v)) for v in cells.compressed()]
    if not labels:
        return 0.0
    box = ax.get_window_extent()
    points = 72 / fig.dpi
    width, height = box.width * points / cells.shape[1], box.height * points / cells.shape[0]
    widest = max(text_width(label, 1.0) for label in labels)  # points per point of font size
    return min(CELL_FONT[1], 0.8 * width / widest, 0.55 * height)


TICK_FONT = 8.0  # points: the tick labels of a heat map's values


def cell_ticks(fig: MplFigure, ax: Axes, across: list[str], down: list[str]) -> None:
    """A placed heat map's tick labels, one per column and row where they fit: the columns' turned upright where
    the widest is wider than its cell, and where even so (or a row's) a line is taller than its cell, every
    second (third ...) value labelled, so that no two labels run together."""
    box = ax.get_window_extent()
    points = 72 / fig.dpi
    width, height = box.width * points / len(across), box.height * points / len(down)
    line = 1.3 * TICK_FONT  # a label's height with the room between two
    upright = max(text_width(label, TICK_FONT) for label in across) + 2 > width
    step = math.ceil(line / width) if upright else 1
    ax.set_xticks(range(0, len(across), step), across[::step], fontsize=TICK_FONT, rotation=90 if upright else 0)
    step = math.ceil(line / height)
    ax.set_yticks(range(0, len(down), step), down[::step], fontsize=TICK_FONT)


def heatmaps(
    grids: dict[tuple[str, str], pd.DataFrame], objective: str, maximize: bool
) -> tuple[MplFigure, list[tuple[str, str]]]:
    """One panel per parameter pair: the best objective over both, brighter is better, its colour bar beside
    it; blank where no configuration of that pair succeeded. The values are written in the cells, all at one
    size (the largest at which each fits its cell, CELL_FONT at most), in every map whose cells hold them at
    CELL_FONT's smallest or more; returns the figure and the pairs whose cells are too small for them, whose
    values are read off the colour bar."""
    # room between the columns: a colour bar's label would otherwise sit against the next map's axis label
    fig, axes = _grid(len(grids), columns=2, width=5.6, height=4.0, wspace=0.08)
    panels = []
    for ax, ((down, across), grid) in zip(axes, grids.items()):
        cells = np.ma.masked_invalid(grid.to_numpy(dtype=float))
        image = ax.imshow(cells, cmap="viridis" if maximize else "viridis_r", aspect="auto")
        ax.set_xlabel(across)
        ax.set_ylabel(down)
        fig.colorbar(image, ax=ax, label=f"best {objective}")
        panels.append((ax, image, cells, [str(c) for c in grid.columns], [str(i) for i in grid.index]))
    fig.draw_without_rendering()  # the panels placed: how much room each cell gives its axis' labels
    for ax, _, _, across_values, down_values in panels:
        cell_ticks(fig, ax, across_values, down_values)
    fig.draw_without_rendering()  # placed again, as they will be saved: their cells' size in points
    fits = [cell_font(fig, ax, cells) for ax, _, cells, _, _ in panels]
    size = min((f for f in fits if f >= CELL_FONT[0]), default=CELL_FONT[0])
    for (ax, image, cells, _, _), fit in zip(panels, fits):
        if fit < CELL_FONT[0]:
            continue
        for (i, j), value in np.ndenumerate(cells.filled(np.nan)):
            if np.isfinite(value):
                shade = float(np.asarray(image.norm(value)))  # 0..1 along the map; viridis is light at its top
                bright = shade > 0.6 if maximize else shade < 0.4
                color = "black" if bright else "white"
                ax.text(j, i, readable(float(value)), ha="center", va="center", fontsize=size, color=color)
    return fig, [pair for pair, fit in zip(grids, fits) if fit < CELL_FONT[0]]


def versus(frame: pd.DataFrame) -> MplFigure:
    """Per size (small at the top, large at the bottom), the reference's time over the tuned config's, one marker
    series per reference."""
    sizes = list(dict.fromkeys(frame["size"]))
    fig = MplFigure(figsize=(7.5, max(2.4, 0.2 * len(sizes) + 1.4)), layout="constrained")
    ax = fig.subplots()
    y = {s: i for i, s in enumerate(sizes)}
    for i, (name, group) in enumerate(frame.groupby("baseline", sort=True)):
        ax.plot(group["speedup"], [y[s] for s in group["size"]], "o", color=f"C{i}", label=name, markersize=5)
    ax.axvline(1.0, color="black", linewidth=0.8, linestyle="--")
    ax.set_yticks(range(len(sizes)), sizes, fontsize=7)
    ax.set_ylim(len(sizes) - 0.5, -0.5)
    ax.set_xlabel("reference time / tuned time (above 1: tuned is faster)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return fig


def failures(frame: pd.DataFrame) -> MplFigure:
    """Per size, the failed evaluations stacked by failure class."""
    table = frame.pivot_table(index="size", columns="status", values="count", aggfunc="sum", fill_value=0)
    fig = MplFigure(figsize=(7, max(2.5, 0.35 * len(table) + 1.2)), layout="constrained")
    ax = fig.subplots()
    left = np.zeros(len(table))
    for status in table.columns:
        counts = table[status].to_numpy(dtype=float)
        ax.barh(range(len(table)), counts, left=left, label=status, color=FAILURE_COLORS.get(str(status)))
        left += counts
    ax.set_yticks(range(len(table)), [str(s) for s in table.index], fontsize=8)
    ax.set_xlabel("failed evaluations")
    ax.grid(axis="x", alpha=0.3)
    ax.legend(fontsize=8)
    return fig


def roofline(frame: pd.DataFrame) -> MplFigure:
    """Per size and metric, the tuned best as a fraction of the ceiling measured in its campaign, each bar
    labelled with its figures (bar_labels)."""
    labels = [f"{s} ({m})" for s, m in zip(frame["size"], frame["metric"])]
    fig = MplFigure(figsize=(7.5, max(2.2, 0.4 * len(frame) + 1.2)), layout="constrained")
    ax = fig.subplots()
    y = np.arange(len(frame))
    percent = 100 * frame["fraction"].astype(float).to_numpy()
    ax.barh(y, percent, color="C2")
    ax.axvline(100, color="black", linewidth=0.8, linestyle="--")
    ax.set_yticks(y, labels, fontsize=8)
    ax.set_ylim(len(frame) - 0.5, -0.5)  # in the order of the sizes, small at the top
    ax.set_xlabel("tuned best, % of the measured ceiling")
    ax.grid(axis="x", alpha=0.3)
    rows = zip(frame["achieved"], frame["ceiling"], frame["metric"], frame["reference"])
    texts = [f"{readable(float(a))} / {readable(float(c))} {m}, {str(r).split(' ')[0]}" for a, c, m, r in rows]
    bar_labels(ax, percent, texts)
    return fig


BAR_LABEL_PAD = 4.0  # points between a bar's label and the bar's start or end


def bar_labels(ax: Axes, lengths: np.ndarray, texts: list[str], fontsize: float = 8) -> None:
    """Label horizontal bars (from 0, at y = 0, 1, ...): inside its bar, in white from its start, where the bar
    is long enough to hold the label; else just past the bar's end, in black on a white ground (over grid
    lines and the 100% line), the x axis widened where it must be so that no label runs past the axes."""
    fig = ax.get_figure(root=True)
    assert isinstance(fig, MplFigure)
    fig.draw_without_rendering()  # the axes placed as they will be saved: its width in points
    span = ax.get_window_extent().width * 72 / fig.dpi
    widths = np.array([text_width(t, fontsize) + 2 * BAR_LABEL_PAD for t in texts])  # points, pads included
    lengths = np.nan_to_num(np.asarray(lengths, dtype=float))
    high = ax.get_xlim()[1]
    for _ in range(5):  # the axis' end decides which labels fit inside their bars, and the others move its end
        inside = lengths * span / high >= widths
        # an outer label ends at its bar's end plus its width, which must lie within the axes (with a margin)
        room = np.maximum(1 - widths / span, 0.2)
        wanted = max([high, *(1.02 * lengths[~inside] / room[~inside])])
        if wanted <= high:
            break
        high = wanted
    inside = lengths * span / high >= widths
    ax.set_xlim(0, high)
    pad = BAR_LABEL_PAD * high / span  # points in data units
    for i, (length, text, fits) in enumerate(zip(lengths, texts, inside)):
        if fits:
            ax.text(pad, i, text, va="center", ha="left", fontsize=fontsize, color="white")
        else:
            ground = {"facecolor": "white", "edgecolor": "none", "pad": 1.0, "alpha": 0.85}
            ax.text(length + pad, i, text, va="center", ha="left", fontsize=fontsize, color="black", bbox=ground)
