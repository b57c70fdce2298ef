"""The regression check's figures on a GPU: A/A (nothing changed: how often is a regression flagged?)
and A/B (a planted slowdown: how often is it caught?). Uses the baselines stored by `tuner baseline`
and the same measurement and verdict code as `tuner check`. Each check starts a fresh worker, as `tuner
check` does: every worker session lands at its own offset, which is what the noise floor is about
(`--persistent` keeps one worker per kernel instead: more checks per minute, but it hides that offset and
so flatters the A/A rate). Writes one JSON line per kernel check (benchmarks/common/check_figures.sh keeps them
in results/records/common/<gpu>/check/).

  python benchmarks/common/check_figures.py aa --seconds 300 --out aa.jsonl
  python benchmarks/common/check_figures.py ab --plant large:float32:finish=0 --plant large:float32:block_size_x=256 \
      --repeats 10 --out ab.jsonl
"""

import argparse
import json
import sys
import time


def main():
    # imported here, not at the top: each worker process imports this script again (as multiprocessing's
    # __mp_main__), and these would bring Kernel Tuner, and with it torch, before the worker can keep it out
    from tuner.answers.baseline import load_check_baselines, measuring_process
    from tuner.answers.check import check_one
    from tuner.measure.provenance import gpu_info
    from tuner.workloads import get_workload

    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["aa", "ab"])
    p.add_argument("--seconds", type=float, default=300)
    p.add_argument("--repeats", type=int, default=10)
    p.add_argument("--rounds", type=int, default=20)
    p.add_argument("--plant", action="append", default=[], help="SIZE:DTYPE:NAME=VALUE")
    p.add_argument("--out", required=True)
    p.add_argument("--persistent", action="store_true", help="one worker per kernel for the whole run")
    a = p.parse_args()
    here = gpu_info()["gpu"]
    bases = {(b["workload"], b["size"], b["dtype"]): b for b in load_check_baselines(gpu=here).to_dict("records")}
    jobs: list[tuple[dict, dict | None]] = []  # (baseline, planted config or None)
    if a.mode == "aa":
        jobs = [(b, None) for b in bases.values()]
    else:
        for spec in a.plant:
            size, dtype, assign = spec.split(":")
            name, value = assign.split("=")
            jobs.append((bases[("reduction", size, dtype)], {name: int(value)}))
    workers = {}
    start, n = time.monotonic(), 0
    with open(a.out, "a") as out:
        for rep in range(10**6 if a.mode == "aa" else a.repeats):
            for base, plant in jobs:
                if a.mode == "aa" and time.monotonic() - start > a.seconds:
                    break
                key = (base["workload"], base["size"], base["dtype"])
                if key not in workers:
                    workers[key] = measuring_process(base["workload"], json.loads(base["size_vars"]), base["dtype"], "nvcuda", 0, 120)
                runner, gpu = workers[key] if a.persistent else workers.pop(key)
                space = get_workload(base["workload"]).space
                config = {**json.loads(base["config"]), **(plant or {})}
                now = runner.measure_rounds([config[k] for k in space.params], list(space.params), a.rounds)
                res = check_one(base, gpu, now)
                rec = {"mode": a.mode, "repeat": rep, "kernel": "/".join(key), "plant": plant, "verdict": res.verdict,
                       "noise_floor": res.noise_floor, "fresh_worker": not a.persistent,
                       "raw": res.raw, "normalised": res.normalised, "baseline_ms": res.baseline_ms, "now_ms": res.now_ms,
                       "t": round(time.monotonic() - start, 1), "setup_s": (runner.setup or {}).get("setup_s"),
                       "references_s": now.get("references_s"), "measure_s": now.get("measure_s"),
                       "first_round_ms": now.get("first_round_ms"), "rounds": res.rounds}
                if not a.persistent:
                    runner.shutdown()
                    rec["worker_s"] = runner.lifecycle_s  # its start (spawn to ready) and shutdown
                out.write(json.dumps(rec) + "\n")
                out.flush()
                n += 1
            else:
                continue
            break
    for runner, _ in workers.values():
        runner.shutdown()
    print(f"{n} kernel checks in {time.monotonic() - start:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
