"""Compute the float64 numpy reference prices of the named LocVolCalib sizes into
data/locvolcalib/reference/<size>.txt (one value a line, 17 significant digits), so the GPU campaigns need
not spend minutes in the slow path before their first measurement; with --times FILE, the seconds each
took (the sequential numpy column of docs/results/locvolcalib.md; kept as
results/records/locvolcalib/<gpu>/runs/numpy_seconds_*.json).
Usage: python benchmarks/locvolcalib/references.py [--times FILE] [SIZE...]"""

import json
import platform
import sys
import time

from tuner.workloads.locvolcalib import WORKLOAD, reference_path
from tuner.workloads.locvolcalib_io import problem_from_size
from tuner.workloads.locvolcalib_ref import price

args = sys.argv[1:]
times_file = None
if args[:1] == ["--times"]:
    times_file, args = args[1], args[2:]
sizes = args or list(WORKLOAD.space.sizes)
seconds = {}
for name in sizes:
    size = WORKLOAD.space.sizes[name]
    t0 = time.perf_counter()
    values = price(problem_from_size(size))
    reference_path(name).write_text("".join(f"{v:.17g}\n" for v in values))
    seconds[name] = time.perf_counter() - t0
    print(f"{name}: {seconds[name]:.1f} s", flush=True)
if times_file:
    with open(times_file, "w") as f:
        json.dump({"seconds": seconds, "cpu": platform.processor() or platform.machine(), "host": platform.node(),
                   "note": "numpy float64 reference, one process, sequential"}, f, indent=1)
