"""Configs per second, this tool against Kernel Tuner (issue 27), on the GPU machine in one device run.

For each workload, with the driver's JIT cache disabled for both sides (CUDA_CACHE_DISABLE=1):
  1. Kernel Tuner's own tune_kernel(strategy="brute_force") over the space, in a process of its own;
  2. `tuner tune --strategy brute_force --no-warm-start` into an empty results folder (compiling ahead);
  3. the agreement check: two serial runs (TUNER_COMPILE_WORKERS=0, no compiling ahead; JIT cache on, a fresh
     one) over the space's first --agreement-configs configs; the parallel run's per-config medians agree
     when their median relative difference to the serial runs' mean is no larger than the two serial runs'
     own median relative difference (for runs alike in distribution it is sqrt(3/4) of it).
Writes $OUT/results/records/common/<gpu>/throughput/<date>-<commit>-<workloads>.json.

Usage (through the device tool, one command per workload to stay under 10 minutes):
  . benchmarks/common/device_env.sh; python3 benchmarks/throughput.py gemm-292 --commit <sha>
  . benchmarks/common/device_env.sh; python3 benchmarks/throughput.py reduction --commit <sha>
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

# GEMM 2048^3 over the space issue 27 measured (292 configs: the space before split-K and the small tiles, a
# workload of its own, `gemm-292`, made by legacy_gemm), the same over today's GEMM space, reduction 2^26 (576)
SIZES = {"gemm-292": "2048x2048x2048", "gemm": "2048x2048x2048", "reduction": "64M"}
DTYPE = "float32"
HERE = Path(__file__).resolve().parent.parent
# what the GEMM space gained since issue 27's measurement (issue 24), left out again
PRE_SPLIT_K = [  # the restrictions the space had then (spaces/gemm.yaml at commit b3918da), and no split
    "split_k == 1",
    "variant < 4 or (unroll == 0 and block_size_x >= 16 and block_size_y >= 8 and block_size_x * block_size_y <= 256)",
    "variant < 4 or (block_size_y * tile_m, block_size_x * tile_n) in ((64, 64), (128, 64), (64, 128), (128, 128), (128, 256), (256, 128))",
    "variant < 4 or (tile_m == 4) == (block_size_y * tile_m * block_size_x * tile_n == 4096)",
]


def legacy_gemm(folder: Path) -> None:
    """A workloads folder holding `gemm-292`: the built-in GEMM (its kernel, its Python module) in the space it
    had before split-K, for a figure comparable with issue 27's; children find it through TUNER_WORKLOADS."""
    import yaml

    doc = yaml.safe_load((HERE / "spaces" / "gemm.yaml").read_text())
    doc["workload"] = "gemm-292"
    doc["restrictions"] = [*doc["restrictions"], *PRE_SPLIT_K]
    doc["kernel"]["source"] = "gemm.cu"
    home = folder / "gemm-292"
    home.mkdir(parents=True, exist_ok=True)
    shutil.copy(HERE / "kernels" / "gemm" / "gemm.cu", home / "gemm.cu")
    (home / "space.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    (home / "workload.py").write_text(
        "from tuner.workloads.gemm import Gemm\n\n\nclass Gemm292(Gemm):\n    name = 'gemm-292'\n\n\nWORKLOAD = Gemm292()\n"
    )
    os.environ["TUNER_WORKLOADS"] = str(folder)


