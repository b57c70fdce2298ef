"""Compute the float64 numpy reference prices of the named LocVolCalib sizes into
data/locvolcalib/reference/<size>.txt (one value a line, 17 significant digits), so the GPU campaigns need
not spend minutes in the slow path before their first measurement. Usage: python benchmarks/lvc_references.py [SIZE...]"""

import sys
import time

from tuner.workloads.locvolcalib import WORKLOAD, reference_path
from tuner.workloads.locvolcalib_io import problem_from_size
from tuner.workloads.locvolcalib_ref import price

sizes = sys.argv[1:] or list(WORKLOAD.space.sizes)
for name in sizes:
    size = WORKLOAD.space.sizes[name]
    t0 = time.perf_counter()
    values = price(problem_from_size(size))
    reference_path(name).write_text("".join(f"{v:.17g}\n" for v in values))
    print(f"{name}: {time.perf_counter() - t0:.1f} s", flush=True)
