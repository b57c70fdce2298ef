"""Times explicit spmv configs directly (CuPy, NVRTC; each config compiled once and run on every matrix) beside
cuSPARSE, verifying each product against scipy; for trying kernel changes in a few minutes of GPU time before a
campaign. Nothing goes to the store: the campaign (benchmarks/spmv/campaigns.py) records the figures that count
(probes kept are records: results/records/spmv/<gpu>/probe/).
Usage: python benchmarks/spmv/probe.py CONFIGS.json [--sizes uniform-2M-16 ...] [--dtype float32] [--out probe.json]
       [--profile]  (each kernel launched once after one warm-up, for ncu)
CONFIGS.json: a list of configs (dicts; missing parameters take the space's defaults)."""

import argparse
import json
import statistics
import sys
import time

import numpy as np


def main():
    import cupy as cp

    from tuner.workloads import get_workload
    from tuner.workloads.spmv import reference
    from tuner.workloads.spmv_matrices import size_for

    p = argparse.ArgumentParser()
    p.add_argument("configs")
    p.add_argument("--sizes", nargs="*", default=["uniform-2M-16", "powerlaw-1M-8"])
    p.add_argument("--check", nargs="*", default=[], help="small generated sizes, CLASS:rows:mean[:cols], verified only")
    p.add_argument("--dtype", default="float32")
    p.add_argument("--repeats", type=int, default=20)
    p.add_argument("--out", default=None)
    p.add_argument("--profile", action="store_true")
    args = p.parse_args()
    workload = get_workload("spmv")
    space = workload.space
    configs = [space.complete(c) for c in json.load(open(args.configs))]
    for c in configs:
        if not space.is_valid(c):
            print(f"not in the space: {c}", flush=True)
    sizes = {name: space.sizes[name] for name in args.sizes}
    for text in args.check:
        cls, rows, mean, *cols = text.split(":")
        sizes[text] = size_for(cls, int(rows), int(mean), cols=int(cols[0]) if cols else None)
    timed = set(args.sizes)

    data = {}
    for name, size in sizes.items():
        t0 = time.monotonic()
        host = workload.arguments(size, args.dtype, np.random.default_rng(1))
        ref = reference(host, size)
        atol, _ = workload.tolerances(size, args.dtype)
        dev = [cp.asarray(a) if isinstance(a, np.ndarray) else a for a in host]
        entry = {"args": dev, "ref": ref, "atol": atol, "size": size}
        if name in timed:
            timers = workload.reference_timers(host, size, args.dtype)
            times = timers["cusparse"](1 if args.profile else args.repeats)
            entry["cusparse_ms"] = statistics.median(times)
        data[name] = entry
        print(f"{name}: ready in {time.monotonic() - t0:.1f} s"
              + (f", cusparse {entry['cusparse_ms'] * 1e3:.1f} us" if "cusparse_ms" in entry else ""), flush=True)

    out = []
    start, end = cp.cuda.Event(), cp.cuda.Event()
    for config in configs:
        label = json.dumps({k: config[k] for k in space.params}, separators=(",", ":"))
        try:
            t0 = time.monotonic()
            module = cp.RawModule(code=space.source_for(args.dtype, config), options=("-std=c++17",))
            kernel = module.get_function(space.kernel_name)
            compile_s = time.monotonic() - t0
        except Exception as e:  # noqa: BLE001
            print(f"{label}: COMPILE FAILED {type(e).__name__}: {str(e)[-800:]}", flush=True)
            continue
        for name, entry in data.items():
            a, size = entry["args"], entry["size"]
            grid = tuple(int(g) for g in space.grid_dims(config, size))
            block = (config["block_size_x"], 1, 1)
            a[4].fill(0)
            a[7].fill(0)
            try:
                kernel(grid, block, tuple(a))
                cp.cuda.runtime.deviceSynchronize()
                y = a[4].get()
                bad = int(np.sum(~np.isclose(y, entry["ref"], rtol=0, atol=entry["atol"])))
                counters_left = int(cp.count_nonzero(a[7]).get())
                times = []
                if name in timed and not args.profile:
                    for _ in range(args.repeats):
                        start.record()
                        kernel(grid, block, tuple(a))
                        end.record()
                        end.synchronize()
                        times.append(cp.cuda.get_elapsed_time(start, end))
                    bad += int(np.sum(~np.isclose(a[4].get(), entry["ref"], rtol=0, atol=entry["atol"])))
            except Exception as e:  # noqa: BLE001
                print(f"{label} {name}: LAUNCH FAILED {type(e).__name__}: {e}", flush=True)
                return 1  # the context may be gone
            rec = {"config": config, "size": name, "wrong": bad, "counters_left": counters_left,
                   "compile_s": round(compile_s, 2)}
            if times:
                ms = statistics.median(times)
                gbs = workload.baseline_metrics("kernel", ms, size, args.dtype)["GB/s"]
                rec.update(ms=ms, gbs=gbs, vs_cusparse=entry["cusparse_ms"] / ms)
            out.append(rec)
            print(f"{label} {name}: wrong {bad}, counters {counters_left}"
                  + (f", {rec['ms'] * 1e3:.1f} us, {rec['gbs']:.0f} GB/s, {rec['vs_cusparse']:.3f}x cuSPARSE" if times else ""),
                  flush=True)
    if args.out:
        json.dump({"dtype": args.dtype, "cusparse_ms": {k: v.get("cusparse_ms") for k, v in data.items()},
                   "results": out}, open(args.out, "w"), indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
