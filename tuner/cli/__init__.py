"""`tuner`: one command, one thin subcommand per task."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from tuner.errors import TunerError
from tuner.formatting import config_text, readable

console = Console()


def _list(args) -> int:
    from tuner.measure import kt
    from tuner.workloads import all_workloads

    docs = []
    for w in all_workloads():
        s = w.space
        docs.append({"workload": w.name, "kernel": s.kernel_name, "source": str(s.kernel_source.relative_to(s.path.parent.parent)),
                     "space": str(s.path.relative_to(s.path.parent.parent)), "parameters": s.params,
                     "configurations": kt.searchspace(s).size, "sizes": s.sizes, "default_size": s.default_size,
                     "dtypes": list(s.dtypes), "objective": {"metric": s.objective, "maximize": s.maximize}})
    if args.json:
        print(json.dumps(docs, indent=2))
        return 0
    table = Table(title="workloads")
    for col in ("workload", "kernel", "space", "valid configs", "sizes", "dtypes", "objective"):
        table.add_column(col)
    for d in docs:
        names = list(d["sizes"])  # the variables of each: `tuner list --json`
        sizes = ", ".join(names[:6]) + (f" and {len(names) - 6} more" if len(names) > 6 else "")
        table.add_row(d["workload"], f"{d['kernel']} ({d['source']})", d["space"], str(d["configurations"]), sizes,
                      ", ".join(d["dtypes"]), f"{d['objective']['metric']} ({'max' if d['objective']['maximize'] else 'min'})")
    console.print(table)
    return 0


def _tune(args) -> int:
    from tuner.campaign.local import run_campaign
    from tuner.campaign.request import CampaignRequest, parse_budget

    max_evals, time_limit = parse_budget(args.budget)
    req = CampaignRequest(workload=args.workload, size=_size_text(args), dtype=args.dtype, strategy=args.strategy,
                          max_evals=max_evals, time_limit=time_limit, backend=args.backend, device=args.device,
                          seed=args.seed, timeout=args.timeout, storage=args.storage, results=args.results,
                          simulate=args.simulate, gpu=args.gpu, quiet=args.quiet, warm_start=not args.no_warm_start,
                          patience=args.patience)
    if args.workers is not None:
        from tuner.campaign.distributed import run_distributed

        try:
            devices = [int(d) for d in args.devices.split(",")] if args.devices else None
        except ValueError:
            raise TunerError(f"--devices '{args.devices}': give GPU ordinals, comma-separated (0,1)") from None
        result = run_distributed(req, args.workers, devices=devices, name=args.campaign, url=args.storage,
                                 allow_mixed_gpus=args.allow_mixed_gpus, worker_target=args.worker_target,
                                 log=lambda msg: print(msg, file=sys.stderr, flush=True))
    else:
        result = run_campaign(req)
    if args.json:
        print(json.dumps(result.__dict__, indent=2, default=str))
        return 0 if result.best else 1  # as without --json: no configuration ran successfully
    resumed = result.evaluated - result.measured
    done = ("replayed from the recording (simulation, no GPU)" if result.simulated
            else f"{result.measured} newly measured" + (f", {resumed} resumed from the store" if resumed > 0 else ""))
    console.print(f"[bold]{result.workload}[/] {result.size} {result.dtype} on {result.gpu} with {result.strategy}: "
                  f"{result.evaluated} configs evaluated; {done}")
    if result.failures:
        console.print("failures: " + ", ".join(f"{k} {v}" for k, v in result.failures.items()))
    if result.best:
        b = result.best
        console.print(f"best: {config_text(b['config'])}  {readable(b['value'])} {b['objective']}  ({readable(b['time_ms'])} ms)",
                      highlight=False)
    else:
        console.print("[red]no configuration ran successfully[/]")
        return 1
    for name, ms in result.baselines.items():
        console.print(f"baseline {name}: {readable(ms)} ms", highlight=False)
    return 0


def _size_text(args) -> str | None:
    """--matrix FILE (spmv) is the size `mtx:FILE`: the workload reads the Matrix Market file."""
    if not getattr(args, "matrix", None):
        return args.size
    if args.workload != "spmv" or args.size:
        raise TunerError("--matrix is for the spmv workload, instead of --size")
    return f"mtx:{args.matrix}"


def _worker(args) -> int:
    launched = None
    if args.launch:  # before the heavy imports below, which the measuring process's set-up then overlaps
        from tuner.measure.runner import IsolatedRunner

        launched = IsolatedRunner.for_campaign(device=args.device, **json.loads(args.launch)).launch()
    from tuner.campaign.distributed import run_worker

    log = (lambda msg: None) if args.quiet else (lambda msg: print(msg, flush=True))
    try:
        summary = run_worker(args.campaign, _storage(args), args.device, results=args.results,
                             allow_mixed_gpus=args.allow_mixed_gpus, worker_target=args.worker_target,
                             launched=launched, log=log)
    finally:
        if launched is not None:
            launched.shutdown()  # if it was not used (run_worker shuts down what it uses)
    back = summary.get("handed_back", 0)
    console.print(f"worker {summary['worker']} ({summary['gpu']}): {summary['measured']} measured, "
                  f"{summary['served']} served from the store, {summary['trials']} trials"
                  + (f" ({back} told at once: another trial's config, invalid, or left over when the queue ran out)"
                     if back else ""), highlight=False)
    return 0


def _storage(args) -> str:
    """--storage, else the SQLite file beside the results that `tune --workers` uses by default."""
    from tuner.campaign.storage import default_storage, sqlite_path
    from tuner.store import results_root

    if args.storage:
        return args.storage
    url = default_storage(args.results or results_root())
    if not Path(sqlite_path(url)).is_file():
        raise TunerError(f"no campaign database at {url} (`tuner tune ... --workers N` creates it; --storage URL for another)")
    return url


def _status(args) -> int:
    from tuner.campaign.distributed import (
        campaign_names,
        campaign_status,
        format_status,
        format_summary,
    )

    url = _storage(args)
    names = [args.campaign] if args.campaign else campaign_names(url)
    statuses = [campaign_status(name, url) for name in names]
    if args.json:
        print(json.dumps(statuses[0] if args.campaign else statuses, indent=2, default=str))
    elif args.campaign:
        print(format_status(statuses[0]))  # plain: rich would wrap its lines
    else:
        print("\n".join(map(format_summary, statuses)) if statuses else f"no campaigns in {url}")
    return 0


def _best(args) -> int:
    from tuner.answers.best_config import best

    answer = best(args.workload, _size_text(args), args.dtype, gpu=args.gpu, root=args.results)
    if args.json:
        print(json.dumps(answer, indent=2, default=str))
        return 0
    for note in answer["notes"]:
        console.print(f"[yellow]note:[/] {escape(note)}")
    console.print(f"[bold]{answer['workload']}[/] {answer['size']} {answer['dtype']} on {answer['gpu']}"
                  f" (answer: {answer['fallback']})")
    console.print("config: " + config_text(answer["config"]), highlight=False)
    console.print(f"{answer['objective']}: {readable(answer['value'])}   time: {readable(answer['time_ms'])} ms"
                  f"   (median of {answer['measurements']} measurement(s))")
    for name, b in answer["baselines"].items():
        ratios = ", ".join(f"{m} {r:.3f}x" for m, r in b["ratio"].items())
        console.print(f"vs {name}: {ratios}  ({name}: {b['time_ms']:.4g} ms)")
    p = answer["provenance"]
    console.print(f"measured with {p.get('backend')} on driver {p.get('driver')}, CUDA {p.get('cuda')}, "
                  f"commit {p.get('git_commit')}, campaign {p.get('campaign_id')}")
    return 0


def _results(args) -> int:
    from tuner.answers.best_config import select
    from tuner.answers.tables import (
        by_parameters,
        config_table,
        objective_column,
        render,
    )

    if args.top < 1:
        raise TunerError(f"--top {args.top}: show at least 1 config (--all for every one)")
    sel = select(args.workload, _size_text(args), args.dtype, gpu=args.gpu, root=args.results)
    space = sel.workload.space
    table = config_table(sel)
    shown = by_parameters(table, args.by, objective_column(space), space.maximize) if args.by else table
    grid = len(args.by or []) == 2  # its rows are named by the first parameter's values
    if args.csv:
        _write(args.csv, shown.to_csv(index=grid))
    if args.json:
        doc = shown.reset_index() if grid else shown
        print(json.dumps(json.loads(doc.to_json(orient="records")), indent=2))  # NaN -> null, numpy -> JSON
        return 0
    for note in sel.notes:
        console.print(f"[yellow]note:[/] {escape(note)}")
    heading, out = render(sel, table, shown, args.by, None if args.all else args.top)
    console.print(heading, highlight=False)
    _print_table(out)
    if args.csv:
        console.print(f"wrote {len(shown)} row(s) to {args.csv}", highlight=False)
    return 0


def _write(path: str, text: str) -> None:
    try:
        Path(path).write_text(text)
    except OSError as e:
        raise TunerError(f"cannot write {path}: {e.strerror}") from None


def _print_table(table: Table) -> None:
    """At its natural width: squeezed into a narrow terminal (or rich's 80 columns for a pipe), a table of
    many parameters would show each header as a letter and an ellipsis."""
    width = max(console.width, console.measure(table, options=console.options.update_width(1000)).maximum)
    (Console(width=width, highlight=False) if width > console.width else console).print(table)


def _export(args) -> int:
    from tuner.answers.best_config import best_per_gpu_and_size
    from tuner.answers.export import render

    answers = best_per_gpu_and_size(args.workload, args.dtype, root=args.results)
    text = render(args.workload, answers, args.format)
    if args.output:
        _write(args.output, text)
        console.print(f"wrote {len(answers)} configuration(s) to {args.output}", highlight=False)
    else:
        sys.stdout.write(text)
    return 0


def _baseline(args) -> int:
    from tuner.answers.check import BASELINE_SESSIONS, take_baseline

    rows = take_baseline(args.workloads, args.size, args.dtype, rounds=args.rounds,
                         sessions_per_baseline=args.sessions or BASELINE_SESSIONS, backend=args.backend,
                         device=args.device, root=args.results, log=console.print)
    console.print(f"{len(rows)} baseline(s) recorded")
    return 0 if rows else 2


def _check(args) -> int:
    from tuner.answers import check

    plant = dict(_parse_assignment(a) for a in args.plant) if args.plant else None
    for path in filter(None, (args.junit, args.markdown)):  # found out now, not after minutes of measuring
        folder = Path(path).resolve().parent
        if not folder.is_dir():
            raise TunerError(f"cannot write {path}: no folder {folder}")
    results = check.run_check(args.workloads or None, rounds=args.rounds, threshold=args.threshold,
                              allow_different=args.allow_different, backend=args.backend, device=args.device,
                              root=args.results, plant=plant, retune=args.retune,
                              log=Console(stderr=True).print if args.json else console.print)  # stdout: the JSON
    if args.json:
        print(check.as_json(results))
    else:
        console.print(check.markdown(results), highlight=False)
    if args.junit:
        _write(args.junit, check.junit(results))
    if args.markdown:
        _write(args.markdown, check.markdown(results))
    return check.exit_code(results)


def _run(args) -> int:
    from tuner.answers.best_config import run_config
    from tuner.workloads import get_workload

    given = dict(_parse_assignment(a) for a in args.config) if args.config else None

    def config_for(size: dict, dtype: str) -> dict:
        return run_config(args.workload, size, dtype, given, gpu=args.gpu, log=lambda m: print(m, file=sys.stderr))

    return get_workload(args.workload).run(args, config_for)


def _parse_assignment(text: str):
    key, _, value = text.partition("=")
    if not value:
        raise TunerError(f"expected NAME=VALUE, got '{text}'")
    try:
        return key, json.loads(value)
    except json.JSONDecodeError:
        return key, value


def build_parser(run_programs: bool = True) -> argparse.ArgumentParser:
    """The CLI; `run_programs`: with each workload's `tuner run` program, which imports every workload (half a
    second of each worker's start on the H100 machine, spent only when the command may be `run`)."""
    from tuner.answers import compare
    from tuner.answers.export import FORMATS
    from tuner.measure.kt import BACKENDS
    from tuner.search.strategies import DEFAULT_PATIENCE, DEFAULT_STRATEGY

    p = argparse.ArgumentParser(prog="tuner", description="Tune CUDA kernels, query and export the best configs.")
    p.add_argument("--results", type=Path, default=None, help="results directory (default: ./results of the project)")
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser("list", help="workloads, their kernels, spaces and problem sizes")
    s.add_argument("--json", action="store_true", help="one JSON document for scripts")
    s.set_defaults(func=_list)

    s = sub.add_parser("tune", help="run a tuning campaign (or replay one with --simulate)")
    s.add_argument("workload")
    s.add_argument("--size", help="a named size of the space, or k=v,... (default: the space's default size)")
    s.add_argument("--matrix", help="spmv: a Matrix Market file (.mtx) as the problem")
    s.add_argument("--dtype", help="element type (default: the space's first)")
    s.add_argument("--strategy", default=DEFAULT_STRATEGY,
                   help="tpe (default), cmaes, gp, random, qmc, brute_force, or kt:<Kernel Tuner strategy>")
    s.add_argument("--budget", help="evaluations (150) or a duration (90s, 10m, 2h); default: 100, the whole space for brute_force")
    s.add_argument("--backend", default="nvcuda", choices=sorted(BACKENDS))
    s.add_argument("--device", type=int, default=0, help="CUDA device ordinal")
    s.add_argument("--seed", type=int, default=1)
    s.add_argument("--patience", type=int, default=None,
                   help=f"Optuna strategies stop after this many evaluations without a 0.5%% gain (default: {DEFAULT_PATIENCE} "
                        "without --budget, never with one; 0: never)")
    s.add_argument("--no-warm-start", action="store_true",
                   help="Optuna strategies start from scratch, not from the best configs stored for other sizes")
    s.add_argument("--timeout", type=float, default=60.0, help="seconds one configuration may take before it is killed")
    s.add_argument("--storage", help="Optuna storage URL (default: SQLite beside the results)")
    s.add_argument("--simulate", action="store_true", help="replay from results/ in Kernel Tuner's simulation mode (no GPU)")
    s.add_argument("--gpu", help="with --simulate: which recorded GPU to replay")
    s.add_argument("--quiet", action="store_true", help="no progress bar")
    s.add_argument("--json", action="store_true")
    s.add_argument("--workers", type=int, metavar="N",
                   help="spread the campaign over N worker processes here, one per GPU; 0: only create it for "
                        "`tuner worker` elsewhere (see README: Distributed campaigns)")
    s.add_argument("--devices", help="with --workers: the GPUs' ordinals, comma-separated (default: --device, --device+1, ...)")
    s.add_argument("--campaign", help="with --workers: the campaign's name (default: workload-size-dtype-strategy-seed)")
    s.add_argument("--allow-mixed-gpus", action="store_true", help="with --workers: let workers on other GPU models join")
    s.add_argument("--worker-target", help=argparse.SUPPRESS)  # tests: a GPU-free worker process, module:function
    s.set_defaults(func=_tune)

    s = sub.add_parser("worker", help="join a distributed campaign with one GPU of this host")
    s.add_argument("campaign")
    s.add_argument("--storage", help="the campaign's Optuna storage URL (sqlite:///..., postgresql://...; default: the "
                   "SQLite file beside the results)")
    s.add_argument("--device", type=int, default=0, help="CUDA device ordinal")
    s.add_argument("--allow-mixed-gpus", action="store_true", help="join even if the campaign runs on another GPU model")
    s.add_argument("--quiet", action="store_true", help="no line per evaluation")
    s.add_argument("--worker-target", help=argparse.SUPPRESS)
    s.add_argument("--launch", help=argparse.SUPPRESS)  # JSON: the measuring process to launch at once (run_distributed)
    s.set_defaults(func=_worker)

    s = sub.add_parser("status", help="progress of a distributed campaign: done, running, failed, best so far "
                       "(without a name: a line for each campaign in the storage)")
    s.add_argument("campaign", nargs="?")
    s.add_argument("--storage", help="the campaigns' Optuna storage URL (default: the SQLite file beside the results)")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=_status)

    s = sub.add_parser("best", help="best stored config for a GPU, size and dtype")
    s.add_argument("workload")
    s.add_argument("--size")
    s.add_argument("--matrix", help="spmv: a Matrix Market file; never tuned, it gets the config of the nearest matrix by features")
    s.add_argument("--dtype")
    s.add_argument("--gpu", help="GPU name as stored (default: this machine's GPU)")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=_best)

    s = sub.add_parser("results", help="the measured configs of a GPU, size and dtype as a table, best first, "
                       "or the best per value of one or two parameters (--by)")
    s.add_argument("workload")
    s.add_argument("--size")
    s.add_argument("--matrix", help="spmv: a Matrix Market file (its nearest measured matrix by features)")
    s.add_argument("--dtype")
    s.add_argument("--gpu", help="GPU name as stored (default: this machine's GPU)")
    s.add_argument("--top", type=int, default=20, help="show the best N configs (default 20)")
    s.add_argument("--all", action="store_true", help="show every config measured")
    s.add_argument("--by", nargs="+", metavar="PARAM", help="one parameter: best and median per value; two: a grid of the best")
    s.add_argument("--csv", help="also write the table (every row) to this CSV file")
    s.add_argument("--json", action="store_true", help="the table as JSON records")
    s.set_defaults(func=_results)

    s = sub.add_parser("export", help="best configs per GPU and size as JSON, YAML or a C header")
    s.add_argument("workload")
    s.add_argument("--format", choices=FORMATS, default="json")
    s.add_argument("--dtype")
    s.add_argument("-o", "--output")
    s.set_defaults(func=_export)

    s = sub.add_parser("baseline", help="record (or refresh) the regression baseline: best configs, re-measured")
    s.add_argument("workloads", nargs="+")
    s.add_argument("--size", action="append", help="size(s) to baseline (default: every size stored)")
    s.add_argument("--dtype", action="append", help="dtype(s) (default: every dtype stored)")
    s.add_argument("--rounds", type=int, default=10, help="rounds per session")
    s.add_argument("--sessions", type=int, help="independent worker sessions per kernel (their spread sets the "
                   "noise floor; default 6)")  # tuner.answers.check.BASELINE_SESSIONS
    s.add_argument("--backend", default="nvcuda", choices=sorted(BACKENDS))
    s.add_argument("--device", type=int, default=0)
    s.set_defaults(func=_baseline)

    s = sub.add_parser("check", help="re-measure the baselines on this GPU; exit 1 on a regression, 2 if it cannot run")
    s.add_argument("workloads", nargs="*", help="default: every workload with a baseline")
    s.add_argument("--rounds", type=int, default=20)
    s.add_argument("--threshold", type=float, default=0.03,  # tuner.answers.stats.THRESHOLD (imported lazily)
                   help="smallest slowdown reported, as a fraction (default 0.03: a 5%% slowdown is caught)")
    s.add_argument("--allow-different", action="store_true",
                   help="compare even across GPU models or major driver/CUDA versions")
    s.add_argument("--retune", type=int, default=0, metavar="BUDGET",
                   help="re-tune a regressed kernel with this many evaluations and print the config found")
    s.add_argument("--plant", action="append", metavar="NAME=VALUE",
                   help="measure the baseline config with this parameter changed (validates the check on a runner)")
    s.add_argument("--junit", help="write a JUnit XML report")
    s.add_argument("--markdown", help="write a markdown summary")
    s.add_argument("--json", action="store_true")
    s.add_argument("--backend", default="nvcuda", choices=sorted(BACKENDS))
    s.add_argument("--device", type=int, default=0)
    s.set_defaults(func=_check)

    s = sub.add_parser("run", help="run a workload's program with the best stored config (or --config)")
    programs = s.add_subparsers(dest="workload", required=True, metavar="WORKLOAD")
    from tuner.workloads import all_workloads

    for w in all_workloads() if run_programs else []:
        if w.run_help:
            prog = programs.add_parser(w.name, help=w.run_help, description=w.run_help)
            w.add_run_arguments(prog)
            prog.add_argument("--config", nargs="+", metavar="NAME=VALUE", help="run this config instead of the best stored")
            prog.add_argument("--dtype", help="element type (default: the space's first)")
            prog.add_argument("--gpu", help="take the best config stored for this GPU (default: this machine's)")
            prog.set_defaults(func=_run)

    compare.register(sub)
    return p


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser(run_programs="run" in argv).parse_args(argv)
    try:
        return args.func(args)
    except TunerError as e:
        # soft_wrap: paths stay whole; escaped: "pip install 'gpu-tuner[distributed]'" is text, not markup
        Console(stderr=True, soft_wrap=True).print(f"[red]error:[/] {escape(str(e))}", highlight=False)
        return 2
    except KeyboardInterrupt:
        Console(stderr=True).print("interrupted: everything measured is stored; run the same command again to resume")
        return 130
    except BrokenPipeError:  # `tuner results ... | head`: the reader has gone; say nothing more
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # Python's own flush at exit would raise
        return 141
    except Exception:  # a bug, not a verdict: `tuner check` must not exit 1, which says "regression"
        if args.func is not _check:
            raise
        import traceback

        traceback.print_exc()
        Console(stderr=True).print("[red]error:[/] the check could not run (the traceback above is a bug to report)")
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
