"""`tuner export`: the best configs per GPU and size as JSON, YAML or a C header of #defines; or one recorded
space, every config, in Kernel Tuner's own files (its cache, or the T4 results file: tuner.store.kt_files)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

from tuner.errors import TunerError
from tuner.formatting import readable

RECORDING_FORMATS = ("t4", "kt-cache")  # one (GPU, size, dtype), every config
FORMATS = ("json", "yaml", "header", *RECORDING_FORMATS)


def _macro(text: str) -> str:
    return re.sub(r"[^A-Z0-9]+", "_", str(text).upper()).strip("_")


def _one_macro_each(workload: str, answers: list[dict]) -> None:
    """Refuse a header in which two names would be one macro (`1k` and `1K` are TUNER_SIZE_1K, parameters
    `a__b` and `a_b` are W_A_B): the preprocessor would take the first #if that matches, or the last #define,
    and give the wrong config without a word. The names are the space's, which may differ in case alone."""
    w = _macro(workload)
    families = (  # what is named, the option that exports one of them alone, its macro
        ("GPUs", "--gpu", "gpu", lambda n: f"TUNER_GPU_{_macro(n)}"),
        ("sizes", "--size", "size", lambda n: f"TUNER_SIZE_{_macro(n)}"),
        ("dtypes", "--dtype", "dtype", lambda n: f"TUNER_DTYPE_{_macro(n)}"),
        ("parameters", None, "config", lambda n: f"{w}_{_macro(n)}"),
    )
    clashes, options = [], []
    for what, option, key, macro in families:
        names = {str(n) for a in answers for n in (a[key] if key == "config" else [a[key]])}
        by_macro: dict[str, list[str]] = {}
        for name in sorted(names):
            by_macro.setdefault(macro(name), []).append(name)
        for m, same in by_macro.items():
            if len(same) > 1:
                clashes.append(
                    f"{what} {' and '.join(map(repr, same))} {'both' if len(same) == 2 else 'all'} become {m}"
                )
                options += [option] if option and option not in options else []
    if clashes:
        alone = f"export them one at a time ({', '.join(options)}) or " if options else ""
        raise TunerError(
            f"cannot write {workload}'s C header: {'; '.join(clashes)} (macros are upper case, with _ for any other "
            f"character); {alone}use --format json or yaml, which keep them apart"
        )


def _measured(answer: dict) -> str:
    """The answer's figures for a header's comment: `time 21.43 ms`, or `GB/s 1234, time 0.5312 ms`."""
    time = f"time {readable(answer['time_ms'])} ms"
    return time if answer["objective"] == "time" else f"{answer['objective']} {readable(answer['value'])}, {time}"


def of_earlier_source(answer: dict) -> bool:
    """Whether `answer` was measured only with an earlier version of its kernel source (`kernel_source.current`
    false: tuner.answers.selection answers from those rows where the source as it is now has none)."""
    return (answer.get("kernel_source") or {}).get("current") is False


def export_notes(answers: list[dict]) -> list[str]:
    """What an export of `answers` should tell its user once, beside the file: how many of its configs were
    measured with an earlier version of the kernel source, and how many were chosen without rows timed under an
    older timing protocol (each answer says so in its own notes)."""
    notes = []
    stale = [a for a in answers if of_earlier_source(a)]
    if stale:
        notes.append(
            f"{len(stale)} of {len(answers)} configs were measured with an earlier version of the kernel source"
            f"{_named(stale)}: tune again to refresh them"
        )
    older = [a for a in answers if (a.get("timing") or {}).get("left_out")]
    if older:
        rows = sum(a["timing"]["left_out"] for a in older)
        notes.append(
            f"{len(older)} of {len(answers)} configs{_named(older)} were chosen leaving out {rows} row(s) of their "
            f"GPU, size and dtype timed under an older protocol, as their times do not compare (each config's notes "
            f"say more; tuner.load_store() keeps every row)"
        )
    return notes


def _named(answers: list[dict]) -> str:
    """A few answers named, so that the user knows which; many are listed by --json."""
    which = [f"{a['gpu']} {a['size']} {a['dtype']}" for a in answers]
    return f" ({', '.join(which)})" if len(answers) <= 3 else ""


def render(workload: str, answers: list[dict], fmt: str, degraded: dict | None = None) -> str:
    """The export; `degraded` (Degraded.as_dict(): what the store left out), where given, is said in it too."""
    doc = {"workload": workload, "configs": answers, **({"degraded": degraded} if degraded else {})}
    if fmt == "json":
        return json.dumps(doc, indent=2) + "\n"
    if fmt == "yaml":
        return yaml.safe_dump(doc, sort_keys=False)
    if fmt == "header":
        text = _header(workload, answers)
        if degraded:
            left = [p["path"] for p in degraded["parts"]] + [r["path"] for r in degraded["rows"]]
            text = f"/* degraded store: left out of {', '.join(sorted(set(left)))} */\n" + text
        return text
    if fmt in RECORDING_FORMATS:
        raise TunerError(f"--format {fmt} exports one recorded space: see recording_text")
    raise TunerError(f"unknown export format '{fmt}'; choose one of {', '.join(FORMATS)}")


