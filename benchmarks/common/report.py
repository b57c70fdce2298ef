"""What the report scripts share (benchmarks/<workload>/report.py, benchmarks/common/strategy_report.py, and the
benchmark scripts that file records): where the store and the records are, the store's rows of one workload on
one GPU, Markdown tables, and the provenance line under each report's tables.

Two folders, never mixed (docs/store.md):
- the store, results/store/<gpu>/<workload>/: what the tool reads and writes (tuner.store.results_root(), from
  [tool.tuner] in pyproject.toml); the reports only read it;
- the records, results/records/<workload>/<gpu>/<kind>/: what the benchmark scripts write besides (logs, sweeps,
  profiles, reports, strategy comparisons, distributed speed-ups); records_dir() names a kind's folder.
  Records of no single workload (the regression check's figures, the strategy summary, a host's topology) go
  under the workload name `common`.

A report runs as a script (`python benchmarks/gemm/report.py`): its first lines put the checkout on sys.path, so
that `benchmarks.common.report` imports (benchmarks/ is a namespace package: no __init__.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

from tuner.store import gpu_slug, load_baselines, load_evaluations, results_root, workload_dir

CHECKOUT = Path(__file__).resolve().parents[2]
RECORDS = CHECKOUT / "results" / "records"
COMMON = "common"  # the records of no single workload
H100 = "NVIDIA H100 80GB HBM3"  # the GPU the reports describe unless told another


def gpu_argument(default: str = H100) -> str:
    """The GPU named as the script's one argument (`python benchmarks/floyd_warshall/report.py "NVIDIA H200"`), else
    `default`. `-h`/`--help` prints the script's docstring; an option it does not take, or a GPU the store has no
    folder of, is one line (exit 2): read as a GPU, `--help` gave the reports an empty table and a traceback."""
    if len(sys.argv) < 2:
        return default
    arg = sys.argv[1]
    if arg in ("-h", "--help"):
        print(sys.modules["__main__"].__doc__ or "")
        raise SystemExit(0)
    root = results_root()  # its folders: one a GPU, and `simulated` (the replays' store)
    known = sorted(p.name for p in root.iterdir() if p.is_dir() and p.name != "simulated") if root.is_dir() else []
    if arg.startswith("-") or gpu_slug(arg) not in known:
        print(f"{sys.argv[0]}: '{arg}' is no GPU of the store ({', '.join(known)}); give its name as the store "
              f"does (e.g. \"{H100}\") or none for the {H100}", file=sys.stderr)
        raise SystemExit(2)
    return arg


# --- where things are -------------------------------------------------------------------------------------------

def store_dir(gpu: str, workload: str) -> Path:
    """A workload's folder in the store (results/store/<gpu>/<workload>/ in this checkout)."""
    return workload_dir(results_root(), gpu, workload)


def records_dir(workload: str, gpu: str, kind: str) -> Path:
    """results/records/<workload>/<gpu>/<kind>/: `gpu` as the store names it or its folder name (both give the
    folder name); `workload` a workload's name, or COMMON."""
    return RECORDS / workload / gpu_slug(gpu) / kind


def shown(path: Path) -> Path:
    """A path as the checkout names it (results/records/...), for a report's last line."""
    return path.resolve().relative_to(CHECKOUT)


# --- the store's rows --------------------------------------------------------------------------------------------

def evaluations(workload: str, gpu: str | None = None, *, ok: bool = False, dtype: str | None = None) -> pd.DataFrame:
    """The workload's evaluation rows (tuner.store.load_evaluations), of one GPU, one dtype and only the successful
    ones if asked."""
    df = load_evaluations(workload)
    if gpu is not None:
        df = df[df.gpu == gpu]
    if dtype is not None:
        df = df[df.dtype == dtype]
    if ok:
        df = df[df.status == "ok"]
    return df


def baselines(workload: str, gpu: str | None = None, name: str | None = None) -> pd.DataFrame:
    """The workload's vendor-reference rows (tuner.store.load_baselines), of one GPU and one reference if asked."""
    df = load_baselines(workload)
    if gpu is not None:
        df = df[df.gpu == gpu]
    if name is not None:
        df = df[df.baseline == name]
    return df


# --- Markdown ----------------------------------------------------------------------------------------------------

def _cells(cells) -> str:
    return "|" + "".join(f" {c} |" if str(c) != "" else " |" for c in cells)


def header(*columns) -> str:
    """A Markdown table's header and rule: `| a | b |` and `|---|---|`."""
    return _cells(columns) + "\n|" + "---|" * len(columns)


def row(*cells) -> str:
    """A Markdown table's row; an empty cell is `| |`."""
    return _cells(cells)


def values(series: pd.Series) -> str:
    """Every value of a column, sorted, comma-separated."""
    return ", ".join(sorted(str(v) for v in series.unique()))


def software(df: pd.DataFrame, every: bool = False) -> str:
    """The software the rows were measured with: `driver X, CUDA Y, Kernel Tuner Z, backend W`, from the first row,
    or every value of each (`every`)."""
    pick = values if every else (lambda s: s.iloc[0])
    return (f"driver {pick(df.driver)}, CUDA {pick(df.cuda)}, Kernel Tuner {pick(df.kernel_tuner_version)}, "
            f"backend {pick(df.backend)}")


def commits(df: pd.DataFrame) -> str:
    """The git commits of the code the rows were measured with, sorted."""
    return values(df.git_commit)
