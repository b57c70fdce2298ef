"""Configs per second, this tool against Kernel Tuner (issue 27), on the GPU machine.

For each workload:
  throughput: Kernel Tuner's own tune_kernel(strategy="brute_force") over the space, in a process of its own,
     then `tuner tune --strategy brute_force --no-warm-start` into an empty results folder (compiling ahead),
     both with the driver's JIT cache disabled (CUDA_CACHE_DISABLE=1);
  agreement: five runs of `tuner tune` over the space's first --agreement-configs configs, in this order:
     ptx1, cubin1, parallel, cubin2, ptx2 (AGREEMENT_RUNS): each serial pair is taken around the parallel run,
     so that a drift in time weighs on both sides alike. "ptx": compiling ahead off (TUNER_COMPILE_WORKERS=0,
     the driver's JIT cache on, a fresh one); "cubin": the parallel run's binaries compiled just before each
     config is measured (TUNER_COMPILE_AHEAD=0). The parallel run's per-config medians agree with two serial
     runs' when their median relative difference to the serial runs' mean is no larger than the two serial
     runs' own median relative difference: `agreement` (the issue's criterion, against ptx) and
     `same_binaries` (against cubin: concurrency alone); `ptx_vs_cubin_median_rel_diff` is what the compilers'
     binaries differ by;
  ask-ahead: a TPE search asking one trial at a time against asking ahead (configs/s of each);
  timeline: this tool's brute force profiled (the campaign and each measuring process under cProfile, in
     $OUT/profiles), with the seconds before the first row, between rows and after the last.
Writes $OUT/<date>-<commit>-<workloads>-<parts>.json, and the same under
$OUT/results/records/common/<gpu>/throughput/ (after each part: a command that runs out of time keeps what
was done).

Usage (through the device tool, one command per workload and part to stay under 10 minutes):
  . benchmarks/common/device_env.sh; python3 benchmarks/throughput.py gemm-292 --parts throughput --commit <sha>
  . benchmarks/common/device_env.sh; python3 benchmarks/throughput.py gemm-292 --parts agreement \
      --agreement-configs 60 --commit <sha>
  . benchmarks/common/device_env.sh; python3 benchmarks/throughput.py reduction --agreement-configs 60 --commit <sha>
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
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

# GEMM 2048^3 over the space issue 27 measured (292 configs: the space before split-K and the small tiles, a
# workload of its own, `gemm-292`, made by legacy_gemm), the same over today's GEMM space, reduction 2^26 (576)
SIZES = {"gemm-292": "2048x2048x2048", "gemm": "2048x2048x2048", "reduction": "64M"}
DTYPE = "float32"
HERE = Path(__file__).resolve().parent.parent
# what the GEMM space gained since issue 27's measurement (issue 24), left out again
PRE_SPLIT_K = [  # the restrictions the space had then (spaces/gemm.yaml at commit b3918da), and no split
    "variant <= 4",
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


def tuner_run(
    workload: str, results: Path, env: dict, log: Path, budget: int | None = None, strategy: str = "brute_force"
) -> tuple[float, dict]:
    cmd = [sys.executable, "-m", "tuner", "--results", str(results), "tune", workload, "--size", SIZES[workload]]
    cmd += ["--dtype", DTYPE, "--strategy", strategy, "--no-warm-start", "--quiet", "--json"]
    cmd += ["--budget", str(budget)] if budget else []
    cmd += ["--seed", "1"] if strategy != "brute_force" else []
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


def agreement(run: dict[str, float], first: dict[str, float], second: dict[str, float]) -> dict:
    """`run`'s per-config medians against the mean of two runs taken before and after it, beside those two
    runs' own difference: they agree when the median difference is no larger (for runs alike in distribution
    it is sqrt(3/4) of it)."""
    both = [c for c in first if c in second and c in run]
    if len(both) < 2:
        return {"configs": len(both)}
    spread = [rel(first[c], second[c]) for c in both]
    diff = [rel(run[c], (first[c] + second[c]) / 2) for c in both]
    return {
        "configs": len(both),
        "serial_vs_serial_median_rel_diff": statistics.median(spread),
        "parallel_vs_serial_median_rel_diff": statistics.median(diff),
        "serial_vs_serial_p90": statistics.quantiles(spread, n=10)[-1],
        "parallel_vs_serial_p90": statistics.quantiles(diff, n=10)[-1],
        "agrees": statistics.median(diff) <= statistics.median(spread),
    }


# the runs of the agreement check, in the order they run: each serial pair around the parallel run, so that a
# drift in time (clocks, temperature) weighs on both sides alike. "ptx": compiling ahead off (Kernel Tuner's
# nvcuda path: NVRTC to PTX, the driver's JIT with a fresh cache); "cubin": the parallel run's binaries (the
# pool's NVRTC cubins), each compiled just before it is measured, never meanwhile (TUNER_COMPILE_AHEAD=0)
AGREEMENT_RUNS = ("ptx1", "cubin1", "parallel", "cubin2", "ptx2")


def agreement_env(run: str, work: Path, workload: str) -> dict:
    if run.startswith("ptx"):
        return {"TUNER_COMPILE_WORKERS": "0", "CUDA_CACHE_PATH": str(work / f"{workload}-jit")}
    if run.startswith("cubin"):
        return {"TUNER_COMPILE_WORKERS": "1", "TUNER_COMPILE_AHEAD": "0", "CUDA_CACHE_DISABLE": "1"}
    return {"CUDA_CACHE_DISABLE": "1"}


def agreement_check(workload: str, work: Path, configs: int, out: dict, save: Callable[[], None]) -> None:
    """Five runs over the space's first `configs` configs (AGREEMENT_RUNS) into `out` (`save`d after each): the
    issue's criterion (the parallel run against the serial runs without compiling ahead), the same with the
    parallel run's own binaries (what concurrency alone does), and the two binaries' difference (what the
    compilers do)."""
    medians = {}
    for run in AGREEMENT_RUNS:
        print(f"  agreement: {run} over {configs} configs", flush=True)
        folder = work / f"{workload}-agree-{run}"
        env = agreement_env(run, work, workload)
        seconds, _ = tuner_run(workload, folder, env, work / f"{workload}-agree-{run}.log", configs)
        medians[run] = stored_medians(workload, folder)
        out[f"{run}_s"] = round(seconds, 1)
        save()
    ptx_mean = {c: (t + medians["ptx2"][c]) / 2 for c, t in medians["ptx1"].items() if c in medians["ptx2"]}
    cubin_mean = {c: (t + medians["cubin2"][c]) / 2 for c, t in medians["cubin1"].items() if c in medians["cubin2"]}
    common = [c for c in ptx_mean if c in cubin_mean]
    out.update(
        order=list(AGREEMENT_RUNS),
        agreement=agreement(medians["parallel"], medians["ptx1"], medians["ptx2"]),
        same_binaries=agreement(medians["parallel"], medians["cubin1"], medians["cubin2"]),
        ptx_vs_cubin_median_rel_diff=statistics.median(rel(ptx_mean[c], cubin_mean[c]) for c in common)
        if common
        else None,
    )


def throughput(workload: str, work: Path) -> dict:
    """Kernel Tuner's brute force, then this tool's (compiling ahead) over the whole space: configs/s, best
    configs."""
    from tuner.measure import kt
    from tuner.workloads import get_workload

    n = kt.searchspace(get_workload(workload).space).size
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
    return out


def ask_ahead(workload: str, work: Path, budget: int) -> dict:
    """A TPE search of `budget` configs (seed 1, no warm start, the driver's JIT cache off) asking one trial at
    a time and compiling in the measuring process (TUNER_COMPILE_WORKERS=0), then asking ahead into the compile
    pool (tuner.search.ahead): configs/s of each, and each one's best."""
    out: dict = {"tpe_budget": budget}
    for run_name, env in (("one_at_a_time", {"TUNER_COMPILE_WORKERS": "0"}), ("ask_ahead", {})):
        print(f"  TPE, {run_name.replace('_', ' ')}: {budget} configs", flush=True)
        folder = work / f"{workload}-tpe-{run_name}"
        seconds, answer = tuner_run(
            workload, folder, {"CUDA_CACHE_DISABLE": "1", **env}, work / f"{folder.name}.log", budget, "tpe"
        )
        measured = len(stored_medians(workload, folder))
        out[run_name] = {
            "s": round(seconds, 1),
            "configs_ok": measured,
            "evaluated": answer.get("evaluated"),
            "configs_per_s": round((answer.get("evaluated") or 0) / seconds, 3),
            "best": answer.get("best"),
        }
    if out["one_at_a_time"]["configs_per_s"]:
        out["ask_ahead_speedup"] = round(out["ask_ahead"]["configs_per_s"] / out["one_at_a_time"]["configs_per_s"], 2)
    return out


def timeline(workload: str, work: Path, out_dir: Path) -> dict:
    """Where a brute force's time goes: `tuner tune` as in `throughput` (the JIT cache off), the campaign under
    cProfile and each measuring process profiled (TUNER_PROFILE_DIR); from the store, the seconds before the
    first row, between rows and after the last, and each row's stages (compile in the pool, verify, benchmark).
    The profiles stay in $OUT/profiles for pstats."""
    import pandas as pd

    from tuner import store

    profiles = out_dir / "profiles"
    profiles.mkdir(parents=True, exist_ok=True)
    folder = work / f"{workload}-timeline"
    cmd = [sys.executable, "-m", "cProfile", "-o", str(profiles / "campaign.prof"), "-m", "tuner"]
    cmd += ["--results", str(folder), "tune", workload, "--size", SIZES[workload], "--dtype", DTYPE]
    cmd += ["--strategy", "brute_force", "--no-warm-start", "--quiet", "--json"]
    env = {"CUDA_CACHE_DISABLE": "1", "TUNER_PROFILE_DIR": str(profiles)}
    started = datetime.now(UTC)
    seconds = run(cmd, env, work / f"{workload}-timeline.log")
    rows = store.load_evaluations(workload, folder).sort_values("timestamp")
    stamps = pd.to_datetime(rows["timestamp"])
    gaps = stamps.diff().dt.total_seconds().dropna()
    stages = {c: rows[c].astype(float) for c in ("compile_ms", "verify_ms", "benchmark_ms")}
    return {
        "timeline": {
            "s": round(seconds, 1),
            "rows": len(rows),
            "before_first_row_s": round((stamps.iloc[0] - pd.Timestamp(started)).total_seconds(), 2),
            "rows_span_s": round((stamps.iloc[-1] - stamps.iloc[0]).total_seconds(), 2),
            "after_last_row_s": round(seconds - (stamps.iloc[-1] - pd.Timestamp(started)).total_seconds(), 2),
            "gap_ms": {q: round(1e3 * gaps.quantile(x), 1) for q, x in (("p10", 0.1), ("p50", 0.5), ("p90", 0.9))},
            "stage_ms_median": {c: round(v.median(), 1) for c, v in stages.items()},
            "stage_s_total": {c: round(v.sum() / 1e3, 1) for c, v in stages.items()},
        }
    }


def write_record(record: dict, out: Path, name: str) -> None:
    """The record under results/records/... in $OUT, and at its top level too (what surely comes back)."""
    from tuner.store import gpu_slug

    text = json.dumps(record, indent=1) + "\n"
    deep = out / "results/records/common" / gpu_slug(record["gpu"]) / "throughput"
    deep.mkdir(parents=True, exist_ok=True)
    (deep / name).write_text(text)
    (out / name).write_text(text)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("workloads", nargs="*", help=f"of {', '.join(sorted(SIZES))} (default: gemm-292 reduction)")
    p.add_argument("--commit", default=os.environ.get("COMMIT", "unknown"))
    p.add_argument("--agreement-configs", type=int, default=100, help="configs of each agreement run (0: no check)")
    p.add_argument(
        "--parts",
        default="throughput,agreement",
        help="throughput (Kernel Tuner's and this tool's brute force), agreement (the five runs), ask-ahead (TPE "
        "one trial at a time against asking ahead), timeline (where this tool's brute force spends its time, "
        "profiled), comma-separated",
    )
    p.add_argument("--tpe-budget", type=int, default=60, help="configs of each ask-ahead run")
    p.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "/tmp")))
    a = p.parse_args()
    a.workloads = a.workloads or ["gemm-292", "reduction"]  # not argparse's choices: it refuses none given
    if not set(a.workloads) <= set(SIZES):
        p.error(f"workloads: {', '.join(sorted(set(a.workloads) - set(SIZES)))} not of {', '.join(sorted(SIZES))}")
    parts = set(a.parts.split(","))
    if not parts <= {"throughput", "agreement", "ask-ahead", "timeline"}:
        p.error(f"--parts {a.parts}: of throughput, agreement, ask-ahead, timeline")
    sys.path.insert(0, str(HERE))
    from tuner.measure.provenance import gpu_info

    gpu = gpu_info(0).get("gpu", "unknown")
    record = {"gpu": gpu, "commit": a.commit, "date": datetime.now(UTC).isoformat(timespec="seconds"), "runs": []}
    name = f"{datetime.now(UTC):%Y-%m-%d}-{a.commit}-{'-'.join(a.workloads)}-{'-'.join(sorted(parts))}.json"
    with tempfile.TemporaryDirectory() as tmp:
        legacy_gemm(Path(tmp) / "workloads")
        for w in a.workloads:
            out: dict = {"workload": w, "size": SIZES[w], "dtype": DTYPE}
            record["runs"].append(out)
            if "throughput" in parts:
                out.update(throughput(w, Path(tmp)))
                write_record(record, a.out, name)  # what is done so far, should a later part run out of time
            if "agreement" in parts and a.agreement_configs:
                agreement_check(w, Path(tmp), a.agreement_configs, out, lambda: write_record(record, a.out, name))
            if "ask-ahead" in parts:
                out.update(ask_ahead(w, Path(tmp), a.tpe_budget))
            if "timeline" in parts:
                out.update(timeline(w, Path(tmp), a.out))
            write_record(record, a.out, name)
            print(json.dumps(out, indent=1), flush=True)
    print(f"wrote {a.out / name}")


if __name__ == "__main__":
    main()
