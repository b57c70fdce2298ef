"""Progress of a campaign on screen: configs done, failures, best so far, time left; a replay's too (its
runner, Kernel Tuner's simulation runner, has no callback per row: `counted` counts what it serves)."""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from rich.cells import cell_len
from rich.console import Console, RenderableType
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Column, Table
from rich.text import Text

from tuner.formatting import readable


class _BarThenStatus(Progress):
    """The campaign's title and its bar on one line where they fit (else the title on a line of its own), and
    the status (best so far, failures, budget left) on the next: nothing cut short at 80 columns."""

    def get_renderables(self) -> Iterable[RenderableType]:
        table = self.make_tasks_table(self.tasks)
        for task in self.tasks:
            title = Text(task.description, overflow="fold")
            if cell_len(task.description) + 1 + self.console.measure(table).maximum <= self.console.width:
                line = Table.grid(padding=(0, 1))
                line.add_row(title, table)
                yield line
            else:
                yield title
                yield table
            if task.fields.get("status"):
                yield Text("  " + task.fields["status"], overflow="fold")


class CampaignProgress:
    """The bar of a campaign (on stderr): `advance` once per config evaluated, as its row comes back."""

    def __init__(
        self, title: str, total: int, time_limit: float | None, objective: str, maximize: bool, quiet: bool = False
    ) -> None:
        self.title, self.total, self.time_limit = title, total, time_limit
        self.objective, self.maximize = objective, maximize
        self.done = self.failed = self.resumed = 0
        self.best: float | None = None
        self.failures: dict[str, int] = {}  # failure class -> count
        self.start = time.monotonic()
        self._progress = _BarThenStatus(
            BarColumn(bar_width=20),
            MofNCompleteColumn(table_column=Column(no_wrap=True)),
            TimeElapsedColumn(table_column=Column(no_wrap=True)),
            TextColumn("left", table_column=Column(no_wrap=True)),
            TimeRemainingColumn(table_column=Column(no_wrap=True)),
            console=Console(stderr=True),
            disable=quiet,
            transient=False,
        )
        self._task = self._progress.add_task(title, total=total, status="")  # shown as Text: "[tpe]" is no markup

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

    def set_total(self, total: int) -> None:
        """The configs the campaign can evaluate, once known (a replay: those its recording holds)."""
        self.total = total
        self._progress.update(self._task, total=total)


def counted(strategy: Any, progress: CampaignProgress, objective: str) -> Any:
    """`strategy` with each config its runner serves for the first time advancing `progress`, as a live
    campaign's rows do: for a replay, whose runner (Kernel Tuner's simulation runner) has no row callback."""
    return _Counted(strategy, progress, objective)


class _Counted:
    def __init__(self, strategy: Any, progress: CampaignProgress, objective: str) -> None:
        self._strategy, self._progress, self._objective = strategy, progress, objective

    def __getattr__(self, name: str) -> Any:  # stop_reason and the rest: the strategy's own
        return getattr(self._strategy, name)

    def tune(self, searchspace: Any, runner: Any, tuning_options: Any) -> list:
        self._progress.set_total(min(self._progress.total, searchspace.size))
        serve, seen = runner.run, set()

        def run(configs: list, options: Any) -> list:
            results = serve(configs, options)
            for config, result in zip(configs, results, strict=False):
                key = tuple(config)
                if result is None or key in seen:  # past the budget, or served again: not a new evaluation
                    continue
                seen.add(key)
                error = result.get("__error__")
                value = result.get(self._objective) if error is None else None
                status = "ok" if error is None else type(error).__name__
                self._progress.advance(status, value if isinstance(value, (int, float)) else None, fresh=True)
            return results

        runner.run = run  # on this runner object only, for this search
        try:
            with self._progress:
                return self._strategy.tune(searchspace, runner, tuning_options)
        finally:
            del runner.run
