"""`tuner tune`: a tuning campaign on this GPU, spread over several (--workers), replayed (--simulate), or the
workload checked without measuring (--dry-run)."""

from __future__ import annotations

import argparse
import shlex
import sys

from rich.markup import escape

from tuner.cli.common import console, err_console, size_text, storage_url
from tuner.errors import TunerError
from tuner.formatting import config_text, readable
from tuner.json_text import strict_json


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add `tuner tune`."""
    from tuner.measure.backends import BACKENDS
    from tuner.search.names import DEFAULT_PATIENCE, DEFAULT_STRATEGY, OPTUNA_SAMPLERS

    s = subparsers.add_parser("tune", help="run a tuning campaign (or replay one with --simulate)")
    s.add_argument("workload")
    s.add_argument("--size", help="a named size of the space, or k=v,... (default: the space's default size)")
    s.add_argument("--matrix", help="spmv: a Matrix Market file (.mtx) as the problem")
    s.add_argument("--dtype", help="element type (default: the space's first)")
    s.add_argument(
        "--strategy",
        default=DEFAULT_STRATEGY,
        help=", ".join(f"{n} (default)" if n == DEFAULT_STRATEGY else n for n in OPTUNA_SAMPLERS)
        + ", brute_force, or kt:<Kernel Tuner strategy>",
    )
    s.add_argument(
        "--budget", help="evaluations (150) or a duration (90s, 10m, 2h); default: 100, the whole space for brute_force"
    )
    s.add_argument("--backend", default="nvcuda", choices=sorted(BACKENDS))
    s.add_argument("--device", type=int, default=0, help="CUDA device ordinal (default 0)")
    s.add_argument("--seed", type=int, default=1, help="seed of the samplers and of the generated data (default 1)")
    s.add_argument(
        "--patience",
        type=int,
        default=None,
        help="Optuna strategies stop after this many evaluations without a 0.5%% gain "
        f"(default: {DEFAULT_PATIENCE} without --budget, never with one; 0: never)",
    )
    s.add_argument(
        "--no-warm-start",
        action="store_true",
        help="Optuna strategies start from scratch, not from the best configs stored for other sizes",
    )
    s.add_argument(
        "--timeout",
        type=float,
        default=60.0,
        help="seconds one configuration may take before it is killed (default 60)",
    )
    s.add_argument(
        "--storage",
        help="Optuna storage URL (default: with --workers, $TUNER_STORAGE, else the SQLite file beside the results "
        "that `tuner worker` and `tuner status` read too; without, SQLite in the GPU's and workload's folder)",
    )
    s.add_argument(
        "--simulate", action="store_true", help="replay from results/ in Kernel Tuner's simulation mode (no GPU)"
    )
    s.add_argument("--gpu", help="with --simulate: which recorded GPU to replay")
    s.add_argument(
        "--dry-run",
        action="store_true",
        help="measure nothing: check the workload without a GPU (valid configs, parameters the kernel never "
        "reads, a few configs compiled, the reference answer) and exit 1 on a problem",
    )
    s.add_argument("--quiet", action="store_true", help="no progress bar")
    s.add_argument("--json", action="store_true", help="the outcome as one JSON document on stdout")
    s.add_argument(
        "--workers",
        type=int,
        metavar="N",
        help="spread the campaign over N worker processes here, one per GPU; 0: only create it for "
        "`tuner worker` elsewhere (see docs/distributed.md)",
    )
    s.add_argument(
        "--devices", help="with --workers: the GPUs' ordinals, comma-separated (default: --device, --device+1, ...)"
    )
    s.add_argument(
        "--campaign",
        help="with --workers: the campaign's name (default: WORKLOAD-SIZE-DTYPE-STRATEGY-sSEED, e.g. reduction-large-float32-auto-s1)",
    )
    s.add_argument(
        "--allow-mixed-gpus", action="store_true", help="with --workers: let workers on other GPU models join"
    )
    s.add_argument("--measure-target", help=argparse.SUPPRESS)  # tests: a GPU-free worker process, module:function
    s.set_defaults(func=command, tune_parser=s)  # the parser: a stopped campaign's line says how to resume it


def command(args: argparse.Namespace) -> int:
    """Run the campaign and print what it found; exit 1 if no configuration ran successfully."""
    from tuner.answers.best_config import best
    from tuner.campaign.local import run_campaign
    from tuner.campaign.request import CampaignRequest, parse_budget

    if args.dry_run:
        return _dry_run(args)
    max_evals, time_limit = parse_budget(args.budget)
    req = CampaignRequest(
        workload=args.workload,
        size=size_text(args),
        dtype=args.dtype,
        strategy=args.strategy,
        max_evals=max_evals,
        time_limit=time_limit,
        backend=args.backend,
        device=args.device,
        seed=args.seed,
        timeout=args.timeout,
        storage=args.storage,
        results=args.results,
        simulate=args.simulate,
        gpu=args.gpu,
        quiet=args.quiet,
        warm_start=not args.no_warm_start,
        patience=args.patience,
    )
    if args.workers is None:
        _refuse_distributed_options(args)
        result = run_campaign(req, stored_best=best)  # a replay's closing notes compare it with `tuner best`
    else:
        from tuner.campaign.distributed import run_distributed

        devices = parse_devices(args.devices, args.workers)
        if args.workers and not args.measure_target:  # the workers started here measure on this host's GPUs
            from tuner.campaign.request import check_gpu
            from tuner.workloads import get_workload

            check_gpu(req, get_workload(req.workload).space)
        try:
            result = run_distributed(
                req,
                args.workers,
                devices=devices,
                name=args.campaign,
                url=storage_url(args, creating=True),  # as `tuner worker` and `tuner status` decide it
                allow_mixed_gpus=args.allow_mixed_gpus,
                measure_target=args.measure_target,
                log=lambda msg: print(msg, file=sys.stderr, flush=True),
            )
        except KeyboardInterrupt:
            # Ctrl-C or SIGTERM: the workers have stopped, each storing its rows and giving back the trials it held
            # (they say nothing themselves): one line here says how to go on
            stored = "" if args.simulate else "everything measured is stored; "
            err_console.print(f"interrupted; {stored}resume with: {resume_command(args)}", highlight=False)
            return 130
    if args.workers == 0:  # documented: create the campaign only; `tuner worker` elsewhere runs it
        if args.json:
            print(strict_json({**result.__dict__, "created_only": True}))
        else:
            for note in result.notes:  # which recording a replay's workers will replay, as a replay here says it
                console.print(note, highlight=False)
            console.print(
                f"campaign created for {result.workload} {result.size} {result.dtype}; no worker runs here: "
                "start `tuner worker` on the GPU hosts (the line above says how)",
                highlight=False,
            )
        return 0
    if args.json:
        print(strict_json(result.__dict__))
        return 0 if result.best else 1  # as without --json: no configuration ran successfully
    resumed = result.evaluated - result.measured
    done = (
        f"{result.replayed or 'replayed from the recording'} (simulation, no GPU)"
        if result.simulated
        else f"{result.measured} newly measured" + (f", {resumed} resumed from the store" if resumed > 0 else "")
    )
    console.print(
        f"[bold]{result.workload}[/] {result.size} {result.dtype} on {result.gpu} with {result.strategy}: "
        f"{result.evaluated} configs evaluated; {done}"
    )
    for note in result.notes:
        console.print(note, highlight=False)
    if result.failures:
        console.print("failures: " + ", ".join(f"{k} {v}" for k, v in result.failures.items()))
    if result.best:
        b = result.best
        console.print(
            f"best: {config_text(b['config'])}  {readable(b['value'])} {b['objective']}  ({readable(b['time_ms'])} ms)",
            highlight=False,
        )
    elif result.evaluated == 0 and result.stop_reason == "time limit":  # not that every config failed
        console.print(f"[red]the time budget ({args.budget}) ran out before any configuration was measured[/]")
    else:
        console.print("[red]no configuration ran successfully[/]")
    for name, ms in result.baselines.items():
        console.print(f"baseline {name}: {readable(ms)} ms", highlight=False)
    for line in result.closing:  # why the search stopped; where `tuner best` answers otherwise, why
        console.print(line, highlight=False)
    return 0 if result.best else 1


def _dry_run(args: argparse.Namespace) -> int:
    """--dry-run: the workload's checks, a line each; exit 1 if any is a problem."""
    from tuner.measure import kt, machine
    from tuner.measure.dry_run import dry_run
    from tuner.workloads import get_workload

    if args.simulate or args.workers is not None:
        raise TunerError("--dry-run measures nothing: leave out --simulate and --workers")
    workload = get_workload(args.workload)
    with console.status("") as status:
        report = dry_run(
            workload,
            size_text(args),
            args.dtype,
            backend=args.backend,
            gpu_here=machine.gpu_missing(kt.effective_backend(workload.space, args.backend)) is None,
            progress=lambda text: status.update(escape(text)),
        )
    if args.json:
        print(strict_json({**report.__dict__, "findings": [f.__dict__ for f in report.findings]}))
        return 1 if report.problems else 0
    console.print(f"[bold]{report.workload}[/] {report.size} {report.dtype}: dry run, nothing measured")
    style = {"ok": "green", "warning": "yellow", "problem": "red"}
    for f in report.findings:
        console.print(f"[{style[f.level]}]{f.level}[/]: {escape(f.text)}", highlight=False, soft_wrap=True)
    if report.problems:
        console.print(f"{report.problems} problem(s): a campaign would fail on them", highlight=False)
        return 1
    where = "" if report.on_cpu else " on a machine with a GPU"
    console.print(f"next: tuner tune {args.workload}{where}", highlight=False)
    return 0


