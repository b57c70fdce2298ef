"""Kernel Tuner's own files, in and out: its cache (one entry per config, as its runners write it) and the T4
results file (the open autotuning results schema that ships in the kernel_tuner package).

Out: `store_cache_doc` makes the cache of one recorded (GPU, size, dtype) from the store's rows, as Kernel
Tuner writes it (the parameters, `time` and `times`, the compile, verification and benchmark times, the space's
metrics, the timestamp; a failure as its error class), with the store's rule for the figures: a config's `time`
is the median of its launches, the time every answer ranks by, so a plain Kernel Tuner replay of the file picks
what `tuner best` picks. `write_cache` lays it out as Kernel Tuner does; `t4_results` turns a cache into a T4
results document through Kernel Tuner's own writer (kernel_tuner.file_utils.get_t4_results), its metadata saying
what the configs were measured on. An exported cache (`described`) says it in its header too: Kernel Tuner's
readers, and ours, pass over header keys they do not know.

In: `read_recording` reads any complete Kernel Tuner cache (`.json`, `.json.gz`, closed or left open by an
interrupted run) or T4 results file into one `FileRecording`: the parameters, each config's objective value
or failure, and the objective's direction."""

from __future__ import annotations

import gzip
import json
import math
import statistics
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from tuner.atomic import write_text_atomically
from tuner.errors import TunerError
from tuner.store.parts import read_parts
from tuner.store.paths import results_root
from tuner.store.rows import canonical_config, complete_configs, config_medians, without_superseded
from tuner.vocabulary import KT_ERROR_KINDS
from tuner.workloads import get_workload

if TYPE_CHECKING:
    from tuner.space import Space

KT_ERROR_NAMES = ("ErrorConfig", *KT_ERROR_KINDS.values())  # the `__error__`s of Kernel Tuner's failed entries


# ---- out: the store's rows as Kernel Tuner's cache ----------------------------------------------------


def _kt_timestamp(text: str) -> str:
    """The store's ISO timestamp as Kernel Tuner writes it (str of an aware datetime)."""
    try:
        return str(datetime.fromisoformat(text))
    except (TypeError, ValueError):
        return str(text)


