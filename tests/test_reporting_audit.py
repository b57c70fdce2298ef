"""The reporting side's figures and words, as an audit found them wanting: the report's convergence panels (whole
evaluation counts, a legend off the data, each campaign of a strategy told apart, its final best marked, a log axis
where times span 10x), the sweeps' legend off the data and how many of the space's configs they rest on, the page's
`tuner results` command with the page's size, dtype and GPU; compare-strategies' plot (its title, the objective's
unit and direction, identical strategies merged, the legend beside the axes, ticks up to the budget) and caption;
`tuner results --by P Q` (bare values on screen, `Q=value` keys in JSON); `--help`'s strategy list. Settings and
notes are checked, not pixels."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import to_rgb

from tuner import locations
from tuner.answers import compare_report
from tuner.cli import main
from tuner.report import figures, write_report

STORE = locations.BUILTIN_RESULTS


def _drawn(fig):
    FigureCanvasAgg(fig).draw()  # ticks and legends placed as they will be saved
    return fig


def _visible_ticks(axis, low: float, high: float) -> list[float]:
    return [t for t in axis.get_majorticklocs() if low <= t <= high]


def _convergence_frame(values: dict[str, tuple[str, list[float]]], size: str = "5k") -> pd.DataFrame:
    parts = [
        pd.DataFrame(
            {"size": size, "campaign_id": cid, "strategy": strategy, "evaluation": np.arange(1, len(v) + 1),
             "best": np.minimum.accumulate(v)}
        )
        for cid, (strategy, v) in values.items()
    ]
    return pd.concat(parts, ignore_index=True)


# ---- tuner report: convergence -------------------------------------------------------------------------


def test_convergence_counts_whole_evaluations_and_puts_its_legend_above_the_panels():
    frame = _convergence_frame({"a": ("tpe", [21.5, 11.0]), "b": ("tpe", [21.5, 13.4]), "c": ("random", [20, 19])})
    fig = _drawn(figures.convergence(frame, "time_ms", maximize=False))
    (ax,) = [a for a in fig.axes if a.get_visible()]
    low, high = ax.get_xlim()
    ticks = _visible_ticks(ax.xaxis, low, high)
    assert ticks and all(float(t).is_integer() for t in ticks)  # 1, 2: never 1.2, 1.4 ...
    assert ax.get_legend() is None  # no legend inside a panel, over a curve's last rise
    (legend,) = fig.legends
    assert [t.get_text() for t in legend.get_texts()] == ["random", "tpe"]  # by strategy
    assert legend.get_window_extent().y0 >= ax.get_window_extent().y1 - 1  # above the panel
    assert high > 2  # a margin: the last evaluation's rise is not on the frame


def test_campaigns_of_one_strategy_differ_and_end_in_a_dot_at_their_final_best():
    runs = {f"c{i}": ("tpe", [190.0, 120 - i, 100 + i]) for i in range(3)}
    fig = figures.convergence(_convergence_frame(runs, "11k"), "time_ms", maximize=False)
    ax = fig.axes[0]
    steps = [ln for ln in ax.get_lines() if ln.get_drawstyle().startswith("steps")]
    dots = [ln for ln in ax.get_lines() if ln.get_marker() == "o"]
    assert len(steps) == len(dots) == 3
    styles = {(ln.get_linestyle(), tuple(np.round(to_rgb(ln.get_color()), 3))) for ln in steps}
    assert len(styles) == 3  # each campaign its own shade and dash
    hue = to_rgb("C0")
    for ln in steps:  # shades of the strategy's colour: the same hue
        rgb = np.array(to_rgb(ln.get_color()))
        assert np.argmax(rgb) == np.argmax(hue)
    finals = sorted(float(ln.get_ydata()[-1]) for ln in dots)
    assert finals == sorted(float(min(v)) for _, v in runs.values())
    assert sorted(float(ln.get_xdata()[-1]) for ln in dots) == [3, 3, 3]


def test_a_log_axis_where_times_span_ten_times_and_only_there():
    wide = _convergence_frame({"a": ("tpe", [290.0, 62, 35, 23]), "b": ("tpe", [40.0, 30, 29])})
    ax = _drawn(figures.convergence(wide, "time_ms", maximize=False)).axes[0]
    assert ax.get_yscale() == "log"
    low, high = ax.get_ylim()
    ticks = _visible_ticks(ax.yaxis, low, high)
    assert len(ticks) >= 3 and any(t < 35 for t in ticks)  # the converged part has its labels
    narrow = _convergence_frame({"a": ("tpe", [21.5, 11.0])})
    assert figures.convergence(narrow, "time_ms", maximize=False).axes[0].get_yscale() == "linear"
    # higher is better: the converged part is at the top, where a linear axis gives it more room than a log one
    rates = _convergence_frame({"a": ("tpe", [2.0, 1000.0])}).assign(best=[2.0, 1000.0])
    assert figures.convergence(rates, "GB/s", maximize=True).axes[0].get_yscale() == "linear"


def test_more_than_a_hundred_evaluations_tick_whole_numbers_on_a_log_axis():
    frame = _convergence_frame({"a": ("brute_force", list(np.linspace(100, 1, 576)))})
    ax = _drawn(figures.convergence(frame, "time_ms", maximize=False)).axes[0]
    assert ax.get_xscale() == "log"
    ticks = _visible_ticks(ax.xaxis, *ax.get_xlim())
    assert ticks == [1, 3, 10, 30, 100, 300]
    assert [t.get_text() for t in ax.get_xticklabels() if t.get_text()][:3] == ["1", "3", "10"]


def test_the_sweeps_legend_is_above_the_panels():
    table = pd.DataFrame({"block_size_x": [16, 32], "configs": [1, 2], "failed": [0, 0],
                          "best time_ms": [13.4, 11.0], "median time_ms": [13.4, 16.3], "best config": ["", ""]})
    fig = _drawn(figures.sweeps({"block_size_x": table, "PAD": table.rename(columns={"block_size_x": "PAD"})},
                                "time_ms"))
    assert all(ax.get_legend() is None for ax in fig.axes)
    (legend,) = fig.legends
    assert legend.get_window_extent().y0 >= max(ax.get_window_extent().y1 for ax in fig.axes) - 1


# ---- tuner report: the page ----------------------------------------------------------------------------


def test_the_sweeps_say_how_much_of_the_space_they_rest_on_and_why_no_heat_map(tmp_path):
    """Floyd-Warshall at 5k: 2 or 3 measured configs of 438,648; no pair of parameters has 4 measured cells."""
    summary = write_report("floyd-warshall", "5k", out_dir=tmp_path, root=STORE)
    text = Path(summary["path"]).read_text()
    sweeps = summary["sections"]["sweeps"]
    assert "heatmaps" not in sweeps["figures"]
    configs = summary["coverage"]["configs"]
    assert summary["coverage"]["valid_configs"] == 438648 and 2 <= configs <= 3
    assert f"{configs} of the space&#x27;s 438,648 valid configurations (0.000" in text
    notes = " ".join(sweeps["notes"])
    assert "Thin data" in notes and "No heat map: no pair of parameters has 4 measured cells" in notes
    for note in sweeps["notes"]:
        assert note[:40].replace("'", "&#x27;") in text


def test_a_complete_sweep_has_its_coverage_and_no_thin_data_note(tmp_path):
    summary = write_report("reduction", "large", "float32", out_dir=tmp_path, root=STORE)
    text = Path(summary["path"]).read_text()
    assert "576 of the space&#x27;s 576 valid configurations (100%)" in text
    assert summary["sections"]["sweeps"]["notes"] == []  # every value measured in many configs; heat maps drawn
    assert "heatmaps" in summary["sections"]["sweeps"]["figures"]


def test_the_pages_results_command_carries_its_size_dtype_and_gpu(tmp_path):
    summary = write_report("reduction", "seed", "int32", out_dir=tmp_path, gpu="h100", root=STORE)
    text = Path(summary["path"]).read_text()
    command = re.search(r"<code>(tuner results reduction[^<]*) --by P</code>", text).group(1)
    assert command == "tuner results reduction --size seed --dtype int32 --gpu nvidia-h100-80gb-hbm3"


# ---- compare-strategies: plot, caption ---------------------------------------------------------------


def _doc(budget: int = 56) -> dict:
    """A compare-strategies document of a file recording (no size or dtype), default and default-cold alike."""
    x = np.arange(1, budget + 1)

    def curve(shift: float) -> dict:
        mean = np.minimum(1.0, 0.85 + shift + 0.15 * np.log(x) / np.log(budget))
        return {"mean": mean.tolist(), "p10": (mean - 0.02).tolist(), "p90": np.minimum(1, mean + 0.02).tolist()}

    def entry(shift: float) -> dict:
        return {"curve": curve(shift), "methodology": {"score": 0.5, "error": 0.1, "evaluations": [2, 18]},
                "fraction": {str(c): {"mean": 0.99, "std": 0.01} for c in (10, 20, 50, budget)},
                "evaluations_to": {"0.05": {"median": 7.0, "never": 0}, "0.01": {"median": None, "never": 2}},
                "unique_evaluations": float(budget)}

    return {
        "workload": "floyd_warshall", "size": "", "dtype": "", "gpu": "NVIDIA H100 80GB HBM3",
        "recording": "/tmp/x.json.gz", "configs": 56, "objective": "time", "maximize": False, "optimum": 12.87,
        "budget": budget, "repeats": 3, "first_seed": 0, "checkpoints": [10, 20, 50, budget],
        "strategies": {"default": entry(0.0), "default-cold": entry(0.0), "tpe": entry(-0.03)},
        "random_search_calculated": np.linspace(0.8, 1.0, budget).tolist(),
    }


def test_the_plot_names_the_recording_without_blank_fields_and_merges_identical_strategies():
    doc = _doc()
    fig = _drawn(compare_report.plot_figure(doc))
    ax = fig.axes[0]
    title = ax.get_title()
    assert "x.json.gz (kernel floyd_warshall) on NVIDIA H100 80GB HBM3" in title and "  " not in title
    assert "12.87 ms, time (lower is better)" in title
    assert ax.get_legend() is None
    (legend,) = fig.legends
    labels = [t.get_text() for t in legend.get_texts()]
    assert labels[0] == "default = default-cold (identical runs)" and "tpe" in labels and "default" not in labels
    assert legend.get_window_extent().x0 >= ax.get_window_extent().x1 - 1  # beside the axes, over no curve
    ticks = _visible_ticks(ax.xaxis, *ax.get_xlim())
    assert ticks == [1, 2, 3, 5, 10, 20, 30, 56]  # up to the budget, whole numbers (log_ticks, as the report's)
    assert [t.get_text() for t in ax.get_xticklabels()][-1] == "56"


def test_the_caption_gives_the_objectives_unit_and_direction_and_what_evals_to_means():
    doc = _doc()
    text = compare_report.caption(doc)
    assert text.startswith("x.json.gz (kernel floyd_warshall) on NVIDIA H100 80GB HBM3: 56 recorded configs, "
                           "optimum 12.87 ms, time (lower is better)")
    assert "the median over the repeats" in text and "'> 56' where the median one never did" in text
    assert compare_report.objective_text({"objective": "GB/s", "maximize": True}, 3084.2) == "3084 GB/s (higher is better)"
    assert compare_report.markdown(doc).startswith(text)


def test_several_recordings_plot_their_legend_beside_the_bars(tmp_path):
    docs = [_doc(), {**_doc(), "recording": "/tmp/y.json.gz"}]
    for d in docs:
        for e in d["strategies"].values():
            e["methodology"]["interval"] = [0.4, 0.6]
    labels = compare_report.plot_scores(docs, tmp_path / "scores.png")
    assert (tmp_path / "scores.png").stat().st_size > 0 and labels[:2] == ["default, cold", "default, warm"]


def test_help_lists_the_default_strategies_joined_by_comma_and_space(capsys):
    from tuner.search.names import COMPARED_STRATEGIES

    with pytest.raises(SystemExit):
        main(["compare-strategies", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert ", ".join(COMPARED_STRATEGIES) in text


# ---- tuner results --by P Q ------------------------------------------------------------------------------


def test_a_grid_is_headed_by_bare_values_on_screen_and_keyed_by_parameter_in_json(capsys, tmp_path):
    argv = ["results", "reduction", "--size", "large", "--dtype", "float32", "--by", "variant", "block_size_x"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "block_size_x (across)" in out and "block_size_x=32" not in out
    assert re.search(r"variant\s+\S\s+32\s+\S\s+64\s+\S\s+128", out)  # one header line of bare values
    assert main([*argv, "--json", "--csv", str(tmp_path / "g.csv")]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert list(rows[0]) == ["variant", *(f"block_size_x={b}" for b in (32, 64, 128, 256, 512, 1024))]
    assert [r["variant"] for r in rows] == list(range(1, 8))
    assert (tmp_path / "g.csv").read_text().splitlines()[0] == ",".join(rows[0])


# ---- qmc, as docs/strategies.md describes it ---------------------------------------------------------------


def test_qmc_seeds_differ_only_in_their_first_config():
    """Optuna's QMCSampler does not scramble its Sobol sequence by default: a seed draws only the first config (the
    independent sampler), so the repeats of `qmc` are one sequence with different starts."""
    from tuner.answers.compare import load_recording, strategy_trace

    rec = load_recording("reduction", "seed", "float32", root=STORE)
    traces = [strategy_trace(rec, "qmc", seed, 8) for seed in range(3)]
    assert len({t[0] for t in traces}) > 1  # the first config: the seed's
    assert all(t[1:] == traces[0][1:] for t in traces)  # the rest: the one sequence


def test_compare_strategies_prose_wraps_without_trailing_spaces(monkeypatch, capsys):
    from tuner.cli import compare_strategies
    from tuner.cli.common import console

    monkeypatch.setattr(console, "width", 60)
    compare_strategies._say(compare_report.caption(_doc()))
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) > 3 and all(len(line) <= 60 and line == line.rstrip() for line in lines)
    assert "[its 90% bootstrap interval" in " ".join(lines)  # brackets are text, not markup
