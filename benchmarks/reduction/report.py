"""Markdown tables for docs/results/reduction.md (printed; pasted there by hand) from the stored reduction
campaigns: the seed's ladder re-measured (versions 1-7 as the seed wrote them, and the tuned best) and the
tuned best vs CUB and copy per size.
Usage: python benchmarks/reduction/report.py [GPU name]"""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the checkout, for benchmarks.common
from benchmarks.common.report import commits, evaluations, gpu_argument, header, row, software  # noqa: E402
from tuner.answers.best_config import best  # noqa: E402

GPU = gpu_argument()
SEED_G80 = {1: (8.054, 2.083), 2: (3.456, 4.854), 3: (1.722, 9.741), 4: (0.965, 17.377), 5: (0.536, 31.289),
            6: (0.381, 43.996), 7: (0.268, 62.671)}
NAMES = {1: "interleaved, divergent branch", 2: "interleaved, strided index", 3: "sequential addressing",
         4: "first add during load", 5: "unrolled last warp", 6: "completely unrolled", 7: "many elements per thread"}

df = evaluations("reduction", GPU, ok=True)


def ladder(size="seed", dtype="float32"):
    rows = df[(df["size"] == size) & (df.dtype == dtype)]
    cfg = rows.config.map(json.loads)
    # the seed's own versions: no vector loads, no shuffles; each at its best block size and finish
    seedlike = rows[cfg.map(lambda c: c["vector"] == 1 and c["shuffle"] == 0)]
    print(header("version", "G80, 2^22 int (seed)", "step", f"H100, 2^22 {dtype}: best config", "GB/s", "ms", "step",
                 "cumulative"))
    prev, first, ms_prev = None, None, None
    for v in range(1, 8):
        r = seedlike[seedlike.config.map(lambda c, v=v: json.loads(c)["variant"] == v)]
        top = r.loc[r.objective_value.idxmax()]
        c = json.loads(top.config)
        ms, gbs = SEED_G80[v]
        first = first or top.objective_value
        step = f"{top.objective_value / prev:.2f}x" if prev else ""
        seed_step = f"{ms_prev / ms:.2f}x" if ms_prev else ""
        print(row(f"{v}: {NAMES[v]}", f"{gbs} GB/s ({ms} ms)", seed_step,
                  f"{c['block_size_x']} threads, {c['items_per_thread']} items, "
                  f"finish {'atomic' if c['finish'] else 'last block'}",
                  f"{top.objective_value:.0f}", f"{top.time_ms:.4f}", step, f"{top.objective_value / first:.1f}x"))
        prev, ms_prev = top.objective_value, ms
    b = best("reduction", size, dtype, gpu=GPU)
    c = b["config"]
    print(row(f"tuned best (variant {c['variant']}, vector {c['vector']}, shuffle {c['shuffle']})", "", "",
              f"{c['block_size_x']} threads, {c['items_per_thread']} items, "
              f"finish {'atomic' if c['finish'] else 'last block'}",
              f"{b['value']:.0f}", f"{b['time_ms']:.4f}", f"{b['value'] / prev:.2f}x", f"{b['value'] / first:.1f}x"))


def versus():
    print(header("size", "dtype", "tuned GB/s", "CUB GB/s", "tuned / CUB", "copy GB/s (read+write)", "tuned / copy",
                 "best config"))
    for size, label in (("seed", "2^22"), ("16M", "2^24"), ("64M", "2^26"), ("large", "2^28")):
        for dtype in ("float32", "int32"):
            b = best("reduction", size, dtype, gpu=GPU)
            cub, copy = b["baselines"]["cub"], b["baselines"]["copy"]
            cfg = ", ".join(f"{k}={v}" for k, v in b["config"].items())
            print(row(label, dtype, f"{b['value']:.0f}", f"{cub['metrics']['GB/s']:.0f}", f"{cub['ratio']['GB/s']:.2f}",
                      f"{copy['metrics']['GB/s']:.0f}", f"{copy['ratio']['GB/s']:.2f}", cfg))


print(f"### The seed's ladder on the {GPU} (2^22 elements, float32)\n")
ladder()
print(f"\n### Tuned best vs CUB and copy bandwidth on the {GPU}\n")
versus()
print(f"\nProvenance: {len(df)} successful evaluations; {software(df)}, commits {commits(df)}")