def recording_text(
    workload: str, fmt: str, size: str | None, dtype: str | None, gpu: str | None, root: Path | None = None
) -> tuple[str, dict]:
    """One recorded (GPU, size, dtype) with every config as Kernel Tuner's cache (`kt-cache`) or T4 results
    file (`t4`), and what was written (GPU, size, dtype, configs, notes). The GPU and size are chosen as `tuner
    best` chooses them, but only a size that was recorded on that GPU, and only the GPU named where one is; the
    rows are those `tuner best` answers from (the current kernel source's, where it has some; a size whose
    every config failed gives a file of failures)."""
    from tuner.answers.selection import DegradedStoreError, select, stored_evaluations
    from tuner.store.gpu_choice import unknown_gpu
    from tuner.store.kt_files import cache_text, store_cache_doc, t4_results

    if fmt not in RECORDING_FORMATS:
        raise TunerError(f"unknown recording format '{fmt}'; choose one of {', '.join(RECORDING_FORMATS)}")
    stored = stored_evaluations(workload, root)
    sel = select(workload, size, dtype, gpu, root, evaluations=stored)
    if gpu and "other-gpu" in sel.fallback:
        ok = stored[(stored["status"] == "ok") & (stored["dtype"] == sel.dtype)]
        raise unknown_gpu(gpu, ok["gpu"], f"successful {workload} {sel.dtype}")
    if "nearest-size" in sel.fallback:
        refusal = f"{workload}: {sel.size_note}; export a recorded size"
        raise DegradedStoreError(refusal) if sel.may_hold else TunerError(refusal)
    row = sel.rows.iloc[0]
    outside: list[str] = []
    kernel = sel.kernel["hash"] if sel.kernel and sel.kernel["current"] else None
    doc = store_cache_doc(
        workload,
        str(row["size"]),
        sel.dtype,
        str(row["gpu"]),
        root,
        outside=outside,
        kernel_hash=kernel,
        described=True,
    )
    text = cache_text(doc) + "\n" if fmt == "kt-cache" else json.dumps(t4_results(doc), indent=1) + "\n"
    about = {"gpu": doc["device_name"], "size": str(row["size"]), "dtype": sel.dtype, "configs": len(doc["cache"])}
    notes = list(sel.notes)
    if outside:
        notes.append(
            f"{len(outside)} recorded config(s) with parameter values the space no longer lists are left out "
            f"(e.g. {outside[0]})"
        )
    return text, {**about, "notes": notes}


def _header(workload: str, answers: list[dict]) -> str:
    """One guarded block per (GPU, size, dtype): define TUNER_GPU_<gpu>, TUNER_SIZE_<size> and
    TUNER_DTYPE_<dtype> before including, and read <WORKLOAD>_<PARAM>; TUNER_<WORKLOAD>_FOUND says a block matched.
    Names that would be one macro are refused (_one_macro_each)."""
    _one_macro_each(workload, answers)
    w = _macro(workload)
    guard = f"TUNER_{w}_CONFIG_H"
    selections = [
        f" *   {_macro(a['gpu'])} {_macro(a['size'])} {_macro(a['dtype'])}" for a in answers
    ]  # the comment lists them so that a user need not read the blocks to know what to define
    example = answers[0] if answers else None
    lines = [
        f"/* Tuned configurations for {workload}, generated by `tuner export`; do not edit.",
        " *",
        " * Select one GPU, size and dtype before including it, e.g.",
        *(
            [
                f" *   #define TUNER_GPU_{_macro(example['gpu'])}",
                f" *   #define TUNER_SIZE_{_macro(example['size'])}",
                f" *   #define TUNER_DTYPE_{_macro(example['dtype'])}",
            ]
            if example
            else []
        ),
        ' *   #include "<this file>"',
        f" * then read {w}_<PARAMETER>; TUNER_{w}_FOUND is defined where the selection matched one of",
        " * (TUNER_GPU_ TUNER_SIZE_ TUNER_DTYPE_):",
        *selections,
        " * Define TUNER_REQUIRE_CONFIG to make a selection that matches none a compile error.",
        *[f" * Note: {_in_comment(note)}." for note in export_notes(answers)],
        " */",
        f"#ifndef {guard}",
        f"#define {guard}",
        "",
    ]
    first = True
    for a in answers:
        cond = " && ".join(
            [
                f"defined(TUNER_GPU_{_macro(a['gpu'])})",
                f"defined(TUNER_SIZE_{_macro(a['size'])})",
                f"defined(TUNER_DTYPE_{_macro(a['dtype'])})",
            ]
        )
        prov = a.get("provenance", {})
        said = (
            f"{a['gpu']}, {a['size']} {a['dtype']}: {_measured(a)}; "
            f"commit {prov.get('git_commit', '?')}, campaign {prov.get('campaign_id', '?')}"
            + ("; measured with an earlier version of the kernel source" if of_earlier_source(a) else "")
        )
        lines.append(f"/* {_in_comment(said)} */")
        lines.append(f"#{'if' if first else 'elif'} {cond}")
        lines.append(f"#define TUNER_{w}_FOUND 1")
        for k, v in a["config"].items():
            lines.append(f"#define {w}_{_macro(k)} {v}")
        first = False
    if not first:
        lines.append("#endif")
    lines += [
        "",
        f"#if defined(TUNER_REQUIRE_CONFIG) && !defined(TUNER_{w}_FOUND)",
        f'#error "no tuned configuration of {workload} for the selected TUNER_GPU_, TUNER_SIZE_ and TUNER_DTYPE_ '
        'macros (the list at the top of this header)"',
        "#endif",
        "",
        f"#endif /* {guard} */",
        "",
    ]
    return "\n".join(lines)


def _in_comment(text: str) -> str:
    """`text` safe inside a C block comment: a name holding `*/` (a size or GPU name; the schema allows it)
    would end the comment early and leave the rest of the line as code."""
    return text.replace("*/", "* /")
