"""Markdown table for docs/results/floyd-warshall.md (printed; pasted there by hand) from the stored
Floyd-Warshall campaigns: per size, the seed's configuration and the tuned best on one GPU (the H100 by
default), beside the seed's GTX 1080 figures, and G = 1 vs G = 2 where a two-GPU machine recorded them
(benchmarks/floyd_warshall/multigpu.sh).
Usage: python benchmarks/floyd_warshall/report.py [GPU name]"""

import json
import sys
from pathlib import Path
from typing import cast

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the checkout, for benchmarks.common
from benchmarks.common.report import commits, evaluations, gpu_argument, header, row, software  # noqa: E402
from tuner.store import canonical_config  # noqa: E402

GPU = gpu_argument()
SEED_CONFIG = {"BLOCK": 64, "block_size_x": 32, "block_size_y": 32, "VEC": 0, "DPX": 0, "PAD": 0, "K_UNROLL": 64,
               "LOOKAHEAD": 0, "SPLIT": 100, "KCHUNK": 0, "MIN_BLOCKS": 0, "PRIORITY": 0}
GTX1080_COMPUTE_S = {5000: 0.127, 11000: 1.172, 20000: 7.442, 25000: 15.157}  # the seed's "Compute" column

df = evaluations("floyd-warshall")
ok = df[(df.status == "ok")].copy()
# per GPU, the newest kernel code it ran: the seed's config and the tuned best compared on the same code
newest = ok.sort_values("timestamp").groupby("gpu").kernel_hash.last()
ok = ok[ok.kernel_hash == ok.gpu.map(newest)]
ok["n"] = ok.size_vars.map(lambda s: json.loads(s)["n"])
ok["gpus"] = ok.size_vars.map(lambda s: json.loads(s)["gpus"])


def trelax(n, ms):
    return n**3 / (ms / 1e3) / 1e12


def short(config):
    c = json.loads(config) if isinstance(config, str) else config
    return (f"B{c['BLOCK']} {c['block_size_x']}x{c['block_size_y']} VEC{c['VEC']} DPX{c['DPX']} PAD{c['PAD']} "
            f"unroll{c['K_UNROLL']} look-ahead{c['LOOKAHEAD']} kchunk{c['KCHUNK']}"
            + (f" min-blocks{c['MIN_BLOCKS']}" if c.get("MIN_BLOCKS") else "")
            + (" priority" if c.get("PRIORITY") else "")
            + (f" split{c['SPLIT']}" if c["SPLIT"] != 100 else ""))


def single_gpu():
    rows = ok[(ok.gpu == GPU) & (ok.gpus == 1)]
    print(header("n", "GTX 1080, seed's code (compute)", f"{GPU}: seed's config", "T relax/s", "tuned best", "T relax/s",
                 "tuned / seed", "configs measured", "best config"))
    for n, r in sorted(rows.groupby("n")):
        per_config = r.groupby("config").time_ms.median()
        seed_ms = per_config.get(canonical_config(SEED_CONFIG))
        best, best_ms = per_config.idxmin(), per_config.min()
        ref = GTX1080_COMPUTE_S.get(cast(int, n))  # groupby("n") keys: the sizes, ints
        seed_txt = f"{seed_ms / 1e3:.4f} s" if seed_ms else "-"
        seed_cells = ((seed_txt, f"{trelax(n, seed_ms):.2f}") if seed_ms else ("-", "-"))
        print(row(n, f"{ref} s" if ref else "-", *seed_cells, f"{best_ms / 1e3:.4f} s",
                  f"{trelax(n, best_ms):.2f}", f"{seed_ms / best_ms:.2f}x" if seed_ms else "-",
                  len(per_config), short(best)))
    print("\nGTX 1080 at n = 25000: " + f"{GTX1080_COMPUTE_S[25000]} s ({trelax(25000, GTX1080_COMPUTE_S[25000] * 1e3):.2f} "
          "T relax/s), the seed's largest case.")


def two_gpus():
    multi = ok[ok.gpus == 2]
    for gpu, r in multi.groupby("gpu"):
        for n, rn in r.groupby("n"):
            one = ok[(ok.gpu == gpu) & (ok.gpus == 1) & (ok.n == n)].groupby("config").time_ms.median()
            two = rn.groupby("config").time_ms.median()
            if one.empty:
                continue
            print(f"\n{gpu}, n = {n}: best on 1 GPU {one.min() / 1e3:.4f} s ({trelax(n, one.min()):.2f} T/s), "
                  f"on 2 GPUs {two.min() / 1e3:.4f} s ({trelax(n, two.min()):.2f} T/s): {one.min() / two.min():.2f}x "
                  f"({short(two.idxmin())})")


def provenance():
    r = df[df.gpu == GPU]
    print(f"\nProvenance: {len(r)} evaluations ({(r.status == 'ok').sum()} verified exactly against the reference); "
          f"{software(r, every=True)}, commits {commits(r)}")


single_gpu()
two_gpus()
provenance()
