"""Run LocVolCalib pipelines (built as `tuner run` builds them) on named sizes and compare each result with
the float64 numpy reference (float64: relative error; float32: absolute) and, where the dataset has one,
with Finpar's output.data by the original rule. Prints a table and writes JSON.

  python benchmarks/locvolcalib/validate.py --configs naive,sample:24 --sizes finpar-small,course-small --json out.json
  configs: naive | best (the best stored for this GPU, size and dtype) | tuned (the best stored for course-large
           float64) | sample:N (N random optimised configs) |
           a JSON object of parameters | @FILE (a JSON list of such objects; parameters added to the space later
           take its defaults); comma-separated (a JSON object alone)."""

from __future__ import annotations

import argparse
import ctypes
import json
import random
import statistics
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from tuner.answers.best_config import run_config
from tuner.measure import kt
from tuner.measure.hostcode import build
from tuner.workloads.locvolcalib import (
    FINPAR_DATA,
    TOLERANCES,
    WORKLOAD,
    host_arguments,
    reference_prices,
)
from tuner.workloads.locvolcalib_io import problem_from_size, read_output, validate

# the Finpar datasets with an output.data (SPEC §1.5: Small's file holds the N=32 run, finpar-small-n32)
DATASETS = {"finpar-small": "Small", "finpar-medium": "Medium", "finpar-large": "Large",
            "finpar-small-n32": "Small_legacy_N32"}
NAIVE = {"STRUCTURE": 0, "SHARE_COEF": 0, "FUSE_EXPLICIT": 0, "SOLVER_X": 0, "SOLVER_Y": 0, "TILE_X": 8,
         "TILE_Y": 8, "BLOCK": 256, "KPB": 1, "STEPS": 1, "XFORM": 0, "XREGS": 0}


def all_configs():
    space = WORKLOAD.space
    return [dict(zip(space.params, c)) for c in kt.searchspace(space).list]


def pick_configs(spec: str, size_name: str | None = None, dtype: str = "float64") -> list:
    if spec.strip().startswith("{"):
        return [json.loads(spec)]
    out = []
    for part in spec.split(","):
        if part == "naive":
            out.append(NAIVE)
        elif part == "best":
            out.append(run_config(WORKLOAD.name, WORKLOAD.space.sizes[size_name], dtype))
        elif part == "tuned":  # the best of the course-large float64 campaign, on every size and dtype
            out.append(run_config(WORKLOAD.name, WORKLOAD.space.sizes["course-large"], "float64"))
        elif part.startswith("@"):
            with open(part[1:]) as f:
                out.extend(WORKLOAD.space.complete(c) for c in json.load(f))
        elif part.startswith("sample:"):
            optimised = [c for c in all_configs() if c["STRUCTURE"] == 1]
            out.extend(random.Random(0).sample(optimised, int(part.split(":")[1])))
        else:
            raise SystemExit(f"unknown config spec '{part}'")
    return out


def label(config: dict) -> str:
    return "naive" if config == NAIVE else ",".join(f"{k}={v}" for k, v in config.items() if k != "STRUCTURE")


def run_one(fn, size: dict, dtype: str, repeats: int):
    host = host_arguments(problem_from_size(size), dtype)
    call = [a.ctypes if isinstance(a, np.ndarray) else ctypes.c_int(int(a)) for a in host]
    times = [fn(*call) for _ in range(repeats)]
    return host[0].astype(np.float64), times


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--configs", default="naive")
    ap.add_argument("--sizes", default="finpar-small,finpar-medium,finpar-small-n32,course-small,course-medium")
    ap.add_argument("--dtypes", default="float64,float32")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--json")
    args = ap.parse_args()
    space = WORKLOAD.space
    sizes, dtypes = args.sizes.split(","), args.dtypes.split(",")
    rows, builds = [], {}
    for dtype in dtypes:
        for size_name in sizes:
            configs = pick_configs(args.configs, size_name, dtype)
            todo = [c for c in configs if (json.dumps(c), dtype) not in builds]
            t0 = time.perf_counter()
            with ThreadPoolExecutor(16) as pool:  # nvcc in parallel: the builds are what takes time
                for c, fn in zip(todo, pool.map(lambda c, d=dtype: build(space, c, d), todo)):
                    builds[json.dumps(c), dtype] = fn
            if todo:
                print(f"built {len(todo)} {dtype} configs in {time.perf_counter() - t0:.1f} s", flush=True)
            size = space.sizes[size_name]
            t0 = time.perf_counter()
            ref = reference_prices(size)
            ref_s = time.perf_counter() - t0
            given = read_output(FINPAR_DATA / DATASETS[size_name] / "output.data") if size_name in DATASETS else None
            atol, rtol = TOLERANCES[dtype]
            for c in configs:
                got, times = run_one(builds[json.dumps(c), dtype], size, dtype, args.repeats)
                ok_run = all(t >= 0 for t in times)
                abs_err = float(np.max(np.abs(got - ref)))
                rel_err = float(np.max(np.abs(got - ref) / np.abs(ref)))
                matches = ok_run and bool(np.all(np.isfinite(got)) and np.allclose(got, ref, rtol=rtol, atol=atol))
                valid = validate(got, given)[0] if given is not None else None
                row = {"size": size_name, "dtype": dtype, "config": c, "label": label(c), "ms": statistics.median(times),
                       "times": times, "abs_err": abs_err, "rel_err": rel_err, "matches_numpy": matches,
                       "valid_output_data": valid, "numpy_reference_s": ref_s}
                rows.append(row)
                print(f"{size_name:16} {dtype:8} {row['ms']:10.3f} ms  abs {abs_err:.2e} rel {rel_err:.2e} "
                      f"numpy {'OK ' if matches else 'BAD'} output.data {valid}  {row['label']}", flush=True)
    bad = [r for r in rows if not r["matches_numpy"] or r["valid_output_data"] is False]
    print(f"{len(rows)} runs, {len(bad)} mismatches")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
