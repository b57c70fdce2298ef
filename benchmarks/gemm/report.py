"""Markdown tables for docs/results/gemm.md (printed; with --write, put in place there between its
`<!-- report:NAME -->` markers, with the README's GEMM figures printed; for a GPU other than the H100, between
the `<!-- report:NAME@<gpu folder> -->` markers the page holds) from the stored GEMM campaigns:
the seeds' ladder re-measured at 2048^3 beside the seeds' own figures, the tuned best vs cuBLAS at 1024^3 /
2048^3 / 4096^3, and the tuned / cuBLAS ratio over the seeds' 64 shapes; each shape's best config, cuBLAS
and thread blocks go to results/records/gemm/<gpu>/reports/grid.md. Each ratio divides by the cuBLAS time of
the best config's own campaign (cuBLAS is timed in every campaign, in the same worker).
Usage: python benchmarks/gemm/report.py [--write] [GPU name]"""

import contextlib
import io
import json
import math
import re
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the checkout, for benchmarks.common
from benchmarks.common.report import (  # noqa: E402
    H100,
    baselines,
    commits,
    evaluations,
    gpu_argument,
    header,
    records_dir,
    row,
    shown,
    software,
)
from tuner.store import canonical_config, config_medians, gpu_slug  # noqa: E402
from tuner.workloads.gemm import SEED_VERSIONS  # noqa: E402

WRITE = "--write" in sys.argv
if WRITE:
    sys.argv.remove("--write")
GPU = gpu_argument()
DOC = Path(__file__).resolve().parents[2] / "docs" / "results" / "gemm.md"
OPS_2048 = 2 * 2048**3
# seed 002 (K40, float, GFLOP/s at M = N = K = 2048, each version at its best tile) and seed 004
# (course cluster GPU, int, ms at 2048 x 2048)
SEED_002 = {"naive": 112.8, "coalesced A": 186.5, "shared A and B": 365.7, "cuBLAS": 2363.8}
SEED_004_MS = {"naive": 34.73, "shared A and B": 27.53, "merged x16": 11.01}
DIMS = (256, 512, 1024, 2048)

evals = evaluations("gemm", GPU, ok=True)
base = baselines("gemm", GPU, "cublas")


def size_key(m, n, k):
    return json.dumps({"m": m, "n": n, "k": k}, sort_keys=True)


def at(m, n, k, dtype="float32"):
    return evals[(evals.size_vars == size_key(m, n, k)) & (evals.dtype == dtype)]


def best_row(rows):
    """The best config by the median of its measurements, reported by its best-measured row's campaign."""
    med = config_medians(rows, maximize=True)
    config = med.index[0]
    row = rows[rows.config == config].sort_values("objective_value").iloc[-1].copy()
    row["objective_value"] = med[config]
    return row


def cublas_for(row):
    """cuBLAS GFLOP/s of the campaign that measured this row (else the latest at that size)."""
    same = base[base.campaign_id == row.campaign_id]
    if same.empty:
        same = base[(base.size_vars == row.size_vars) & (base.dtype == row.dtype)].sort_values("timestamp").tail(1)
    return json.loads(same.iloc[0].metrics)["GFLOP/s"] if not same.empty else float("nan")


def describe(c):
    if c["variant"] < 4:
        tile = f"{c['block_size_x']}x{c['block_size_x']} tile, {c['block_size_x']}x{c['block_size_y']} threads"
        return tile + (f", {c['tile_m']} outputs/thread" if c["tile_m"] > 1 else "") + (", unroll 4" if c["unroll"] else "")
    split = (f", split-K {c['split_k']} ({'atomics' if c['split_reduce'] == 0 else 'in order'})"
             if c.get("split_k", 1) > 1 else "")
    groups = f" in {c['k_groups']} groups over K" if c.get("k_groups", 1) > 1 else ""
    if c["variant"] == 5:
        return (f"tensor cores (3xTF32), {c['block_size_y'] * c['tile_m']}x{c['block_size_x'] * c['tile_n']}x"
                f"{c['tile_k']} block tile, {c['block_size_x'] * c['block_size_y'] // 32} warps of "
                f"{8 * c['tile_m']}x{4 * c['tile_n']}{groups}, {c['stages']} stages"
                + (", float32 sums" if c.get("rn_sum") else "") + split)
    return (f"{c['block_size_y'] * c['tile_m']}x{c['block_size_x'] * c['tile_n']}x{c['tile_k']} block tile, "
            f"{c['block_size_x']}x{c['block_size_y']} threads of {c['tile_m']}x{c['tile_n']}{groups}, warp {c['warp_x']}x"
            f"{32 // c['warp_x']}, {'2 stages' if c['double_buffer'] else '1 stage'}, pad {c['pad_a']}, "
            f"vector {c['vector']}" + split)


