"""GEMM variant 5 (3xTF32 tensor cores) against cuBLAS SGEMM on the GPU machine, in one run (issue 24).

For every variant-5 config of spaces/gemm.yaml (or those --only selects), and, for comparison, the best stored
SIMT config of each size (what `tuner best gemm --size S --json` answers, a nearest-size fallback included),
at each size of SIZES:
  - compiled as a campaign compiles it: the space's #defines in front of kernels/gemm/gemm.cu, NVRTC to a cubin
    for --arch with the space's options (all configs in parallel, before any GPU work);
  - launched with the space's geometry on the workload's own inputs and split-K workspace
    (tuner/workloads/gemm.py), C filled with NaN first; verified against the workload's float64 reference
    with its K-fitted float32 tolerance (and split-K's workspace must be zero again after the launch);
  - timed as a campaign times: CUDA events, the GPU spinning before each start event (no host overhead),
    median of --repeats launches after warm-up, the L2 cache not flushed;
and cuBLAS SGEMM (cupy.matmul on float32 with TF32 off, checked against the same tolerance) timed at the start
and at the end of each size. A config that fails to compile, verify or run is recorded and the run goes on; a
launch that breaks the CUDA context (an illegal address) ends its worker process, which is started again
after it. Prints a table per size and a summary; writes $OUT/gemm_dev.json.

  . benchmarks/common/device_env.sh; python3 benchmarks/gemm_dev.py
  python3 benchmarks/gemm_dev.py --only tile_k=16 --only rn_sum=0 --sizes 2048x2048x2048
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(HERE))

H100 = "NVIDIA H100 80GB HBM3"
# the three squares first (the criterion: geometric mean of tuned / cuBLAS >= 1.00 over them), then
# shapes of the seeds' grid and the awkward ones (unaligned rows: 4-byte copies; partial tiles)
SIZES = [
    "2048x2048x2048",
    "4096x4096x4096",
    "1024x1024x1024",
    "256x256x2048",
    "2048x2048x256",
    "512x512x512",
    "1000x1000x1000",
    "777x1025x333",
]
SQUARES = SIZES[:3]


def nvrtc_cubin(source: str, options: list[str]) -> tuple[bytes | None, str]:
    """(cubin, "") or (None, the compiler's log)."""
    from cuda.bindings import nvrtc

    err, prog = nvrtc.nvrtcCreateProgram(source.encode(), b"gemm.cu", 0, [], [])
    try:
        opts = [o.encode() for o in options]
        (err,) = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
        if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            _, size = nvrtc.nvrtcGetProgramLogSize(prog)
            log = b" " * size
            nvrtc.nvrtcGetProgramLog(prog, log)
            return None, log.decode(errors="replace").rstrip("\0").strip()[-1500:]
        _, size = nvrtc.nvrtcGetCUBINSize(prog)
        cubin = b" " * size
        nvrtc.nvrtcGetCUBIN(prog, cubin)
        return cubin, ""
    finally:
        nvrtc.nvrtcDestroyProgram(prog)


def compile_one(job: tuple[str, list[str], str]) -> tuple[str, str, float]:
    """Compile to `path`: ("", seconds) when it did, (error, seconds) when not."""
    source, options, path = job
    t0 = time.perf_counter()
    try:
        cubin, log = nvrtc_cubin(source, options)
    except Exception as e:  # noqa: BLE001  (no cuda-python: the worker compiles through cupy instead)
        return path, f"nvrtc unavailable: {type(e).__name__}: {e}", time.perf_counter() - t0
    if cubin is not None:
        Path(path).write_bytes(cubin)
    return path, log if cubin is None else "", time.perf_counter() - t0


def label(config: dict) -> str:
    if config["variant"] != 5:
        return "SIMT v{variant} {bm}x{bn}x{tile_k} split{split_k}/{split_reduce}".format(
            bm=config["block_size_y"] * config["tile_m"], bn=config["block_size_x"] * config["tile_n"], **config
        )
    bm, bn = config["block_size_y"] * config["tile_m"], config["block_size_x"] * config["tile_n"]
    warps = f"{config['block_size_y'] // 8}x{config['block_size_x'] // 4}w"
    return (
        f"{bm}x{bn}x{config['tile_k']} {warps} {8 * config['tile_m']}x{4 * config['tile_n']} "
        f"s{config['stages']} rn{config['rn_sum']}" + (f" split{config['split_k']}" if config["split_k"] > 1 else "")
    )


# ---- the worker: GPU work only, restartable ---------------------------------------------------------------


def worker(work: Path) -> int:
    os.environ["CUPY_TF32"] = "0"  # cupy asks cuBLAS for TF32 only when CUPY_TF32 > 0; this forbids it library-wide
    os.environ["NVIDIA_TF32_OVERRIDE"] = "0"
    import cupy as cp
    import numpy as np

    from tuner.measure.vendor import time_with_events
    from tuner.workloads import get_workload

    plan = json.loads((work / "plan.json").read_text())
    results = work / "results.jsonl"
    done = (
        {(r["size"], r.get("index")) for r in map(json.loads, results.read_text().splitlines())}
        if results.exists()
        else set()
    )
    workload = get_workload("gemm")
    space = workload.space
    out = results.open("a")

    def emit(row: dict) -> None:
        out.write(json.dumps(row) + "\n")
        out.flush()

    kernels: dict[int, object] = {}
    (work / "gpu.txt").write_text(cp.cuda.runtime.getDeviceProperties(0)["name"].decode())

    def kernel(i: int):
        if i not in kernels:
            entry = plan["configs"][i]
            if Path(entry["cubin"]).is_file():
                kernels[i] = cp.RawModule(path=entry["cubin"]).get_function("gemm")
            else:  # no cuda-python for the parallel compile: cupy's NVRTC, the same source and options
                source = space.source_for("float32", entry["config"])
                kernels[i] = cp.RawModule(code=source, options=tuple(space.compiler_options)).get_function("gemm")
        return kernels[i]

    for size_name in plan["sizes"]:
        todo = [i for i in range(len(plan["configs"])) if (size_name, i) not in done]
        if not todo and (size_name, None) in done:
            continue
        if time.time() > plan["deadline"]:
            return 0
        size = space.resolve_size(size_name, workload.parse_size)[1]
        m, n, k = size["m"], size["n"], size["k"]
        args = workload.arguments(size, "float32", np.random.default_rng(0))
        expected = workload.answer(args, size, "float32")[2]
        atol = workload.tolerances(size, "float32")[0]
        dev = [cp.asarray(a) if isinstance(a, np.ndarray) else a for a in args]
        ref = cp.asarray(expected)
        flops = 2.0 * m * n * k
        cublas = workload.reference_timers(args, size, "float32")["cublas"]  # checks cuBLAS against atol too
        before = float(np.median(cublas(plan["repeats"])))
        for i in todo:
            if time.time() > plan["deadline"]:
                break
            entry = plan["configs"][i]
            row: dict = {"size": size_name, "index": i, "tol": atol}
            if entry["compile_error"] and not entry["compile_error"].startswith("nvrtc unavailable"):
                emit({**row, "status": "compile", "error": entry["compile_error"]})
                continue
            config = entry["config"]
            # in case the process dies in this config (its result, when it comes, replaces this line)
            emit({**row, "status": "crashed", "error": "the worker process died in this config"})
            try:
                fn = kernel(i)
                row.update(regs=fn.num_regs, local_bytes=fn.local_size_bytes, smem=fn.shared_size_bytes)
                grid = tuple(space.grid_dims(config, size))
                block = space.block_dims(config)
                launch_args = tuple(dev)
                dev[2].fill(cp.nan)
                fn(grid, block, launch_args)
                cp.cuda.Device().synchronize()
                c = dev[2]
                err = float(cp.abs(c.astype(cp.float64) - ref).max()) if bool(cp.isfinite(c).all()) else math.inf
                dirty = bool(dev[6].any()) or bool(dev[8].any())
                row.update(max_err=err, err_over_tol=err / atol if atol else None)
                if err > atol or dirty:
                    dev[6].fill(0)
                    dev[8].fill(0)
                    emit(
                        {
                            **row,
                            "status": "wrong",
                            "error": "split-K workspace not zero after the launch"
                            if dirty
                            else f"max |C - C64| {err:.3g} > tolerance {atol:.3g}",
                        }
                    )
                    continue
                launch = functools.partial(fn, grid, block, launch_args)
                ms = float(np.median(time_with_events(launch, plan["repeats"], warmup=3)))
                emit({**row, "status": "ok", "ms": ms, "tflops": flops / ms / 1e9})
            except Exception as e:  # noqa: BLE001  (recorded; a broken context ends this worker)
                try:
                    cp.cuda.Device().synchronize()
                    cp.zeros(1).sum()
                    healthy = True
                except Exception:  # noqa: BLE001
                    healthy = False
                emit({**row, "status": "error", "error": f"{type(e).__name__}: {e}"[:600]})
                if not healthy:
                    print(f"worker: CUDA context broken by config {i} at {size_name}; restarting", flush=True)
                    return 3
        after = float(np.median(cublas(plan["repeats"])))
        emit(
            {
                "size": size_name,
                "index": None,
                "cublas_ms_before": before,
                "cublas_ms_after": after,
                "cublas_ms": (before + after) / 2,
                "cublas_tflops": flops / ((before + after) / 2) / 1e9,
            }
        )
        print(f"worker: {size_name} done", flush=True)
    return 0


# ---- the driver: configs, compiles, workers, report -------------------------------------------------------


def simt_bests(sizes: list[str]) -> dict[str, dict]:
    import tuner

    out = {}
    for s in sizes:
        try:
            doc = tuner.best("gemm", size=s, dtype="float32", gpu=H100)
            out[s] = {
                "config": doc["config"],
                "fallback": doc.get("fallback"),
                "size": doc.get("size"),
                "stored_ratio": doc.get("baselines", {}).get("cublas", {}).get("ratio", {}).get("GFLOP/s"),
            }
        except Exception as e:  # noqa: BLE001  (no stored answer: no comparison row for this size)
            print(f"no stored SIMT best for {s}: {e}")
    return out


def selected(config: dict, only: list[str]) -> bool:
    for cond in only:
        key, value = cond.split("=")
        if str(config.get(key)) != value:
            return False
    return True


def geomean(xs: list[float]) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def report(plan: dict, rows: list[dict]) -> dict:
    configs = plan["configs"]
    per: dict[str, dict[int, dict]] = {s: {} for s in plan["sizes"]}
    cublas: dict[str, dict] = {}
    for r in rows:
        if r.get("index") is None:
            cublas[r["size"]] = r
        else:
            per[r["size"]][r["index"]] = r
    for s, by in per.items():
        base = cublas.get(s, {}).get("cublas_ms")
        for r in by.values():
            if r.get("status") == "ok" and base:
                r["ratio"] = base / r["ms"]
    v5 = [i for i, c in enumerate(configs) if c["config"]["variant"] == 5]
    summary: dict = {"sizes": {}}
    print(
        f"\n{'=' * 100}\nGEMM variant 5 (3xTF32, mma.sync m16n8k8) vs cuBLAS SGEMM (fp32, TF32 off); ratio = cuBLAS ms / ours"
    )
    for s in plan["sizes"]:
        by, cb = per[s], cublas.get(s)
        if cb is None:
            print(f"\n{s}: not reached")
            continue
        ok = sorted((r for i, r in by.items() if i in v5 and r.get("status") == "ok"), key=lambda r: r["ms"])
        bad = [r for i, r in by.items() if i in v5 and r.get("status") != "ok"]
        worst = max(
            (r["err_over_tol"] for i, r in by.items() if i in v5 and r.get("err_over_tol") is not None), default=None
        )
        print(
            f"\n--- {s}: cuBLAS {cb['cublas_tflops']:.1f} TFLOP/s ({cb['cublas_ms']:.4f} ms; before/after "
            f"{cb['cublas_ms_before']:.4f}/{cb['cublas_ms_after']:.4f}); variant 5: {len(ok)} ok, {len(bad)} failed; "
            f"largest max-error / tolerance {worst if worst is None else round(worst, 3)}"
        )
        print(f"  {'config':46s} {'ms':>9s} {'TFLOP/s':>8s} {'ratio':>6s} {'err/tol':>7s} {'regs':>4s}")
        simt = [r for i, r in by.items() if configs[i]["config"]["variant"] != 5]
        for r in ok[:8] + simt:
            c = configs[r["index"]]
            if r.get("status") == "ok":
                print(
                    f"  {label(c['config']):46s} {r['ms']:9.4f} {r['tflops']:8.1f} {r['ratio']:6.3f} "
                    f"{r['err_over_tol']:7.3f} {r.get('regs', 0):4d}"
                    + (
                        ""
                        if c["config"]["variant"] == 5
                        else "  <- SIMT: stored best here"
                        if r["index"] == plan.get("simt_for", {}).get(s)
                        else "  <- SIMT: another size's best"
                    )
                )
            else:
                print(f"  {label(c['config']):46s} {r['status']}: {r.get('error', '')[:60]}")
        for r in bad[:5]:
            print(f"  FAILED {label(configs[r['index']]['config'])}: {r['status']}: {r.get('error', '')[:120]}")
        summary["sizes"][s] = {
            "cublas_tflops": cb["cublas_tflops"],
            "best_v5": configs[ok[0]["index"]]["config"] if ok else None,
            "best_v5_ratio": ok[0]["ratio"] if ok else None,
            "best_v5_tflops": ok[0]["tflops"] if ok else None,
            "simt_best_ratio": by.get(plan.get("simt_for", {}).get(s), {}).get("ratio"),
            "v5_largest_err_over_tol_of_ok": max((r["err_over_tol"] for r in ok), default=None),
            "v5_failed": len(bad),
            "v5_largest_err_over_tol": worst,
        }
    best_sq = [
        float(summary["sizes"][s]["best_v5_ratio"]) for s in SQUARES if summary["sizes"].get(s, {}).get("best_v5_ratio")
    ]
    all_best = [float(v["best_v5_ratio"]) for v in summary["sizes"].values() if v.get("best_v5_ratio")]
    # one config for all three squares (what a single tuned answer per GPU would give)
    single: list[tuple[float, int, list[float]]] = []
    for i in v5:
        ratios = [per.get(s, {}).get(i, {}).get("ratio") for s in SQUARES]
        if all(ratios):
            found = [float(r) for r in ratios if r]
            single.append((geomean(found), i, found))
    single.sort(reverse=True)
    summary["squares_geomean_best_per_size"] = geomean(best_sq) if len(best_sq) == len(SQUARES) else None
    summary["all_sizes_geomean_best_per_size"] = geomean(all_best) if all_best else None
    summary["best_single_config_over_squares"] = (
        {"config": configs[single[0][1]]["config"], "geomean": single[0][0], "ratios": single[0][2]} if single else None
    )
    print(f"\n{'=' * 100}\nSUMMARY")
    for s, v in summary["sizes"].items():
        print(
            f"  {s:16s} cuBLAS {v['cublas_tflops']:6.1f} TFLOP/s | best v5 "
            + (
                f"{v['best_v5_tflops']:6.1f} TFLOP/s ratio {v['best_v5_ratio']:.3f} [{label(v['best_v5'])}]"
                if v["best_v5"]
                else "none ok"
            )
            + (f" | stored SIMT best here {v['simt_best_ratio']:.3f}" if v["simt_best_ratio"] else "")
            + f" | v5 failures {v['v5_failed']}; largest err/tol of those ok {v['v5_largest_err_over_tol_of_ok']}"
        )
    print(
        f"  issue 24 squares (1024/2048/4096^3), best v5 per size, geomean ratio: {summary['squares_geomean_best_per_size']}"
        " (target >= 1.00)"
    )
    print(f"  all sizes here, best v5 per size, geomean ratio: {summary['all_sizes_geomean_best_per_size']}")
    if single:
        print(
            f"  best single v5 config over the squares: geomean {single[0][0]:.3f} {[round(x, 3) for x in single[0][2]]}"
            f" [{label(configs[single[0][1]]['config'])}]"
        )
    # what each choice of the new parameters gives: best ratio per size by value
    for param in ("rn_sum", "stages", "tile_k", "split_k"):
        line = []
        for value in sorted({configs[i]["config"][param] for i in v5}):
            best = [
                max(
                    (
                        r.get("ratio") or 0
                        for i, r in per[s].items()
                        if i in v5 and configs[i]["config"][param] == value
                    ),
                    default=0,
                )
                for s in plan["sizes"]
                if s in cublas
            ]
            line.append(f"{param}={value}: " + " ".join(f"{b:.2f}" for b in best))
        print(
            f"  best ratio per size ({', '.join(s for s in plan['sizes'] if s in cublas)}) by {param}:\n    "
            + "\n    ".join(line)
        )
    failures = sorted(
        {(r["status"], r.get("error", "")[:200]) for by in per.values() for r in by.values() if r.get("status") != "ok"}
    )
    if failures:
        print(f"  distinct failures ({len(failures)}):")
        for status, error in failures[:12]:
            print(f"    {status}: {error}")
    return {"summary": summary, "per_size": {s: list(by.values()) for s, by in per.items()}, "cublas": cublas}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--only", action="append", default=[], help="param=value: only the variant-5 configs with it (repeatable)"
    )
    p.add_argument("--sizes", nargs="*", default=SIZES)
    p.add_argument("--repeats", type=int, default=30, help="timed launches per config and size (median)")
    p.add_argument("--arch", default="sm_90")
    p.add_argument("--budget", type=float, default=450, help="seconds: no new measurement starts after this")
    p.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "/tmp")))
    p.add_argument("--worker", type=Path, help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.worker:
        return worker(a.worker)
    t0 = time.time()
    from tuner.measure import kt
    from tuner.workloads import get_workload

    space = get_workload("gemm").space
    v5 = [
        c
        for c in (dict(zip(space.params, v)) for v in kt.searchspace(space).list)
        if c["variant"] == 5 and selected(c, a.only)
    ]
    bests = simt_bests(a.sizes)
    simt = []
    for b in bests.values():
        if b["config"] not in simt:
            simt.append(b["config"])
    configs = v5 + [space.complete(c) for c in simt]
    simt_for = {s: len(v5) + simt.index(b["config"]) for s, b in bests.items()}  # size -> its SIMT best's index
    print(f"{len(v5)} variant-5 configs, {len(simt)} stored SIMT bests; sizes {' '.join(a.sizes)}", flush=True)
    work = Path(tempfile.mkdtemp(prefix="gemm_dev-"))
    options = [*space.compiler_options, f"--gpu-architecture={a.arch}"]
    jobs = [(space.source_for("float32", c), options, str(work / f"k{i}.cubin")) for i, c in enumerate(configs)]
    errors: dict[str, str] = {}
    with ProcessPoolExecutor(max_workers=max(1, min(16, (os.cpu_count() or 2)))) as pool:
        secs = []
        for path, err, s in pool.map(compile_one, jobs):
            errors[path] = err
            secs.append(s)
    print(
        f"compiled in {time.time() - t0:.1f} s ({sum(secs):.0f} s of NVRTC); "
        f"{sum(1 for e in errors.values() if e)} failed",
        flush=True,
    )
    plan = {
        "sizes": a.sizes,
        "simt_for": simt_for,
        "repeats": a.repeats,
        "deadline": t0 + a.budget,
        "configs": [{"config": c, "cubin": j[2], "compile_error": errors[j[2]]} for c, j in zip(configs, jobs)],
    }
    (work / "plan.json").write_text(json.dumps(plan))
    results = work / "results.jsonl"

    def measured() -> int:
        return len(results.read_text().splitlines()) if results.exists() else 0

    while True:  # a worker ends early when a launch broke its CUDA context: the next goes on after that config
        before = measured()
        try:
            proc = subprocess.run(
                [sys.executable, __file__, "--worker", str(work)], timeout=max(60, plan["deadline"] - time.time() + 120)
            )
        except subprocess.TimeoutExpired:  # a hung kernel: report what was done
            print("worker timed out; reporting what it measured", flush=True)
            break
        if proc.returncode == 0 or measured() == before:  # done, or failing before any result (see its error)
            break
        print(f"worker ended with {proc.returncode} after {measured()} results; starting another", flush=True)
    rows = [json.loads(line) for line in results.read_text().splitlines()] if results.exists() else []
    doc = report(plan, rows)
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=HERE, capture_output=True, text=True
        ).stdout.strip()
    except OSError:
        commit = ""
    doc.update(
        gpu=(work / "gpu.txt").read_text() if (work / "gpu.txt").exists() else "",
        commit=commit,
        seconds=round(time.time() - t0, 1),
        repeats=a.repeats,
        configs=[
            {"config": c["config"], "label": label(c["config"]), "compile_error": c["compile_error"]}
            for c in plan["configs"]
        ],
        simt_bests=bests,
        notes="ratio = cuBLAS ms / config ms at the same size in the same run (cuBLAS timed before and after each size, "
        "the mean used); err_over_tol = max |C - float64 reference| / the workload's float32 tolerance",
    )
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "gemm_dev.json").write_text(json.dumps(doc, indent=1, default=str) + "\n")
    print(f"\nwrote {a.out / 'gemm_dev.json'} ({time.time() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
