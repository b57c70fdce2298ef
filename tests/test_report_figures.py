"""The report's and compare-strategies' figures as people see them: heat-map values legible or left out (and the
caption saying so), nothing of one map crowding the next, bar labels inside a long bar and just past a short
one and never past the axes, one size notation on every figure (gemm's MxNxK), one log-tick rule for both
commands with the comparison's budget tick kept. The figures are laid out by matplotlib's renderer and their
texts' boxes measured: no two drawn texts may overlap."""

from __future__ import annotations

import re
from itertools import combinations

import numpy as np
import pandas as pd
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.text import Text
from matplotlib.transforms import Bbox

from tuner import locations
from tuner.answers import compare_report
from tuner.report import figures, page
from tuner.report.data import gather, notation, size_labels
from tuner.workloads.registry import get_workload

STORE = locations.BUILTIN_RESULTS


def _drawn_texts(fig: Figure, within=None) -> list[tuple[Text, Bbox]]:
    """Every text the saved figure shows (of the artist `within` alone, where given), with its box in pixels:
    titles, axis and colour-bar labels, legend entries, texts in the axes, and the tick labels of the ticks
    within their axis' view (matplotlib keeps labels for ticks outside it, undrawn); none of a hidden panel."""
    renderer = FigureCanvasAgg(fig).get_renderer()
    fig.draw(renderer)
    undrawn = set()
    for ax in fig.axes:
        if not ax.get_visible():
            undrawn |= {id(t) for t in ax.findobj(Text)}
        for axis in (ax.xaxis, ax.yaxis):
            low, high = sorted(axis.get_view_interval())
            span = high - low
            for tick in axis.get_major_ticks() + axis.get_minor_ticks():
                if not low - 1e-9 * span <= tick.get_loc() <= high + 1e-9 * span:
                    undrawn |= {id(tick.label1), id(tick.label2)}
    out = []
    for t in (within or fig).findobj(Text):
        if t.get_visible() and t.get_text().strip() and id(t) not in undrawn:
            out.append((t, t.get_window_extent(renderer)))
    return out


def _overlaps(fig: Figure) -> list[tuple[str, str]]:
    pairs = []
    for (a, box_a), (b, box_b) in combinations(_drawn_texts(fig), 2):
        across = min(box_a.x1, box_b.x1) - max(box_a.x0, box_b.x0)
        up = min(box_a.y1, box_b.y1) - max(box_a.y0, box_b.y0)
        if across > 0.5 and up > 0.5:
            pairs.append((a.get_text(), b.get_text()))
    return pairs