def ladder():
    rows = at(2048, 2048, 2048)
    ints = at(2048, 2048, 2048, "int32")
    short = GPU.removeprefix("NVIDIA ").split()[0]  # H100, H200
    print(header("version", "K40, float (seed 002)", "cluster GPU, int (seed 004)", f"{short} config",
                 f"{short} float32 GFLOP/s", "ms", "/ cuBLAS", f"{short} int32 GOP/s"))
    for name, config in SEED_VERSIONS.items():
        key = canonical_config(config)
        r, i = rows[rows.config == key], ints[ints.config == key]
        seed2 = f"{SEED_002[name]} GFLOP/s" if name in SEED_002 else ""
        seed4 = f"{OPS_2048 / SEED_004_MS[name] / 1e6:.0f} GOP/s ({SEED_004_MS[name]} ms)" if name in SEED_004_MS else ""
        if r.empty:
            f32 = ms = ratio = "not re-measured"
        else:
            f32, ms = f"{r.objective_value.median():.0f}", f"{r.time_ms.median():.3f}"
            ratio = f"{r.objective_value.median() / cublas_for(r.iloc[0]):.3f}"
        i32 = f"{i.objective_value.median():.0f}" if not i.empty else "not re-measured"
        print(row(name, seed2, seed4, describe(config), f32, ms, ratio, i32))
    b = best_row(rows)
    i32 = f"{best_row(ints).objective_value:.0f}" if not ints.empty else ""
    print(row("tuned best", "", "", describe(json.loads(b.config)), f"{b.objective_value:.0f}", f"{b.time_ms:.3f}",
              f"{b.objective_value / cublas_for(b):.3f}", f"{i32} (best int32 measured)"))
    cublas = cublas_for(b)
    print(row("cuBLAS SGEMM (TF32 off)", f"{SEED_002['cuBLAS']} GFLOP/s", "", "", f"{cublas:.0f}",
              f"{OPS_2048 / cublas / 1e6:.3f}", "1.000", ""))


def cublas_all(m, n, k):
    rows = base[(base.size_vars == size_key(m, n, k)) & (base.dtype == "float32")]
    return [json.loads(x)["GFLOP/s"] for x in rows.metrics]


def geomean(xs):
    return math.exp(sum(map(math.log, xs)) / len(xs))


SUMMARY: dict[str, Any] = {}  # the README's GEMM figures, filled by the tables


def squares():
    """Three references, since cuBLAS's own time moves between campaigns: the best config's campaign,
    the median of every campaign at that size, and the fastest cuBLAS measurement of all."""
    print(header("M = N = K", "tuned GFLOP/s", "cuBLAS GFLOP/s: same campaign / median / fastest (campaigns)",
                 "tuned / cuBLAS: same / median / fastest", "configs measured", "best config"))
    ratios: dict[str, list[float]] = {"same": [], "median": [], "fastest": []}
    for n in (1024, 2048, 4096):
        rows = at(n, n, n)
        if rows.empty:
            print(row(n, "not measured", "", "", "", ""))
            continue
        b = best_row(rows)
        all_ = cublas_all(n, n, n)
        refs = {"same": cublas_for(b), "median": statistics.median(all_), "fastest": max(all_)}
        for key, ref in refs.items():
            ratios[key].append(b.objective_value / ref)
        print(row(n, f"{b.objective_value:.0f}",
                  f"{refs['same']:.0f} / {refs['median']:.0f} / {refs['fastest']:.0f} ({len(all_)})",
                  f"{ratios['same'][-1]:.3f} / {ratios['median'][-1]:.3f} / {ratios['fastest'][-1]:.3f}",
                  rows.config.nunique(), describe(json.loads(b.config))))
    if ratios["same"]:
        SUMMARY["squares"] = geomean(ratios["same"])
        print(f"\nGeometric mean of tuned / cuBLAS over {len(ratios['same'])} sizes: "
              + ", ".join(f"{geomean(v):.3f} ({k})" for k, v in ratios.items()))


def grid():
    print(header("M x N \\ K", *DIMS))
    ratios, shapes = [], []
    for m in DIMS:
        for n in DIMS:
            cells = []
            for k in DIMS:
                rows = at(m, n, k)
                if rows.empty:
                    cells.append("")
                    continue
                b = best_row(rows)
                ratios.append(b.objective_value / cublas_for(b))
                shapes.append((m, n, k))
                cells.append(f"{b.objective_value / 1e3:.1f} ({ratios[-1]:.2f})")
            if any(cells):
                print(row(f"{m} x {n}", *cells))
    if ratios:
        gm = geomean(ratios)
        SUMMARY["grid"] = (gm, min(ratios), max(ratios))
        print(f"\n{len(ratios)} of 64 shapes measured; geometric mean of tuned / cuBLAS {gm:.3f}, "
              f"from {min(ratios):.2f} to {max(ratios):.2f}; tuned >= cuBLAS at {sum(r >= 1 for r in ratios)}, "
              f">= 0.9 at {sum(r >= 0.9 for r in ratios)}")
        by_k = [geomean([r for (_, _, k), r in zip(shapes, ratios) if k == kk]) for kk in DIMS]
        print("Geometric mean by K: " + ", ".join(f"{k} {r:.2f}" for k, r in zip(DIMS, by_k)))