# the options of a distributed campaign, and why a campaign on one process has no use for them
DISTRIBUTED_OPTIONS = {
    "campaign": "--campaign names a distributed campaign (--workers N); one on one process is named by its "
    "workload, size, dtype, strategy and seed",
    "devices": "--devices is for --workers N: give one GPU ordinal per worker (one process measures on --device)",
    "allow_mixed_gpus": "--allow-mixed-gpus is for --workers N: it lets workers on other GPU models join a "
    "distributed campaign",
}


def _refuse_distributed_options(args: argparse.Namespace) -> None:
    """An option of --workers given without it would do nothing: one line, rather than a campaign ignoring it."""
    for dest, refusal in DISTRIBUTED_OPTIONS.items():
        if getattr(args, dest) not in (None, False):
            raise TunerError(refusal)


def resume_command(args: argparse.Namespace) -> str:
    """The command line that runs this campaign again (a stopped one resumes): the options given, as parsed
    (those at their default left out, a storage URL without its password, test-only ones left out)."""
    from tuner.campaign.rdb_storage import redact

    parser: argparse.ArgumentParser = args.tune_parser
    words = ["tuner"]
    if args.results is not None:
        words += ["--results", str(args.results)]
    if args.workloads_dir is not None:
        words += ["--workloads", str(args.workloads_dir)]
    words.append("tune")
    options: list[str] = []
    for action in parser._actions:
        value = getattr(args, action.dest, None)
        if action.help == argparse.SUPPRESS or value is None:  # a test's hook; --help; an option not given
            continue
        if action.dest in ("results", "workloads_dir"):  # the folders, written before the command above
            continue
        if not action.option_strings:
            words.append(str(value))  # the workload
        elif value != action.default:
            option = action.option_strings[-1]
            if action.nargs == 0:  # a flag
                options.append(option)
            else:
                options += [option, redact(str(value)) if action.dest == "storage" else str(value)]
    line = shlex.join(words + options)
    if args.storage and redact(args.storage) != args.storage:
        line += "  (with the storage's password for ***, or the URL in $TUNER_STORAGE)"
    return line


def parse_devices(text: str | None, workers: int) -> list[int] | None:
    """--devices: one distinct GPU ordinal (>= 0) per worker; None: --device, --device+1, ..."""
    if workers < 0:
        raise TunerError(f"--workers {workers}: give a number of worker processes (0: only create the campaign)")
    if text is None:
        return None
    try:
        devices = [int(d) for d in text.split(",")]
    except ValueError:
        raise TunerError(f"--devices '{text}': give GPU ordinals, comma-separated (0,1)") from None
    if any(d < 0 for d in devices):
        raise TunerError(f"--devices '{text}': a GPU ordinal is 0 or more")
    if len(set(devices)) != len(devices):
        raise TunerError(f"--devices '{text}': each GPU once (two workers on one GPU would time each other)")
    if len(devices) != workers:
        raise TunerError(f"--devices '{text}': {len(devices)} GPU(s) for --workers {workers}: give one per worker")
    return devices
