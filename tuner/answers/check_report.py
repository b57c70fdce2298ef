"""The reports of `tuner check` (tuner.answers.check): a markdown table, JUnit XML for CI, and JSON."""

from __future__ import annotations

import json
from dataclasses import asdict
from xml.etree import ElementTree as ET

from tuner.answers.check import CheckResult, exit_code


def _fmt(d: dict) -> str:
    if not d:
        return ""
    return f"{d['change']:+.1%} [{d['ci'][0]:+.1%}, {d['ci'][1]:+.1%}]"


def markdown(results: list[CheckResult]) -> str:
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
    return "\n".join(lines) + "\n"


def junit(results: list[CheckResult]) -> str:
    suite = ET.Element(
        "testsuite",
        name="tuner check",
        tests=str(len(results)),
        failures=str(sum(r.verdict in ("regression", "failed") for r in results)),
        errors=str(sum(r.exit_code == 2 for r in results)),
    )
    for r in results:
        case = ET.SubElement(suite, "testcase", classname=f"tuner.{r.workload}", name=f"{r.size}-{r.dtype}")
        text = f"raw {_fmt(r.raw)}; normalised {_fmt(r.normalised)}; {r.reason}"
        if r.verdict in ("regression", "failed"):
            ET.SubElement(case, "failure", message=r.verdict).text = text
        elif r.exit_code == 2:
            ET.SubElement(case, "error", message=r.verdict).text = text
        else:
            ET.SubElement(case, "system-out").text = text
    return ET.tostring(suite, encoding="unicode")


def as_json(results: list[CheckResult]) -> str:
    return json.dumps({"exit_code": exit_code(results), "checks": [asdict(r) for r in results]}, indent=2, default=str)
