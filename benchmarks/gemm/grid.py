r"""A tuned best for every shape of the seeds' grid (M, N, K each in {256, 512, 1024, 2048}, float32): one
regular campaign per shape (`tuner tune gemm --size MxNxK --budget B`, in this one process), TPE with the
framework's warm start from the stored shapes, preceded by first_configs: the best stored config of each
block tile (from the nearest shapes that measured it), since the tile is what changes most between shapes;
the best tiles split over K where the shape leaves SMs idle (split_candidates); on a thin shape the small
tiles split, over thread groups inside the block too (grouped_tiles, small_tiles); the best tiles on the
tensor cores (tensor_core_counterparts). Shapes go from large to small M, so each one has a tuned neighbour.
A shape is done once the store holds `budget` configs of it measured with the current kernel source; a rerun
resumes. `--until` (epoch seconds) stops before a shape that would not finish in time. `--size` tunes those
shapes instead of the grid.

  python benchmarks/gemm/grid.py --budget 16 --until $(( $(date +%s) + 450 ))
  python benchmarks/gemm/grid.py --budget 30 --size 1024x1024x1024 --size 4096x4096x4096

Through the device tool, keep the store on the device machine (it stays there while the machine is warm)
and pack it into $OUT every 15 s, so that what a command measured comes back even when it runs out of time.
The tool brings back at most 8 files, none deeper than $OUT/a/b/: a store laid under $OUT itself was lost
that way (2026-11-28), and so was one packed only at the end of a command that ran out of time.

  . benchmarks/common/device_env.sh; S=/tmp/tstore; [ -d $S/nvidia-h200/gemm ] || { mkdir -p $S/nvidia-h200 \
    && cp -r results/store/nvidia-h200/gemm $S/nvidia-h200/; }; export TUNER_RESULTS=$S; pack() { tar czf \
    $OUT/.s.tgz -C $S nvidia-h200/gemm 2>/dev/null; mv $OUT/.s.tgz $OUT/store.tgz; }; (while sleep 15; do pack; \
    done) & python3 benchmarks/gemm/grid.py --gpu "NVIDIA H200" --budget 20 --until $(( $(date +%s) + 500 )); \
    kill %1; pack

(that GPU's folder alone: its shapes seed each other; copy the H100's too for a GPU with no shape tuned yet),
then unpack store.tgz over results/store/ (leave out optuna.sqlite3-wal and -shm and the Kernel Tuner caches:
replays derive theirs from the rows, tuner.store.recordings).
"""

from __future__ import annotations

import argparse
import json
import time

from tuner import store
from tuner.campaign.local import run_campaign
from tuner.campaign.request import CampaignRequest
from tuner.measure.provenance import source_hash
from tuner.space import size_distance
from tuner.workloads import get_workload

WORKLOAD, DTYPE, GPU = "gemm", "float32", "NVIDIA H100 80GB HBM3"
DIMS = (256, 512, 1024, 2048)
SMS = 132  # the H100's and the H200's SMs: a split aims at one block per SM at least
MIN_SLICE = 8  # BK tiles per slice at least: shorter slices spend more on the partials than they save


def grid_sizes() -> list[dict]:
    """The 64 shapes, large M (then N, then K) first."""
    return [{"m": m, "n": n, "k": k} for m in reversed(DIMS) for n in reversed(DIMS) for k in reversed(DIMS)]


def size_name(size: dict) -> str:
    return f"{size['m']}x{size['n']}x{size['k']}"


def tile(config: dict) -> tuple[int, int]:
    """The block tile (rows x columns of C) of a config; variants 1-3: their square tile."""
    if config["variant"] < 4:
        return config["block_size_x"], config["block_size_x"]
    return config["block_size_y"] * config["tile_m"], config["block_size_x"] * config["tile_n"]


