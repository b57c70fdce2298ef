"""The reports of `tuner check` (tuner.answers.check): a markdown table, JUnit XML for CI, and JSON.

Each says, besides the verdicts, what the gate could not see: the store's parts (or rows) left out by a damaged
store (`degraded`, as tuner.store.schema.Degraded.as_dict() gives it: a baseline part left out is kernels not
checked, exit 3 unless allowed), notes on baselines not checked (those of other GPUs), whose baselines were
checked (`baselines`: "project", or "shipped", the demo of those shipped with the built-in workloads), and, where
the check could not run at all (exit 2), the error, so that a CI step that publishes the reports always finds
them. JSON is strict: a number that is not finite is written null, never NaN (which JSON.parse refuses)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict
from xml.etree import ElementTree as ET

from tuner.answers.check_result import PROJECT, SHIPPED, CheckResult, exit_code
from tuner.json_text import strict_json
from tuner.store.schema import Degraded


def _fmt(d: dict) -> str:
    if not d:
        return ""
    numbers = (d["change"], *d["ci"])
    if not all(isinstance(x, (int, float)) and math.isfinite(x) for x in numbers):
        return "n/a"
    return f"{d['change']:+.1%} [{d['ci'][0]:+.1%}, {d['ci'][1]:+.1%}]"


def case_name(r: CheckResult) -> str:
    """A JUnit test case's name: the kernel's size and dtype, or, for a result of a whole workload (one named
    without a baseline), what it is about."""
    return f"{r.size}-{r.dtype}" if r.size or r.dtype else f"{r.workload} (every size)"


def _preamble(notes: Sequence[str], baselines: str) -> list[str]:
    """The lines a report opens with: a demo says whose baselines these are, then each note."""
    lines = ["**demo**: the baselines checked are those shipped with the built-in workloads, not this project's"]
    return (lines if baselines == SHIPPED else []) + [f"**note**: {n}" for n in notes]


def left_out(degraded: dict | None) -> list[tuple[str, str]]:
    """(path, what was left out of it) for each part of a degraded read (Degraded.reasons)."""
    return sorted(Degraded.from_dict(degraded).reasons().items())


def degraded_line(degraded: dict | None, allowed: bool = False) -> str:
    """One line saying the gate is degraded and naming what could not be read ("" where nothing was)."""
    parts = left_out(degraded)
    if not parts:
        return ""
    named = "; ".join(f"`{path}` ({why})" for path, why in parts)
    verdict = "allowed by --allow-degraded" if allowed else "exit 3, unless --allow-degraded"
    return (
        f"**degraded**: the store could not be read in full, and what it left out is not checked (a baseline part "
        f"left out is kernels not checked; {verdict}): {named}"
    )


def markdown(
    results: list[CheckResult],
    *,
    degraded: dict | None = None,
    allowed: bool = False,
    error: str | None = None,
    notes: Sequence[str] = (),
    baselines: str = PROJECT,
) -> str:
    """The table of verdicts, then a line for each note and for what the store left out; where the check could
    not run (`error`), that line alone (and what the store left out)."""
    if error is not None:
        return f"**error**: the check could not run (exit 2): {error}\n" + (
            f"\n{degraded_line(degraded, allowed)}\n" if left_out(degraded) else ""
        )
    lines = [
        "| kernel | size | dtype | verdict | baseline ms | now ms | raw change [99% CI] | "
        "normalised change [99% CI] | reference | flagged above | note |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        floor = f"{r.noise_floor:.1%}" if r.noise_floor is not None else ""
        lines.append(
            f"| {r.workload} | {r.size} | {r.dtype} | **{r.verdict}** | {r.baseline_ms or '':.6} | "
            f"{r.now_ms or '':.6} | {_fmt(r.raw)} | {_fmt(r.normalised)} | {r.reference} | {floor} | {r.reason} |"
        )
    for line in _preamble(notes, baselines):  # a paragraph each
        lines += ["", line]
    if left_out(degraded):
        lines += ["", degraded_line(degraded, allowed)]
    return "\n".join(lines) + "\n"


def junit(
    results: list[CheckResult],
    *,
    degraded: dict | None = None,
    allowed: bool = False,
    error: str | None = None,
    notes: Sequence[str] = (),
    baselines: str = PROJECT,
) -> str:
    """A testsuite of one testcase per kernel checked; each part the store left out is a testcase with an
    error element (skipped where --allow-degraded allowed it), and a check that could not run one testcase with
    its error. Whose baselines were checked is a property of the suite (`baselines`), the notes its system-out."""
    parts = left_out(degraded)
    errors = sum(r.exit_code == 2 for r in results) + (0 if allowed else len(parts)) + (error is not None)
    suite = ET.Element(
        "testsuite",
        name="tuner check",
        tests=str(len(results) + len(parts) + (error is not None)),
        failures=str(sum(r.verdict in ("regression", "failed") for r in results)),
        errors=str(errors),
        skipped=str(len(parts) if allowed else 0),
    )
    properties = ET.SubElement(suite, "properties")
    ET.SubElement(properties, "property", name="baselines", value=baselines)
    if error is not None:
        case = ET.SubElement(suite, "testcase", classname="tuner.check", name="check")
        ET.SubElement(case, "error", message="the check could not run").text = error
    for r in results:
        case = ET.SubElement(suite, "testcase", classname=f"tuner.{r.workload}", name=case_name(r))
        text = f"raw {_fmt(r.raw)}; normalised {_fmt(r.normalised)}; {r.reason}"
        if r.verdict in ("regression", "failed"):
            ET.SubElement(case, "failure", message=r.verdict).text = text
        elif r.exit_code == 2:
            ET.SubElement(case, "error", message=r.verdict).text = text
        else:
            ET.SubElement(case, "system-out").text = text
    for path, why in parts:
        case = ET.SubElement(suite, "testcase", classname="tuner.store", name=path)
        said = f"{path}: {why}; left out of the check (a baseline part left out is kernels not checked)"
        ET.SubElement(case, "skipped" if allowed else "error", message="degraded store: left out").text = said
    preamble = _preamble(notes, baselines)
    if preamble:
        ET.SubElement(suite, "system-out").text = "\n".join(preamble)
    return ET.tostring(suite, encoding="unicode")


def as_json(
    results: list[CheckResult],
    *,
    code: int | None = None,
    degraded: dict | None = None,
    notes: Sequence[str] = (),
    baselines: str = PROJECT,
    error: str | None = None,
) -> str:
    """{"exit_code": the process's (the verdicts', else `code`), "baselines": whose were checked ("project", or
    "shipped": the demo of those shipped with the built-in workloads), "checks": [...], "notes": [...], "degraded":
    what the store left out, where it did, "error": why the check could not run, where it could not}, strict JSON."""
    doc: dict = {
        "exit_code": exit_code(results) if code is None else code,
        "baselines": baselines,
        "checks": [asdict(r) for r in results],
        "notes": list(notes),
    }
    if left_out(degraded):
        doc["degraded"] = degraded
    if error is not None:
        doc["error"] = error
    return strict_json(doc)
