"""Progress of a campaign on screen: configs done, failures, best so far, time left."""

from __future__ import annotations

import time
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from tuner.formatting import readable


class CampaignProgress:
    def __init__(
        self, title: str, total: int, time_limit: float | None, objective: str, maximize: bool, quiet: bool = False
    ) -> None:
        self.title, self.total, self.time_limit = title, total, time_limit
        self.objective, self.maximize = objective, maximize
        self.done = self.failed = self.resumed = 0
        self.best: float | None = None
        self.failures: dict[str, int] = {}  # failure class -> count
        self.start = time.monotonic()
        self._progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("left"),
            TimeRemainingColumn(),
            TextColumn("{task.fields[status]}"),
            console=Console(stderr=True),
            disable=quiet,
            transient=False,
        )
        self._task = self._progress.add_task(title, total=total, status="")

    def __enter__(self) -> CampaignProgress:
        self._progress.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        return self._progress.__exit__(*exc)

    def advance(self, status: str, value: float | None, fresh: bool) -> None:
        self.done += 1
        self.resumed += not fresh
        if status != "ok":
            self.failed += 1
            self.failures[status] = self.failures.get(status, 0) + 1
        elif value is not None and (self.best is None or (value > self.best if self.maximize else value < self.best)):
            self.best = value
        best = f"best {readable(self.best)} {self.objective}" if self.best is not None else "no valid result yet"
        parts = [best, f"{self.failed} failed"]
        if self.resumed:
            parts.append(f"{self.resumed} resumed")
        if self.time_limit:
            parts.append(f"{max(0, self.time_limit - (time.monotonic() - self.start)):.0f} s of budget left")
        self._progress.update(self._task, advance=1, status=" · ".join(parts))
