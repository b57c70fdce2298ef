"""Rewrite the store's Kernel Tuner caches from the store's own rows, as Kernel Tuner writes them:

    python benchmarks/common/kt_caches.py [--results results/store]

Each cache beside a workload's parts (results/store/<gpu>/<workload>/<size>_<dtype>.cache.json) is written
again by tuner.store.kt_files.store_cache_doc: one entry per config (its measurement at its median), `time`
the median of its launches (the time the store ranks by), the space's metrics, every failure as Kernel Tuner's
error class, the GPU's name and the problem size in the header. Nothing else is touched; run it again after
campaigns that wrote caches the old way."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the checkout
from tuner import locations  # noqa: E402
from tuner.store.kt_files import rewrite_store_caches  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", type=Path, default=locations.BUILTIN_RESULTS, help="the store (default: results/store)")
    args = ap.parse_args()
    for path in rewrite_store_caches(args.results):
        print(path)


if __name__ == "__main__":
    main()