def kernel_tuner_side(workload: str, size_text: str, out: Path) -> None:
    """Kernel Tuner's brute force over the same space, inputs, verification and backend (run in a child)."""
    t0 = time.perf_counter()
    import kernel_tuner
    import numpy as np
    from kernel_tuner import util

    from tuner.measure import kt
    from tuner.workloads import get_workload

    w = get_workload(workload)
    space = w.space
    _, size = space.resolve_size(size_text, w.parse_size)
    args = w.arguments(size, DTYPE, np.random.default_rng(1234))
    answer = w.answer(args, size, DTYPE)
    atol, rtol = w.tolerances(size, DTYPE)
    ko = kt.kernel_options(space, size, DTYPE, args, "nvcuda", w.constant_arguments(args, size, DTYPE))
    t1 = time.perf_counter()
    results, _ = kernel_tuner.tune_kernel(
        space.kernel_name,
        space.source_for(DTYPE),
        ko.problem_size,  # the grid itself (space.grid_dims): no divisors, as the tool's own runs
        args,
        kt.tune_params(space),
        grid_div_x=ko.grid_div_x,
        grid_div_y=ko.grid_div_y,
        grid_div_z=ko.grid_div_z,
        restrictions=list(space.restrictions),
        answer=answer,
        verify=util.normalize_verify_function(kt.verify_function(rtol)),
        atol=atol,
        lang="NVCUDA",
        compiler_options=list(space.compiler_options),
        iterations=space.iterations,
        block_size_names=ko.block_size_names,
        cmem_args=ko.cmem_args,
        strategy="brute_force",
        quiet=True,
    )
    t2 = time.perf_counter()
    medians = {
        json.dumps({k: r[k] for k in space.params}, sort_keys=True): statistics.median(r["times"])
        for r in results
        if isinstance(r.get("time"), float) and r.get("times")
    }
    out.write_text(json.dumps({"configs": len(results), "tune_s": t2 - t1, "setup_s": t1 - t0, "medians": medians}))


def run(cmd: list[str], env: dict, log: Path) -> float:
    t0 = time.perf_counter()
    with open(log, "w") as f:
        done = subprocess.run(cmd, env={**os.environ, **env}, stdout=f, stderr=subprocess.STDOUT, cwd=HERE)
    seconds = time.perf_counter() - t0
    if done.returncode != 0:
        print(log.read_text()[-3000:])
        raise SystemExit(f"{' '.join(cmd)} failed ({done.returncode})")
    return seconds


def tuner_run(workload: str, results: Path, env: dict, log: Path, budget: int | None = None) -> tuple[float, dict]:
    cmd = [sys.executable, "-m", "tuner", "--results", str(results), "tune", workload, "--size", SIZES[workload]]
    cmd += ["--dtype", DTYPE, "--strategy", "brute_force", "--no-warm-start", "--quiet", "--json"]
    cmd += ["--budget", str(budget)] if budget else []
    seconds = run(cmd, env, log)
    text = log.read_text()  # the campaign's --json answer, among whatever the run logged around it
    return seconds, json.JSONDecoder().raw_decode(text[text.index("{\n") :])[0]


def stored_medians(workload: str, results: Path) -> dict[str, float]:
    from tuner import store

    rows = store.load_evaluations(workload, results)
    ok = rows[rows["status"] == "ok"]
    return {json.dumps(json.loads(c), sort_keys=True): float(t) for c, t in zip(ok["config"], ok["time_ms"])}


def rel(a: float, b: float) -> float:
    return abs(a - b) / ((a + b) / 2)


