"""Keep a complete recorded space that the store's ranking has set aside, as a Kernel Tuner cache file:

    python benchmarks/common/export_recording.py gemm 2048x2048x2048 float32 --gpu "NVIDIA H100 80GB HBM3" --timing plain

The store ranks only the rows taken under the current timing protocol (tuner.store.rows.without_superseded), so a
brute force timed the earlier way drops out of `complete_recordings` once a few configs of its space are measured
again. As a recording of a search space it is still whole: every config timed one way. This writes the rows of
one protocol (`--timing`: as the store's `timing` column names it; "plain" for rows from before it existed) as
Kernel Tuner writes a cache (tuner.store.kt_files.store_cache_doc), gzip-compressed, to
results/records/<workload>/<gpu>/recordings/<size>_<dtype>-<timing>.cache.json.gz, where the cold strategy
report (cold_strategy_report.py) replays it with `tuner compare-strategies --recording`'s reader."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the checkout, for benchmarks.common

from benchmarks.common.report import H100, records_dir, shown  # noqa: E402
from tuner.store import results_root  # noqa: E402
from tuner.store.kt_files import store_cache_doc, write_cache  # noqa: E402
from tuner.store.parts import read_parts  # noqa: E402
from tuner.store.rows import timing_matches  # noqa: E402
from tuner.workloads.registry import get_workload  # noqa: E402

RECORDINGS = "recordings"  # the records' kind these files go under


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("workload")
    p.add_argument("size")
    p.add_argument("dtype")
    p.add_argument("--gpu", default=H100)
    p.add_argument("--timing", default="plain", help="the timing protocol of the rows kept (default: plain)")
    args = p.parse_args()
    space = get_workload(args.workload).space
    rows = read_parts(f"*/{args.workload}/evaluations/*.parquet", results_root())  # every row, superseded too
    rows = rows[(rows["gpu"] == args.gpu) & (rows["size"] == args.size) & (rows["dtype"] == args.dtype)]
    rows = rows[[timing_matches(r, space, args.timing) for r in rows.to_dict("records")]].reset_index(drop=True)
    if rows.empty:
        print(f"no rows of {args.workload} {args.size} {args.dtype} on {args.gpu} timed '{args.timing}'")
        return 1
    doc = store_cache_doc(args.workload, args.size, args.dtype, args.gpu, rows=rows)
    out = records_dir(args.workload, args.gpu, RECORDINGS) / f"{args.size}_{args.dtype}-{args.timing}.cache.json.gz"
    out.parent.mkdir(parents=True, exist_ok=True)
    write_cache(out, doc)
    print(f"{len(doc['cache'])} configs ({', '.join(doc['tune_params_keys'])}) -> {shown(out)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