def _ms(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else 0.0


def cache_entry(row: dict, keys: list[str], metrics: dict) -> dict:
    """One stored evaluation as Kernel Tuner's runner caches it; `metrics` the space's, of this row."""
    config = json.loads(row["config"])
    entry: dict = {k: config[k] for k in keys}
    if row["status"] == "ok":
        times = [float(t) for t in row["times"]]
        entry.update(time=statistics.median(times), times=times)
    else:
        entry["__error__"] = KT_ERROR_KINDS.get(row["status"], "RuntimeFailedConfig")
    entry.update(
        compile_time=_ms(row.get("compile_ms")),
        verification_time=_ms(row.get("verify_ms")),
        benchmark_time=_ms(row.get("benchmark_ms")),
    )
    if row["status"] == "ok":
        entry.update(metrics)
    entry["timestamp"] = _kt_timestamp(row["timestamp"])
    return entry


def _entry_rows(rows: pd.DataFrame, maximize: bool) -> list[dict]:
    """One row per config: a config that ran, its measurement at its median (the latest of equals, as `tuner
    best` takes it); one that never ran, its latest failure. In the order first measured."""
    ordered = rows.sort_values("timestamp", kind="stable").reset_index(drop=True)
    ok = ordered["status"] == "ok"
    distance = pd.Series(math.inf, index=ordered.index)
    if ok.any():  # else every config failed: no median to be near (and an empty map would not be numeric)
        medians = config_medians(ordered[ok], maximize)
        at_median = ordered.loc[ok, "config"].map(medians).astype(float)
        distance[ok] = (ordered.loc[ok, "objective_value"] - at_median).abs().fillna(math.inf)
    by_config = ordered["config"]
    ran = ok.groupby(by_config).transform("any")
    nearest = distance.groupby(by_config).transform("min")
    candidates = ordered[(ok & (distance == nearest)) | ~ran]
    chosen = candidates.groupby("config", sort=False).tail(1)  # the latest of each config's candidates
    first_seen = {c: i for i, c in enumerate(by_config.drop_duplicates())}
    return chosen.iloc[chosen["config"].map(first_seen).argsort(kind="stable")].to_dict("records")


# What a row says it was measured on and with, by the store's column: the device (`gpu` is the CPU's model for
# host code) and the Python packages, as T4's environment names them (`device_query`, `requirements`)
DEVICE_QUERY = ("gpu", "compute_capability", "driver", "cuda", "backend", "cpu_threads", "cpu_cores", "compiler")
REQUIREMENTS = {"gpu-tuner": "package_version", "kernel_tuner": "kernel_tuner_version", "optuna": "optuna_version"}


def _distinct(rows: pd.DataFrame, column: str) -> list[str]:
    if column not in rows:
        return []
    values = {str(v) for v in rows[column].dropna()}
    return sorted(values - {"", "nan", "None", "<NA>"})


def environment(rows: pd.DataFrame) -> dict:
    """What `rows` were measured on and with, in the terms of T4's metadata schema: `device_query` (the GPU,
    its compute capability, driver, CUDA, backend; a CPU's cores and compiler), each field's value, or its
    values where the rows differ (campaigns on several drivers), and `requirements` (`kernel_tuner==1.5.0`)."""
    query = {}
    for column in DEVICE_QUERY:
        values = _distinct(rows, column)
        if values:  # a GPU has no compiler field, a CPU no driver: left out, not empty
            query[column] = values[0] if len(values) == 1 else values
    requirements = [f"{name}=={v}" for name, column in REQUIREMENTS.items() for v in _distinct(rows, column)]
    return {"device_query": query, "requirements": requirements}


def problem_size(size_vars: dict) -> list | str:
    """The size's variables as Kernel Tuner's problem size (numbers), else "callable" as it writes then."""
    values = list(size_vars.values())
    return values if values and all(isinstance(v, int) for v in values) else "callable"


def recorded_configs(rows: pd.DataFrame, space: Space) -> tuple[list[str], dict[str, tuple[str, dict] | None]]:
    """What store_cache_doc makes of a recording's rows (as without_superseded leaves them), short of its entries:
    the parameters the rows were recorded with (`tune_params_keys`: one the space gained later with a default
    only where some row has it), and each config, completed as complete_configs completes it (the text
    store_cache_doc's entry rows carry), in the order first measured: its key in the cache and its parameters, or
    None where a value is one the space's parameters no longer list (recorded under a wider space: left out).
    Where configs share a key, the cache holds the last. Each distinct config is parsed once, not each row:
    `tuner list` counts every recording from this alone (tuner.store.coverage), without building entries."""
    parsed = {text: json.loads(text) for text in rows.sort_values("timestamp", kind="stable")["config"].unique()}
    present = set().union(*parsed.values())  # the parameters some config has
    keys = [k for k in space.params if k in present]
    configs: dict[str, tuple[str, dict] | None] = {}
    for text, config in parsed.items():
        # complete_configs' rule, on the parsed config (parsing each again through it cost `tuner list` a second);
        # store_cache_doc looks its rows' completed texts up here, so the two cannot drift apart unnoticed
        if space.defaults and any(k not in config for k in space.defaults):
            config = space.complete(config)
            text = canonical_config(config)
        if text not in configs:
            params = {k: config[k] for k in keys}
            kept = all(params[k] in space.params[k] for k in keys)
            configs[text] = (",".join(str(params[k]) for k in keys), params) if kept else None
    return keys, configs


def store_cache_doc(
    workload: str,
    size_name: str,
    dtype: str,
    gpu: str,
    root: Path | None = None,
    rows: pd.DataFrame | None = None,
    outside: list[str] | None = None,
    kernel_hash: str | None = None,
    described: bool = False,
) -> dict:
    """The Kernel Tuner cache of one recorded (GPU, size, dtype), from the store's rows as `tuner best` reads
    them (times taken the current way; every failure). The parameters are those the rows were recorded with
    (a parameter the space gained later with a default is left out where no row has it, as Kernel Tuner
    would have recorded it; where some have it, the others get its default). Configs with a value the space's
    parameters no longer list (recorded under a wider space) are left out, so that every entry is a config of
    the header's `tune_params`; their configs are added to `outside` where given. `kernel_hash`: only the rows
    measured with that kernel source (`tuner export` of a size the current source has rows of, as `tuner best`
    answers from them). `described` (an exported file): the header says also the workload, the size's name, the
    dtype (a cache of int32 and one of float32 are otherwise alike) and the `environment` of its rows; the
    recordings replays derive leave it out, as Kernel Tuner writes them."""
    space = get_workload(workload).space
    raw = read_parts(f"*/{workload}/evaluations/*.parquet", Path(root or results_root())) if rows is None else rows
    if raw.empty:
        raise TunerError(f"nothing stored for {workload}")
    raw = raw[
        (raw["workload"] == workload) & (raw["size"] == size_name) & (raw["dtype"] == dtype) & (raw["gpu"] == gpu)
    ]
    if kernel_hash is not None and "kernel_hash" in raw:
        raw = raw[raw["kernel_hash"] == kernel_hash]
    if raw.empty:
        raise TunerError(f"nothing stored for {workload} {size_name} {dtype} on {gpu}")
    rows_now = without_superseded(raw, space)
    keys, configs = recorded_configs(rows_now, space)
    rows_now = complete_configs(rows_now, space)
    size_vars = json.loads(rows_now["size_vars"].iloc[-1])
    size_vars = {k: size_vars[k] for k in space.sizes.get(size_name, size_vars) if k in size_vars} or size_vars
    cache = {}
    for row in _entry_rows(rows_now, space.maximize):  # one row per config
        kept = configs[row["config"]]
        if kept is None:  # recorded under a wider space
            if outside is not None:
                outside.append(row["config"])
            continue
        metrics = json.loads(row["metrics"]) if row["status"] == "ok" and row.get("metrics") else {}
        cache[kept[0]] = cache_entry(row, keys, {k: metrics[k] for k in space.metrics if k in metrics})
    if not cache:
        raise TunerError(
            f"no config stored for {workload} {size_name} {dtype} on {gpu} lies within the space's parameters"
        )
    header = {
        "device_name": gpu,
        "kernel_name": space.kernel_name,
        "problem_size": problem_size(size_vars),
        "tune_params_keys": keys,
        "tune_params": {k: list(space.params[k]) for k in keys},
        "objective": [space.objective],
    }
    if described:
        header.update(workload=workload, size=size_name, dtype=dtype, environment=environment(rows_now))
    return {**header, "cache": cache}


def cache_text(doc: dict) -> str:
    """Kernel Tuner's layout: the header, then one entry a line, closed (as its close_cache leaves it)."""
    from kernel_tuner import util  # imported here: `tuner list` imports this module, not Kernel Tuner (0.1 s)

    header = {k: v for k, v in doc.items() if k != "cache"}  # the cache last, whatever the order given
    text = json.dumps({**header, "cache": {}}, cls=util.NpEncoder, indent="")[:-3]
    text += "".join("\n" + json.dumps({k: v}, cls=util.NpEncoder)[1:-1] + "," for k, v in doc["cache"].items())
    return text[:-1] + "}\n}" if doc["cache"] else text + "}\n}"


def write_cache(path: Path, doc: dict) -> None:
    """Write a cache document whole (gzip-compressed where the name ends in .gz)."""
    write_text_atomically(path, cache_text(doc))


def t4_metadata(doc: dict) -> dict:
    """What a T4 results file says beside its results, from a cache document: the device (`device`, which
    read_recording reads back), kernel and problem size of every cache's header; the workload, size and dtype
    of a `described` one; and `hardware` and `environment` as T4's metadata schema lays them out."""
    meta = {"device": doc["device_name"], "kernel": doc["kernel_name"], "problem_size": doc["problem_size"]}
    meta.update({k: doc[k] for k in ("workload", "size", "dtype") if k in doc})
    # lshw's words for a device (T4's hardware_description is "e.g. lshw on Linux"); the OS was not recorded
    meta["hardware"] = {"hardware_description": [{"product": doc["device_name"]}]}
    if "environment" in doc:
        meta["environment"] = doc["environment"]
    return meta


def t4_results(doc: dict) -> dict:
    """A cache document as Kernel Tuner's T4 results file, written by Kernel Tuner's own get_t4_results, with
    the metadata of t4_metadata beside its time unit."""
    from kernel_tuner import util
    from kernel_tuner.file_utils import get_t4_results

    errors = {name: getattr(util, name)() for name in KT_ERROR_NAMES}
    results = []
    for entry in doc["cache"].values():
        result = {**entry, "framework_time": 0.0, "strategy_time": 0.0}
        if isinstance(entry.get("__error__"), str):
            result["__error__"] = errors.get(entry["__error__"], util.RuntimeFailedConfig())
        results.append(result)
    out = get_t4_results(results, doc["tune_params"], objective=doc["objective"][0])
    for result in out["results"]:  # the failure itself is the T4 result's invalidity, not a measurement
        result["measurements"] = [m for m in result["measurements"] if m["name"] != "__error__"]
    out["metadata"] = {**out.get("metadata", {}), **t4_metadata(doc)}
    return json.loads(json.dumps(out, cls=util.NpEncoder))


# ---- in: any Kernel Tuner cache or T4 results file as a recorded space ---------------------------------


@dataclass(frozen=True)
class FileRecording:
    """A recorded space read from a Kernel Tuner file: its parameters, and per config (values in parameter
    order) the objective value, or None where it failed."""

    path: Path
    kernel: str
    device: str
    tune_params: dict
    objective: str
    maximize: bool
    configs: dict  # tuple of values -> float | None

    @property
    def values(self) -> list[float]:
        return [v for v in self.configs.values() if v is not None]


def _open_text(path: Path) -> str:
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise TunerError(f"{path}: cannot read it ({e.strerror})") from None
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as e:
            raise TunerError(f"{path}: not a readable gzip file ({e})") from None
    return data.decode("utf-8", errors="replace").strip()


def closed_cache_text(text: str) -> str:
    """A Kernel Tuner cache's text, closed where a run left it open for appending (Kernel Tuner appends each
    entry and closes the document at the end; an interrupted run, or a campaign still going, leaves it open)."""
    text = text.strip()
    if text and text[-3:] not in ("}\n}", "}}}") and '"cache"' in text:
        text = text.rstrip(",") + "}\n}"
    return text


def _parse(path: Path) -> dict:
    text = closed_cache_text(_open_text(path))
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise TunerError(f"{path}: not a Kernel Tuner cache or T4 results file (invalid JSON: {e})") from None
    if not isinstance(doc, dict):
        raise TunerError(f"{path}: not a Kernel Tuner cache or T4 results file")
    return doc


def direction_of(objective: str, direction: str | None) -> bool:
    """Whether `objective` is maximised: as given, else time minimised and a rate ("/s") maximised."""
    if direction is not None:
        if direction not in ("maximize", "minimize"):
            raise TunerError(f"unknown direction '{direction}': maximize or minimize")
        return direction == "maximize"
    if objective == "time" or objective.endswith("_time"):
        return False
    if "/s" in objective or "/W" in objective:
        return True
    raise TunerError(f"cannot tell whether '{objective}' is maximised or minimised: give --direction")


def _value(entry: dict, objective: str) -> float | None:
    if "__error__" in entry or any(isinstance(v, str) and v in KT_ERROR_NAMES for v in entry.values()):
        return None
    value = entry.get(objective)
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None


def _from_cache(path: Path, doc: dict, objective: str | None) -> tuple[str, str, dict, str, dict]:
    try:
        keys, tune_params, cache = doc["tune_params_keys"], doc["tune_params"], doc["cache"]
    except KeyError as e:
        raise TunerError(f"{path}: a Kernel Tuner cache without {e}") from None
    objective = objective or (doc.get("objective") or ["time"])[0]
    configs = {}
    for key, entry in cache.items():
        if not all(k in entry for k in keys):
            raise TunerError(f"{path}: entry {key} lacks parameters of {keys}")
        configs[tuple(entry[k] for k in keys)] = _value(entry, objective)
    return doc.get("kernel_name", ""), doc.get("device_name", ""), {k: tune_params[k] for k in keys}, objective, configs


def _from_t4(path: Path, doc: dict, objective: str | None) -> tuple[str, str, dict, str, dict]:
    results = doc["results"]
    if not results:
        raise TunerError(f"{path}: a T4 results file without results")
    names = list(results[0]["configuration"])
    objective = objective or (results[0].get("objectives") or ["time"])[0]
    configs = {}
    for r in results:
        config = tuple(r["configuration"].get(k) for k in names)
        measured = {m["name"]: m["value"] for m in r.get("measurements", []) if "name" in m}
        ok = r.get("invalidity", "correct") == "correct"
        configs[config] = _value(measured, objective) if ok else None
    # T4 keeps no parameter list: each parameter's values as the results hold them, sorted where they compare
    tune_params = {}
    for i, k in enumerate(names):
        seen = list(dict.fromkeys(c[i] for c in configs))
        try:
            tune_params[k] = sorted(seen)
        except TypeError:
            tune_params[k] = seen
    return "", doc.get("metadata", {}).get("device", ""), tune_params, objective, configs


def read_recording(path: Path, objective: str | None = None, direction: str | None = None) -> FileRecording:
    """A Kernel Tuner cache (`.json` or `.json.gz`) or T4 results file as a recorded space. Its objective is
    the file's (the cache header's, the T4 results' `objectives`) unless `objective` names another column."""
    path = Path(path)
    doc = _parse(path)
    if "cache" in doc:
        kernel, device, tune_params, objective, configs = _from_cache(path, doc, objective)
    elif isinstance(doc.get("results"), list):
        try:
            kernel, device, tune_params, objective, configs = _from_t4(path, doc, objective)
        except (KeyError, TypeError, AttributeError) as e:
            raise TunerError(f"{path}: not a T4 results file ({type(e).__name__}: {e})") from None
    else:
        raise TunerError(f"{path}: neither a Kernel Tuner cache (no 'cache') nor a T4 results file (no 'results')")
    rec = FileRecording(path, kernel, device, tune_params, objective, direction_of(objective, direction), configs)
    if len(set(rec.values)) < 2:
        raise TunerError(f"{path}: fewer than two configurations have a value for '{objective}'; nothing to compare")
    return rec