def grid_details() -> str:
    """Each shape of the grid: the best config, its thread blocks, cuBLAS in the same campaign."""
    lines = ["# GEMM on the " + GPU + ": the seeds' 64 shapes, float32",
             "",
             ("Generated by `python benchmarks/gemm/report.py` from the stored campaigns (benchmarks/gemm/grid.sh). "
              "cuBLAS: SGEMM through cupy, TF32 off, timed in the campaign that measured the best config. "
              "Blocks: thread blocks the best config launches (the H100 and the H200 have 132 SMs)."),
             "",
             header("M", "N", "K", "tuned GFLOP/s", "cuBLAS GFLOP/s", "tuned / cuBLAS", "configs measured", "blocks",
                    "best config", "campaign")]
    for m in DIMS:
        for n in DIMS:
            for k in DIMS:
                rows = at(m, n, k)
                if rows.empty:
                    lines.append(row(m, n, k, "not measured", "", "", "", "", "", ""))
                    continue
                b = best_row(rows)
                c = json.loads(b.config)
                bm, bn = ((c["block_size_x"],) * 2 if c["variant"] < 4
                          else (c["block_size_y"] * c["tile_m"], c["block_size_x"] * c["tile_n"]))
                blocks = -(-m // bm) * -(-n // bn) * c.get("split_k", 1)
                cublas = cublas_for(b)
                lines.append(row(m, n, k, f"{b.objective_value:.0f}", f"{cublas:.0f}", f"{b.objective_value / cublas:.2f}",
                                 rows.config.nunique(), blocks, describe(c), f"{b.campaign_id} ({b.git_commit})"))
    return "\n".join(lines) + "\n"


def section(table) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        table()
    return out.getvalue().strip("\n")


def provenance() -> None:
    print(f"Provenance: {len(evals)} successful evaluations in {evals.campaign_id.nunique()} campaigns; "
          f"{software(evals)}, commits {commits(evals)}")


SECTIONS = {"ladder": section(ladder), "squares": section(squares), "grid": section(grid),
            "provenance": section(provenance)}
print(f"### The seeds' ladder on the {GPU} (M = N = K = 2048)\n\n{SECTIONS['ladder']}")
print(f"\n### Tuned best vs cuBLAS on the {GPU} (float32)\n\n{SECTIONS['squares']}")
print(f"\n### The seeds' 64 shapes: tuned TFLOP/s (tuned / cuBLAS), float32\n\n{SECTIONS['grid']}")
print("\n" + SECTIONS["provenance"])
if not evals.empty:
    details = records_dir("gemm", GPU, "reports") / "grid.md"
    details.parent.mkdir(parents=True, exist_ok=True)
    details.write_text(grid_details())
    print(f"\nEach shape's best config: {shown(details)}")
if WRITE:
    text = DOC.read_text()
    # the page's own GPU fills every plain marker; another GPU the sections the page names with its folder
    suffix = "" if GPU == H100 else f"@{gpu_slug(GPU)}"
    written = []
    for name, body in SECTIONS.items():
        tag = re.escape(name + suffix)
        marks = re.compile(rf"(<!-- report:{tag} -->\n).*?(\n<!-- /report:{tag} -->)", re.S)
        if marks.search(text):
            text = marks.sub(lambda mt, body=body: mt.group(1) + body + mt.group(2), text)  # type: ignore[misc]  # mypy cannot infer a lambda with a default (which binds this section's body)
            written.append(name)
        elif not suffix:
            sys.exit(f"{DOC}: no <!-- report:{name} --> ... <!-- /report:{name} --> markers")
    if not written:
        sys.exit(f"{DOC}: no <!-- report:NAME{suffix} --> markers for {GPU}")
    DOC.write_text(text)
    print(f"\nwrote {shown(DOC)}")
    if "squares" in SUMMARY and "grid" in SUMMARY:
        gm, low, high = SUMMARY["grid"]
        print(f"README's GEMM row: {SUMMARY['squares']:.2f}x cuBLAS geo-mean over 1024-4096^3 (same campaigns); "
              f"the seeds' 64 shapes each tuned: {gm:.2f}x geo-mean ({low:.2f}-{high:.2f})")