def output_tiles(size: dict, bm: int, bn: int) -> int:
    """The block tiles of bm x bn that cover the shape's output (blocks per split of K)."""
    return -(-size["m"] // bm) * -(-size["n"] // bn)


def k_tiles(config: dict, size: dict) -> int:
    """The BK tiles of K a config's blocks go through (whole, unsplit; with k_groups, k_groups of them a step)."""
    return -(-size["k"] // config["tile_k"])


def split_candidates(config: dict, size: dict, space) -> list[dict]:
    """`config` split over K (register-tiled or on the tensor cores, a tile split-K allows): the smallest split
    of the space that gives nearly every SM a block (128 blocks for 132 SMs will do), with each reduction the
    config allows, and the next split with the in-order one; none where the tiles alone fill the SMs or the
    slices would be shorter than MIN_SLICE tiles of K."""
    if config["variant"] not in (4, 5):
        return []
    bm, bn = tile(config)
    tiles = output_tiles(size, bm, bn)
    splits = [s for s in space.params["split_k"] if s > 1 and k_tiles(config, size) >= s * MIN_SLICE]
    if tiles >= SMS or not splits:
        return []
    first = next((i for i, s in enumerate(splits) if tiles * s >= 0.9 * SMS), len(splits) - 1)
    picks = [(splits[first], 1), (splits[first], 0)] + ([(splits[first + 1], 1)] if first + 1 < len(splits) else [])
    out = [{**config, "split_k": s, "split_reduce": r} for s, r in picks]
    if config["variant"] == 5:  # split-K's one pipeline on the tensor cores: BK 16 in 2 stages
        out = [{**c, "tile_k": 16, "stages": 2} for c in out]
    return [c for c in out if space.is_valid(c)]


def most_split(config: dict, size: dict, space) -> int:
    """The largest split of the space whose slices hold MIN_SLICE tiles of K (several blocks an SM on a thin
    shape: does the SM hide its latencies better than with one?)."""
    return max([s for s in space.params["split_k"] if k_tiles(config, size) >= s * MIN_SLICE], default=1)


SMALL_TILES = ((32, 32), (64, 64), (32, 64), (64, 32))  # variant 4's 4x4-outputs-per-thread tiles


def small_tiles(base: dict, size: dict, space) -> list[dict]:
    """Where 64x64 tiles leave SMs idle (a thin shape): variant 4's small block tiles (4x4 outputs a thread,
    double-buffered, vector loads), each split over K in the ways split_candidates picks (unsplit where the
    tiles fill the SMs) and at most_split, then the tensor cores' 64x64 tile split; `base` gives the options
    the tile leaves open. On the H200 the best config of each of the 12 shapes under 0.8 of cuBLAS
    (2026-11-28) was one of these small tiles split or a 64x128 tile split."""
    if output_tiles(size, 64, 64) >= SMS:
        return []
    clean = small_tile_options(base)
    out = []
    for bm, bn in SMALL_TILES:
        for pad_a in (clean["pad_a"], 4 - clean["pad_a"]):
            c = {**clean, "block_size_x": bn // 4, "block_size_y": bm // 4, "pad_a": pad_a}
            if space.is_valid(c):
                most = {**c, "split_k": most_split(c, size, space), "split_reduce": 0}
                out += (split_candidates(c, size, space) or [c]) + ([most] if space.is_valid(most) else [])
                break
    return out + split_candidates(tensor_64x64(clean), size, space)[:1]


def tensor_64x64(base: dict) -> dict:
    """`base` on the tensor cores at a 64x64 block tile: 4 warps of 32x32, BK 16 in 2 stages (split-K's
    pipeline there), unsplit and in one group."""
    return {**base, "variant": 5, "block_size_x": 8, "block_size_y": 16, "tile_m": 4, "tile_n": 8, "tile_k": 16,
            "warp_x": 8, "double_buffer": 0, "pad_a": 0, "vector": 1, "unroll": 0, "stages": 2, "rn_sum": 0,
            "split_k": 1, "split_reduce": 0, "k_groups": 1}


def small_tile_options(base: dict) -> dict:
    """`base` with variant 4's options of the small tiles (4x4 outputs a thread, BK 16, double-buffered, vector
    loads), unsplit and in one group; the tile is the caller's."""
    return {**base, "variant": 4, "tile_m": 4, "tile_n": 4, "tile_k": 16, "warp_x": 8, "double_buffer": 1,
            "vector": 4, "unroll": 0, "stages": 0, "rn_sum": 0, "split_k": 1, "split_reduce": 0, "k_groups": 1}


def grouped_tiles(base: dict, size: dict, space) -> list[dict]:
    """Where 64x64 tiles leave SMs idle: variant 4's small tiles (BK 16) and the tensor cores' 64x64 tile with
    K split inside the block too (grouped_counterparts). A block steps through K k_groups tiles at a time:
    fewer steps a slice, each with more loads in flight, for the thin shapes whose blocks ran one or two warps
    an SM scheduler (2026-11-28). On the H200 (2026-11-29) each of the 12 thin shapes then under 0.8 of cuBLAS
    ran fastest grouped, the more groups the faster at 32x32."""
    tiles = [{**small_tile_options(base), "block_size_x": bn // 4, "block_size_y": bm // 4} for bm, bn in SMALL_TILES]
    return [c for config in [*tiles, tensor_64x64(base)] for c in grouped_counterparts(config, size, space)]


def grouped_counterparts(config: dict, size: dict, space) -> list[dict]:
    """On a thin shape (64x64 tiles leave SMs idle), `config` (register-tiled or on the tensor cores) with K
    split inside the block too, in each k_groups the space allows it: at its BK (else 8), split as
    split_candidates picks; where that leaves it unsplit, also at the first BK that splits (BK 16 may fill
    shared memory unsplit)."""
    if config["variant"] not in (4, 5) or output_tiles(size, 64, 64) >= SMS:
        return []
    out = []
    for k_groups in (2, 4, 8):
        grouped = [{**config, "k_groups": k_groups, "tile_k": tile_k, "split_k": 1, "split_reduce": 0}
                   for tile_k in dict.fromkeys((config["tile_k"], 8))]
        valid = [c for c in grouped if space.is_valid(c)]
        if not valid:
            continue
        first = split_candidates(valid[0], size, space)
        out += first or [valid[0]]
        if not first:
            out += next((split for c in valid[1:] if (split := split_candidates(c, size, space))), [])
    return out


def tensor_core_counterparts(config: dict, space) -> list[dict]:
    """Variant 5 (3xTF32 tensor cores) at `config`'s block tile, unsplit: its fewest warps (the largest warp
    tiles), with the two pipelines that hold 32 of K (tile_k 8 in 4 stages, 16 in 2). Measured on the H200
    (benchmarks/gemm_dev.py, results/records/gemm/nvidia-h200/dev/), those two held the best variant-5 config
    of every size but the thinnest."""
    if config["variant"] not in (4, 5):
        return []
    bm, bn = tile(config)
    out = []
    for tile_k, stages in ((8, 4), (16, 2)):
        for bx, by in ((16, 8), (8, 16), (32, 8), (16, 16), (8, 32)):  # 128 threads first, then 256
            c = {**config, "variant": 5, "block_size_x": bx, "block_size_y": by, "tile_m": bm // by,
                 "tile_n": bn // bx, "tile_k": tile_k, "stages": stages, "rn_sum": 0, "warp_x": 8,
                 "double_buffer": 0, "pad_a": 0, "vector": 1, "unroll": 0, "split_k": 1, "split_reduce": 0}
            if bm % by == 0 and bn % bx == 0 and space.is_valid(c):
                out.append(c)
                break
    return out


def first_configs(evals, size: dict, gpu: str, space, tiles: int = 3) -> list[dict]:
    """What a shape's campaign measures first (then TPE): the best stored config of the best `tiles` block
    tiles (best_per_tile; of any GPU where `gpu` has none yet), unsplit; split over K where the shape leaves
    SMs idle (split_candidates: all of them for the best tile, the first for the others); on a thin shape the
    small tiles split, with K split inside the block first (grouped_tiles, small_tiles), and the best tiles split
    inside the block (grouped_counterparts; on a rerun, the shape's own best too); the tensor-core counterparts
    of the best `tiles` tiles, and at 64x64 where 128x128 tiles would leave SMs idle. A campaign's budget cuts
    this list's tail."""
    stored = best_per_tile(evals, size, gpu) if not evals.empty else []
    if not stored and not evals.empty:
        stored = best_per_tile(evals, size, None)
    bests = [{**space.complete(c), "split_k": 1, "split_reduce": 0} for c in stored]
    out = list(bests[:tiles])
    for i, c in enumerate(bests[:tiles]):
        out += split_candidates(c, size, space)[: None if i == 0 else 1]
    if bests:
        out += grouped_tiles(bests[0], size, space) + small_tiles(bests[0], size, space)
    for c in bests[:tiles] + own_best(evals, size, gpu):  # a rerun: this shape's own best so far too
        out += grouped_counterparts({**space.complete(c), "split_k": 1, "split_reduce": 0}, size, space)
    for c in bests[:tiles]:
        out += tensor_core_counterparts(c, space)
    if bests and output_tiles(size, 128, 128) < 2 * SMS:  # and on the tensor cores, 64x64 tiles
        out += tensor_core_counterparts({**bests[0], "variant": 4, "block_size_x": 16, "block_size_y": 16,
                                         "tile_m": 4, "tile_n": 4}, space)
    return [c for i, c in enumerate(out) if c not in out[:i]]


def measured_configs(evals, size: dict, kernel_hash: str, gpu: str) -> int:
    rows = evals[(evals.size_vars == json.dumps(size, sort_keys=True)) & (evals.dtype == DTYPE)
                 & (evals.gpu == gpu) & (evals.kernel_hash == kernel_hash)]
    return rows.config.nunique()


def own_best(evals, size: dict, gpu: str) -> list[dict]:
    """The shape's best register-tiled config measured on `gpu` so far, as a one-item list (none: empty)."""
    ok = evals[(evals.status == "ok") & (evals.dtype == DTYPE) & (evals.p_variant == 4) & (evals.gpu == gpu)
               & (evals.size_vars == json.dumps(size, sort_keys=True))] if not evals.empty else evals
    return [json.loads(store.config_medians(ok, maximize=True).index[0])] if not ok.empty else []


def best_per_tile(evals, size: dict, gpu: str | None) -> list[dict]:
    """For each register-tiled block tile: its best config at the nearest other shape that measured it (on
    `gpu`; None: on any), best first."""
    ok = evals[(evals.status == "ok") & (evals.dtype == DTYPE) & (evals.p_variant >= 4)
               & (evals.size_vars != json.dumps(size, sort_keys=True))]
    if gpu is not None:
        ok = ok[ok.gpu == gpu]
    picks = {}
    for _size_vars, rows in sorted(ok.groupby("size_vars"), key=lambda g: size_distance(size, json.loads(g[0]))):
        per_config = store.config_medians(rows, maximize=True)
        ceiling = per_config.iloc[0]
        for config_text, value in per_config.items():
            config = json.loads(str(config_text))  # the index: each config's JSON text
            if tile(config) not in picks:
                picks[tile(config)] = (value / ceiling, config)
    return [config for _, config in sorted(picks.values(), key=lambda p: -p[0])]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--budget", type=int, default=16, help="configs measured per shape")
    p.add_argument("--until", type=float, help="epoch seconds: start no shape that would end after this")
    p.add_argument("--gpu", default=GPU, help="the GPU whose recordings count as done (and seed the tiles)")
    p.add_argument("--timeout", type=float, default=30, help="seconds per config")
    p.add_argument("--size", action="append", default=[], help="MxNxK: tune these shapes instead (repeatable)")
    args = p.parse_args()
    space = get_workload(WORKLOAD).space
    kernel_hash = source_hash(space.source_text)
    sizes = []
    for text in args.size:
        parsed = get_workload(WORKLOAD).parse_size(text)
        if parsed is None:
            p.error(f"--size {text}: not MxNxK")
        sizes.append(parsed)
    sizes = sizes or grid_sizes()
    durations: list[float] = []
    tuned, left = 0, []
    for size in sizes:
        evals = store.load_evaluations(WORKLOAD)
        if not evals.empty and measured_configs(evals, size, kernel_hash, args.gpu) >= args.budget:
            continue
        estimate = max(durations[-5:]) if durations else 20.0
        if args.until and time.time() + estimate > args.until:
            left.append(size_name(size))
            continue
        first = first_configs(evals, size, args.gpu, space)
        started = time.time()
        out = run_campaign(CampaignRequest(WORKLOAD, size=size_name(size), dtype=DTYPE, strategy="tpe",
                                           max_evals=args.budget, seed=1, timeout=args.timeout, quiet=True,
                                           first=tuple(first)))
        durations.append(time.time() - started)
        tuned += 1
        best = out.best["value"] if out.best else float("nan")
        cublas_ms = out.baselines.get("cublas")
        cublas = 2e-6 * size["m"] * size["n"] * size["k"] / cublas_ms if cublas_ms else float("nan")
        print(f"{size_name(size)}: best {best:.0f} GFLOP/s, cuBLAS {cublas:.0f} ({best / cublas:.2f}); "
              f"{out.evaluated} configs, {out.measured} measured; {durations[-1]:.1f} s", flush=True)
    print(f"tuned {tuned} shapes" + (f"; {len(left)} left for a rerun: {' '.join(left)}" if left else "; grid complete"))


if __name__ == "__main__":
    main()