def _grid(rows: int, cols: int, scale: float = 3000.0, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    values = rng.uniform(0.1, 1, (rows, cols)) * scale
    values[rng.uniform(size=(rows, cols)) < 0.2] = np.nan
    return pd.DataFrame(values, index=[2**i for i in range(rows)], columns=[str(2**i) for i in range(cols)])


# ---- heat maps -------------------------------------------------------------------------------------------


def test_heat_map_values_are_legible_one_size_throughout_or_left_out_where_cells_are_small():
    grids = {("a", "b"): _grid(24, 24), ("c", "d"): _grid(4, 5, 123456.0), ("e", "f"): _grid(7, 7)}
    fig, bare = figures.heatmaps(grids, "GB/s", maximize=True)
    maps = [ax for ax in fig.axes if ax.images]
    assert len(maps) == 3 and bare == [("a", "b")]  # 24 x 24 cells: too small to write in
    assert not maps[0].texts
    sizes = {t.get_fontsize() for ax in maps[1:] for t in ax.texts}
    assert len(sizes) == 1 and figures.CELL_FONT[0] <= sizes.pop() <= figures.CELL_FONT[1]
    assert len(maps[1].texts) == int(np.isfinite(grids[("c", "d")].to_numpy()).sum())
    renderer = FigureCanvasAgg(fig).get_renderer()
    fig.draw(renderer)
    for ax in maps[1:]:  # each value within its cell
        rows, cols = ax.images[0].get_array().shape
        box = ax.get_window_extent(renderer)
        cell_w, cell_h = box.width / cols, box.height / rows
        for t in ax.texts:
            j, i = t.get_position()
            cell = Bbox.from_bounds(box.x0 + j * cell_w, box.y1 - (i + 1) * cell_h, cell_w, cell_h)
            text = t.get_window_extent(renderer)
            assert cell.x0 <= text.x0 and text.x1 <= cell.x1 and cell.y0 <= text.y0 and text.y1 <= cell.y1
    assert _overlaps(fig) == []  # the 24 values across included: turned upright, every other labelled


def test_a_heat_maps_colour_bar_label_keeps_clear_of_the_next_map():
    grids = {("BLOCK", "VEC"): _grid(2, 2, 17.0), ("BLOCK", "LOOKAHEAD"): _grid(2, 2, 17.0, seed=1)}
    fig, _ = figures.heatmaps(grids, "time_ms", maximize=False)
    texts = _drawn_texts(fig)
    label = min((box for t, box in texts if t.get_text() == "best time_ms"), key=lambda box: box.x0)  # the left map's
    right_map = [ax for ax in fig.axes if ax.images][1]
    right = _drawn_texts(fig, within=right_map)  # its axis label, tick labels, values
    assert {"BLOCK", "LOOKAHEAD"} <= {t.get_text() for t, _ in right}
    gap = min(box.x0 for _, box in right) - label.x1
    assert gap >= 12 * fig.dpi / 72  # points: a colour bar's label reads as its own map's, not the next one's
    assert _overlaps(fig) == []


def test_the_caption_says_which_maps_are_read_off_their_colour_bar():
    assert page._bare_maps([], 3) == ""
    assert "too small" in page._bare_maps([("a", "b")], 1) and "a by b" not in page._bare_maps([("a", "b")], 1)
    assert "The cells of a by b are too small" in page._bare_maps([("a", "b")], 2)


# ---- bar labels ------------------------------------------------------------------------------------------


def _roofline_frame(fractions: list[float], reference: str = "copy (same campaign)") -> pd.DataFrame:
    n = len(fractions)
    frame = pd.DataFrame(
        {
            "size": [f"s{i}" for i in range(n)],
            "metric": "GB/s",
            "achieved": [3000.0 * f for f in fractions],
            "ceiling": 3000.0,
            "reference": reference,
        }
    )
    return frame.assign(fraction=fractions)


@pytest.mark.parametrize(
    ("fractions", "reference"),
    [
        ([0.01, 0.2, 0.82, 1.01, 1.6], "copy (same campaign)"),
        ([0.01, 0.05], "copy (same campaign)"),  # every label past its bar
        ([0.3, 0.97], "a_very_long_reference_name_that_fills_half_the_axes_or_more (same campaign)"),
    ],
)
def test_bar_labels_inside_a_long_bar_just_past_a_short_one_and_never_past_the_axes(fractions, reference):
    fig = figures.roofline(_roofline_frame(fractions, reference))
    (ax,) = fig.axes
    renderer = FigureCanvasAgg(fig).get_renderer()
    fig.draw(renderer)
    frame = ax.get_window_extent(renderer)
    bars = sorted(ax.patches, key=lambda p: p.get_y())
    assert len(ax.texts) == len(bars) == len(fractions)
    for text, bar in zip(sorted(ax.texts, key=lambda t: t.get_position()[1]), bars):
        box, drawn = text.get_window_extent(renderer), bar.get_window_extent(renderer)
        assert frame.x0 <= box.x0 and box.x1 <= frame.x1  # within the axes: never clipped or past them
        assert drawn.y0 <= (box.y0 + box.y1) / 2 <= drawn.y1  # beside its own bar
        if text.get_color() == "white":  # inside: the bar holds it whole
            assert drawn.x0 < box.x0 and box.x1 < drawn.x1
        else:  # past the bar's end, close to it, on a white ground
            assert text.get_color() == "black" and text.get_bbox_patch() is not None
            assert 0 < box.x0 - drawn.x1 < 10 * fig.dpi / 72
    # the long bars hold their labels; the shortest never does
    assert ax.texts[0].get_color() == "black"
    if max(fractions) > 0.8 and "long" not in reference:
        assert any(t.get_color() == "white" for t in ax.texts)
    assert _overlaps(fig) == []


# ---- one size notation -----------------------------------------------------------------------------------


def test_gemm_sizes_are_named_in_its_mxnxk_notation_on_every_figure():
    """The H200's gemm campaigns include sizes given by their variables (stored as m=1024,n=1024,k=4096): the
    figures name them as the space names its sizes, 1024x1024x4096, which `--size` reads back."""
    gemm = get_workload("gemm")
    assert notation(gemm) == "{m}x{n}x{k}"
    data = gather("gemm", "m=1024,n=1024,k=4096", "float32", gpu="h200", root=STORE)
    assert data.size == "1024x1024x4096"  # the page's title and sweeps
    assert data.results_options == "--size 1024x1024x4096 --gpu nvidia-h200"  # the page's command: as it names it
    raw = data.rows.loc[data.rows["size"].str.contains("="), "size"]
    assert len(raw.unique()) >= 2  # the store does hold sizes by their variables
    labels = set(data.convergence["size"]) | set(data.versus["size"]) | set(data.roofline["size"])
    assert "1024x1024x4096" in labels and "2048x2048x2048" in labels
    for label in labels:
        assert re.fullmatch(r"\d+x\d+x\d+", label), label
    fig = figures.convergence(data.convergence, data.objective, data.maximize)
    titles = [ax.get_title() for ax in fig.axes if ax.get_visible()]
    assert titles and all(re.match(r"\d+x\d+x\d+: ", t) for t in titles)


def test_a_size_label_reads_back_as_its_size_and_a_workload_without_a_notation_keeps_its_spelling():
    label = size_labels(get_workload("gemm"))
    gemm = get_workload("gemm")
    assert label("m=192,n=448,k=1000", '{"k": 1000, "m": 192, "n": 448}') == "192x448x1000"
    assert gemm.parse_size("192x448x1000") == {"m": 192, "n": 448, "k": 1000}
    assert label("2048x2048x2048", {"m": 2048, "n": 2048, "k": 2048}) == "2048x2048x2048"
    assert notation(get_workload("gemm-cpu")) == "{m}x{n}x{k}"  # learnt from cubes alone, checked on its parser
    assert size_labels(get_workload("gemm-cpu"))("test", {"m": 67, "n": 93, "k": 45}) == "test"  # a name stays
    fw = size_labels(get_workload("floyd-warshall"))
    assert notation(get_workload("floyd-warshall")) is None
    assert fw("n=5000,m=30000,gpus=2", '{"gpus": 2, "m": 30000, "n": 5000}') == "n=5000,m=30000,gpus=2"
    assert fw("", {"n": 7, "m": 8, "gpus": 1}) == "n=7,m=8,gpus=1"


# ---- one log-tick rule -----------------------------------------------------------------------------------


def test_one_log_tick_function_serves_the_report_and_the_comparison():
    assert figures.log_ticks is compare_report.log_ticks
    assert "log_ticks" not in vars(figures) or vars(figures)["log_ticks"].__module__ == compare_report.__name__
    # the comparison: round ticks up to its budget and the budget itself, whole numbers, clear of the budget
    assert compare_report.log_ticks(1, 200, end=True, whole=True) == [1, 2, 5, 10, 20, 50, 100, 200]
    assert compare_report.log_ticks(1, 56, end=True, whole=True) == [1, 2, 3, 5, 10, 20, 30, 56]
    assert compare_report.log_ticks(1, 10, end=True, whole=True) == [1, 2, 3, 5, 7, 10]  # never 1.5
    assert compare_report.log_ticks(1, 1000, end=True, whole=True)[-2:] == [300, 1000]
    # the report: the axis' margins ticked too, as few as asked, round values (0.3, not 0.30000000000000004)
    assert compare_report.log_ticks(1, 576, most=6, whole=True) == [1, 3, 10, 30, 100, 300]
    assert compare_report.log_ticks(0.05, 3) == [0.05, 0.1, 0.2, 0.3, 0.5, 1, 2, 3]
    assert compare_report.log_ticks(23, 290) == [20, 30, 50, 70, 100, 150, 200, 300]


def test_the_comparisons_axis_ends_at_its_budget():
    doc = _compare_doc(300)
    fig = compare_report.plot_figure(doc)
    ax = fig.axes[0]
    FigureCanvasAgg(fig).draw()
    ticks = [t for t in ax.xaxis.get_majorticklocs() if 1 <= t <= 300]
    assert ticks == [1, 3, 10, 30, 100, 300] and ax.get_xlim() == (1, 300)
    assert [t.get_text() for t in ax.get_xticklabels()][-1] == "300"
    assert _overlaps(fig) == []


def _compare_doc(budget: int) -> dict:
    x = np.arange(1, budget + 1)
    mean = np.minimum(1.0, 0.85 + 0.15 * np.log(x) / np.log(budget))
    curve = {"mean": mean.tolist(), "p10": (mean - 0.02).tolist(), "p90": np.minimum(1, mean + 0.02).tolist()}
    return {
        "workload": "reduction",
        "size": "large",
        "dtype": "float32",
        "gpu": "NVIDIA H100 80GB HBM3",
        "recording": "",
        "configs": 576,
        "objective": "GB/s",
        "maximize": True,
        "optimum": 3084.0,
        "budget": budget,
        "repeats": 3,
        "first_seed": 0,
        "strategies": {"default": {"curve": curve}, "tpe": {"curve": {k: list(v) for k, v in curve.items()}}},
        "random_search_calculated": np.linspace(0.8, 1.0, budget).tolist(),
    }


# ---- the real store's pages ------------------------------------------------------------------------------


@pytest.mark.parametrize(("workload", "gpu"), [("reduction", "h200"), ("floyd-warshall-small", "h100")])
def test_no_text_overlaps_another_on_the_committed_stores_pages(workload, gpu, monkeypatch):
    drawn: dict[str, Figure] = {}
    real = page._figure

    def keep(name: str, caption: str, fig: Figure) -> figures.Figure:
        drawn[name] = fig
        return real(name, caption, fig)

    monkeypatch.setattr(page, "_figure", keep)
    page.sections(gather(workload, None, None, gpu=gpu, root=STORE))
    assert {"convergence", "sweeps", "heatmaps"} <= set(drawn)
    for name, fig in drawn.items():
        assert _overlaps(fig) == [], name
    values = [t for ax in drawn["heatmaps"].axes for t in ax.texts]
    assert values and min(t.get_fontsize() for t in values) >= figures.CELL_FONT[0]  # not 6 pt


def test_a_figure_is_drawn_into_the_same_bytes_each_time():
    """A report kept as a CI artifact diffs clean when nothing changed: no date, and the SVG's ids from a fixed salt
    (matplotlib draws them from a random one unless told)."""
    from matplotlib.figure import Figure as MplFigure

    from tuner.report.figures import to_uri

    fig = MplFigure()
    ax = fig.subplots()
    ax.plot([1, 2, 3], [3, 1, 2])
    ax.fill_between([1, 2, 3], [0, 1, 0], [1, 2, 1])  # clip paths and hatches carry the ids
    assert to_uri(fig) == to_uri(fig)
