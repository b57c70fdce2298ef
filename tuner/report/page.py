"""The report's sections (what each shows, its figures and tables, or why it has none) and the one HTML page
that holds them: inline CSS, figures as data URIs, no script and nothing fetched."""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from matplotlib.figure import Figure as MplFigure

from tuner.formatting import readable
from tuner.report import figures
from tuner.report.data import CEILING_BASELINE, MAX_SIZES, THIN, ReportData

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1200px; padding: 0 1em; color: #222; }
h1 { font-size: 1.6em; } h2 { border-bottom: 1px solid #ccc; padding-bottom: .2em; margin-top: 2em; }
figure { margin: 1em 0; } figure img { max-width: 100%; height: auto; }
figcaption, .note, summary { color: #555; font-size: .9em; }
.empty { background: #f6f6f6; border-left: 4px solid #bbb; padding: .6em 1em; }
table { border-collapse: collapse; font-size: .85em; margin: .5em 0; }
th, td { border: 1px solid #ddd; padding: .25em .6em; text-align: right; } th { background: #f3f3f3; }
td.text { text-align: left; }
.degraded { background: #fff4e5; border-left: 4px solid #e08a00; padding: .6em 1em; margin: 1em 0; }
.degraded ul { margin: .3em 0; }
"""


@dataclass
class Section:
    """One part of the page: a heading, what it shows, its figures and tables; `empty` says why it has none."""

    key: str
    title: str
    intro: str = ""
    figures: list[figures.Figure] = field(default_factory=list)
    tables: list[str] = field(default_factory=list)  # HTML
    empty: str = ""
    notes: list[str] = field(default_factory=list)  # what the figures rest on, and what is not drawn and why


# the sections whose having nothing to draw is good news (no evaluation failed), not data missing
GOOD_NEWS = frozenset({"failures"})


def sections(data: ReportData) -> list[Section]:
    return [_convergence(data), _sweeps(data), _versus(data), _failures(data), _roofline(data)]


def _figure(name: str, caption: str, fig: MplFigure) -> figures.Figure:
    return figures.Figure(name, caption, figures.to_uri(fig))


def _convergence(data: ReportData) -> Section:
    s = Section("convergence", "Convergence of each campaign")
    if data.convergence.empty:
        s.empty = "No campaign is stored for this GPU and dtype."
        return s
    frame = data.convergence
    s.intro = (
        f"The best {data.objective} found after each evaluation, in the order the campaign stored them "
        f"({frame['campaign_id'].nunique()} campaign(s) over {frame['size'].nunique()} size(s); "
        "a failed evaluation counts and keeps the best so far)."
    )
    if data.sizes_left_out:
        s.intro += f" {data.sizes_left_out} more size(s) have campaigns: only {MAX_SIZES} panels are drawn."
    s.figures.append(
        _figure(
            "convergence",
            "Best so far against evaluations, one panel per size, one line per campaign, coloured by strategy (the "
            "campaigns of one strategy in shades and line styles of its colour), a dot at each campaign's final "
            f"best; a log axis where a lower-is-better best so far spans {figures.LOG_SPAN:g}x or more, and for "
            "the evaluations where they pass 100.",
            figures.convergence(frame, data.objective, data.maximize),
        )
    )
    return s


def _sweeps(data: ReportData) -> Section:
    sel = data.selection
    s = Section("sweeps", f"Sweeps at {data.size}")
    if not data.sweeps:
        s.empty = "No parameter took more than one value in the successful measurements of this size."
        return s
    configs = sel.rows["config"].nunique()
    command = f"tuner results {sel.workload.name}" + (f" {data.results_options}" if data.results_options else "")
    s.intro = (
        f"The tables of `{command} --by P` and `--by P Q` as plots: "
        f"{int((sel.rows['status'] == 'ok').sum())} successful evaluation(s) of {configs} configuration(s)"
        + (f", {_coverage(configs, data.valid_configs)}." if data.valid_configs else ".")
    )
    thin, values = _thin_values(data)
    partial = data.valid_configs is not None and configs < data.valid_configs
    if thin:
        s.notes.append(
            "Thin data: "
            + (f"all {values} values drawn rest" if thin == values else f"{thin} of the {values} values drawn rest")
            + f" on fewer than {THIN} successful configurations"
            + (
                f", and the measured configurations are {_share(configs, data.valid_configs)} of the space"
                if partial and data.valid_configs
                else ""
            )
            + ": a bar is the best of the few configurations a search measured with that value, not the best "
            "the value can reach."
        )
    s.figures.append(
        _figure(
            "sweeps",
            f"Best (bars) and median (dots) {data.objective} per value of each parameter that took several values"
            + (", over the configurations measured (not the whole space)." if partial else "."),
            figures.sweeps(data.sweeps, data.objective),
        )
    )
    if data.heatmaps:
        fig, bare = figures.heatmaps(data.heatmaps, data.objective, data.maximize)
        s.figures.append(
            _figure(
                "heatmaps",
                f"The best {data.objective} over two parameters, for the {len(data.heatmaps)} pair(s) whose "
                "cells differ most; blank: no configuration of that pair succeeded or none was measured."
                + _bare_maps(bare, len(data.heatmaps)),
                fig,
            )
        )
    elif data.no_heatmap:
        s.notes.append(data.no_heatmap)
    return s


def _bare_maps(bare: list[tuple[str, str]], drawn: int) -> str:
    """The caption's word on the heat maps whose cells are too small to write their values in."""
    if not bare:
        return ""
    if len(bare) == drawn:
        return " The cells are too small to write the values in: read them off the colour bars."
    pairs = ", ".join(f"{down} by {across}" for down, across in bare)
    return f" The cells of {pairs} are too small to write the values in: read them off the colour bar."


def _coverage(configs: int, valid: int) -> str:
    """ "3 of the space's 438,648 valid configurations (0.0007%)"."""
    return f"{configs:,} of the space's {valid:,} valid configurations ({_share(configs, valid)})"


def _share(part: int, whole: int) -> str:
    pct = 100 * part / whole
    if pct >= 99.5 or pct == 0:
        return f"{pct:.0f}%"
    return f"{pct:.2g}%" if pct >= 0.01 else f"{pct:.1g}%"


def _thin_values(data: ReportData) -> tuple[int, int]:
    """How many of the sweeps' values (bars) rest on fewer than THIN successful configurations, of how many."""
    counts = [int(c) - int(f) for t in data.sweeps.values() for c, f in zip(t["configs"], t["failed"])]
    return sum(n < THIN for n in counts), len(counts)


def _versus(data: ReportData) -> Section:
    s = Section("vendor", "Tuned against the vendor references, per size")
    if data.versus.empty:
        s.empty = (
            f"No vendor reference is stored for {data.selection.workload.name} on {data.gpu} "
            f"({data.selection.dtype}): its campaigns timed none."
        )
        return s
    v = data.versus
    s.intro = (
        "`tuner best`'s answer for each size against each vendor reference timed in the same measuring process "
        "(the reference's median time over the tuned config's: above 1, the tuned config is faster). "
        f"Geometric mean over {v['size'].nunique()} size(s): "
        + ", ".join(f"{name} {readable(float(_geomean(g['speedup'])))}x" for name, g in v.groupby("baseline"))
        + "."
    )
    s.figures.append(_figure("vendor", "Reference time / tuned time per size.", figures.versus(v)))
    s.tables.append(
        _table(
            v[["size", "baseline", "tuned_ms", "baseline_ms", "speedup"]].rename(
                columns={"tuned_ms": "tuned ms", "baseline_ms": "reference ms", "baseline": "reference"}
            ),
            text=("size", "reference"),
        )
    )
    return s


def _failures(data: ReportData) -> Section:
    s = Section("failures", "Failures by class")
    total = len(data.rows)
    if data.failures.empty:
        s.empty = f"No failed evaluation: all {total} evaluation(s) on {data.gpu} ({data.selection.dtype}) succeeded."
        return s
    by_class = data.failures.groupby("status")["count"].sum()
    s.intro = (
        f"{int(by_class.sum())} of {total} evaluation(s) failed: "
        + ", ".join(f"{k} {int(n)}" for k, n in by_class.items())
        + ". A failure is never a best (failure classes: see Concepts, Measure)."
    )
    s.figures.append(_figure("failures", "Failed evaluations per size, by class.", figures.failures(data.failures)))
    s.tables.append(_table(data.failure_messages, text=("status", "error")))
    return s


def _roofline(data: ReportData) -> Section:
    s = Section("roofline", "Against the measured ceiling (roofline point)")
    if data.roofline.empty:
        s.empty = (
            f"No ceiling was measured in the campaigns of the stored bests: neither a copy bandwidth "
            f"(`{CEILING_BASELINE}` baseline) nor, for a FLOP/s objective, a reference's FLOP/s. "
            "No figure is drawn rather than one against a data-sheet peak."
        )
        return s
    s.intro = (
        "The tuned best's achieved throughput against a ceiling measured in the same campaign, on the same GPU: "
        f"the device-to-device copy's GB/s (`{CEILING_BASELINE}`), or for a FLOP/s objective the fastest FLOP/s a "
        "vendor reference reached. Both are measured figures, not data-sheet peaks, so a kernel can pass them "
        "(a reduction reads its bytes once, a copy reads and writes)."
    )
    s.figures.append(_figure("roofline", "Tuned best as % of the measured ceiling.", figures.roofline(data.roofline)))
    s.tables.append(
        _table(
            data.roofline.assign(fraction=100 * data.roofline["fraction"]).rename(
                columns={"fraction": "% of the ceiling"}
            ),
            text=("size", "metric", "reference"),
        )
    )
    return s


def _code(text: str) -> str:
    """`name` in a sentence, as code."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", text)


def _geomean(values: pd.Series) -> float:
    return float(np.exp(np.log(values.astype(float)).mean()))


def _table(frame: pd.DataFrame, text: tuple[str, ...] = ()) -> str:
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in frame.columns)
    body = []
    for row in frame.itertuples(index=False):
        cells = []
        for column, value in zip(frame.columns, row):
            shown = readable(value) if isinstance(value, float) else str(value)
            css = ' class="text"' if column in text else ""
            cells.append(f"<td{css}>{html.escape(shown)}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _degraded(data: ReportData) -> list[str]:
    """What the store left out of the page (parts that could not be read, rows with bad values), named, at its
    top: every figure below is drawn from the rest."""
    if not data.degraded:
        return []
    left = data.degraded.as_dict()
    items = [f"<li><code>{html.escape(p['path'])}</code>: {html.escape(p['reason'])}</li>" for p in left["parts"]]
    items += [
        f"<li><code>{html.escape(r['path'])}</code>: {r['count']} row(s) with {html.escape(r['reason'])}</li>"
        for r in left["rows"]
    ]
    return [
        '<div class="degraded" role="alert"><p><strong>Incomplete:</strong> '
        f"degraded store: {len(left['parts'])} part(s) and {left['rows_left_out']} row(s) left out, below "
        "(unreadable, or not as the store's schema wants them). Every figure and table on this page is drawn from "
        "the rest, without what they hold: move a damaged part aside or copy it again.</p>",
        f"<ul>{''.join(items)}</ul></div>",
    ]


def render(data: ReportData, parts: list[Section]) -> str:
    """The whole page."""
    sel = data.selection
    title = f"{sel.workload.name} {data.size} {sel.dtype} on {data.gpu}"
    notes = list(data.notes)
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>tuner report: {html.escape(title)}</title><style>{STYLE}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
        f'<p class="note">Objective: {html.escape(data.objective)} '
        f"({'higher' if data.maximize else 'lower'} is better). {len(data.rows)} evaluation(s) of this GPU and "
        f"dtype in the store.</p>",
        *_degraded(data),
        *(f'<p class="note">note: {html.escape(n)}</p>' for n in notes),
    ]
    for part in parts:
        out.append(f'<section id="{part.key}"><h2>{html.escape(part.title)}</h2>')
        if part.empty:
            out.append(f'<p class="empty">{_code(html.escape(part.empty))}</p>')
        if part.intro:
            out.append(f"<p>{_code(html.escape(part.intro))}</p>")
        out.extend(f'<p class="note section-note">{_code(html.escape(n))}</p>' for n in part.notes)
        for fig in part.figures:
            out.append(
                f'<figure><img src="{fig.uri}" alt="{html.escape(fig.caption)}" data-figure="{fig.name}">'
                f"<figcaption>{html.escape(fig.caption)}</figcaption></figure>"
            )
        out.extend(f"<details><summary>the figures as a table</summary>{t}</details>" for t in part.tables)
        out.append("</section>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"