def one_workload(workload: str, work: Path, agreement_configs: int) -> dict:
    from tuner.measure import kt
    from tuner.workloads import get_workload

    space = get_workload(workload).space
    n = kt.searchspace(space).size
    cold = {"CUDA_CACHE_DISABLE": "1"}
    print(f"{workload}: {n} configs; Kernel Tuner's brute force", flush=True)
    kt_json = work / f"{workload}-kt.json"
    code = f"import sys; sys.path.insert(0, {str(HERE)!r}); from benchmarks.throughput import kernel_tuner_side as k; "
    code += f"from pathlib import Path; k({workload!r}, {SIZES[workload]!r}, Path({str(kt_json)!r}))"
    kt_s = run([sys.executable, "-c", code], cold, work / f"{workload}-kt.log")
    kt_out = json.loads(kt_json.read_text())
    print(f"  {kt_s:.1f} s; tuner tune, compiling ahead", flush=True)
    par_s, par = tuner_run(workload, work / f"{workload}-par", cold, work / f"{workload}-par.log")
    par_medians = stored_medians(workload, work / f"{workload}-par")
    print(f"  {par_s:.1f} s", flush=True)
    out = {
        "workload": workload,
        "size": SIZES[workload],
        "dtype": DTYPE,
        "space": n,
        "kernel_tuner_s": round(kt_s, 1),
        "kernel_tuner_tune_kernel_s": round(kt_out["tune_s"], 1),
        "tuner_s": round(par_s, 1),
        "kernel_tuner_configs_per_s": round(n / kt_s, 3),
        "tuner_configs_per_s": round(n / par_s, 3),
        "speedup": round(kt_s / par_s, 2),
        "tuner_ok_configs": len(par_medians),
        "kernel_tuner_ok_configs": len(kt_out["medians"]),
    }
    kt_best = min(kt_out["medians"], key=kt_out["medians"].get) if kt_out["medians"] else None
    tuner_best = json.dumps(par["best"]["config"], sort_keys=True) if par.get("best") else None
    out["best"] = {"kernel_tuner": kt_best and json.loads(kt_best), "tuner": tuner_best and json.loads(tuner_best)}
    if kt_best and tuner_best:
        # the confirmation's tie band (tuner/campaign/confirmation.TIE), in either run's medians
        out["best"]["same"] = kt_best == tuner_best
        out["best"]["within_tie_by_kernel_tuner"] = rel(kt_out["medians"][tuner_best], kt_out["medians"][kt_best])
        out["best"]["within_tie_by_tuner"] = rel(par_medians[tuner_best], par_medians[kt_best])
    common = [c for c in par_medians if c in kt_out["medians"]]
    out["kernel_tuner_vs_tuner_median_rel_diff"] = statistics.median(
        rel(par_medians[c], kt_out["medians"][c]) for c in common
    )  # for information: Kernel Tuner's times include the host's launch overhead, this tool's do not
    if agreement_configs:
        serial = []
        for i in (1, 2):
            print(f"  serial run {i} over {agreement_configs} configs", flush=True)
            env = {"TUNER_COMPILE_WORKERS": "0", "CUDA_CACHE_PATH": str(work / f"{workload}-jit")}
            folder = work / f"{workload}-serial{i}"
            seconds, _ = tuner_run(workload, folder, env, work / f"{workload}-serial{i}.log", agreement_configs)
            serial.append(stored_medians(workload, folder))
            out[f"serial{i}_s"] = round(seconds, 1)
        both = [c for c in serial[0] if c in serial[1] and c in par_medians]
        spread = [rel(serial[0][c], serial[1][c]) for c in both]
        par_diff = [rel(par_medians[c], (serial[0][c] + serial[1][c]) / 2) for c in both]
        out["agreement"] = {
            "configs": len(both),
            "serial_vs_serial_median_rel_diff": statistics.median(spread),
            "parallel_vs_serial_median_rel_diff": statistics.median(par_diff),
            "serial_vs_serial_p90": statistics.quantiles(spread, n=10)[-1],
            "parallel_vs_serial_p90": statistics.quantiles(par_diff, n=10)[-1],
            "agrees": statistics.median(par_diff) <= statistics.median(spread),
        }
    print(json.dumps(out, indent=1), flush=True)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("workloads", nargs="*", default=["gemm-292", "reduction"], choices=sorted(SIZES))
    p.add_argument("--commit", default=os.environ.get("COMMIT", "unknown"))
    p.add_argument("--agreement-configs", type=int, default=100, help="configs of each serial run (0: no check)")
    p.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "/tmp")))
    a = p.parse_args()
    sys.path.insert(0, str(HERE))
    from tuner.measure.provenance import gpu_info
    from tuner.store import gpu_slug

    gpu = gpu_info(0).get("gpu", "unknown")
    with tempfile.TemporaryDirectory() as tmp:
        legacy_gemm(Path(tmp) / "workloads")
        runs = [one_workload(w, Path(tmp), a.agreement_configs) for w in a.workloads]
    record = {"gpu": gpu, "commit": a.commit, "date": datetime.now(UTC).isoformat(timespec="seconds"), "runs": runs}
    path = a.out / "results/records/common" / gpu_slug(gpu) / "throughput"
    path.mkdir(parents=True, exist_ok=True)
    name = f"{datetime.now(UTC):%Y-%m-%d}-{a.commit}-{'-'.join(a.workloads)}.json"
    (path / name).write_text(json.dumps(record, indent=1) + "\n")
    print(f"wrote {path / name}")


if __name__ == "__main__":
    main()
