"""Which Optuna storage holds a campaign's study, and where a results folder keeps them: a single-process
campaign's study is in its GPU's and workload's folder (`<gpu>/<workload>/optuna.sqlite3`), a distributed
campaign's in the storage its workers share (`campaigns.sqlite3` beside the results, or a URL). Opening one:
tuner/campaign/rdb_storage.py."""

from __future__ import annotations

from pathlib import Path

import optuna

from tuner.campaign.rdb_storage import open_storage, redact, sqlite_path
from tuner.errors import TunerError

STORAGE_ENV = "TUNER_STORAGE"  # the storage URL, for `tune --workers`, `worker` and `status` without --storage
SHARED_FILE = "campaigns.sqlite3"  # beside the results: the distributed campaigns' studies
LOCAL_FILE = "optuna.sqlite3"  # in a GPU's and workload's folder: its single-process campaigns' studies


def default_storage(root: Path) -> str:
    """The storage of the distributed campaigns whose rows go to the results folder `root`."""
    return f"sqlite:///{Path(root).resolve() / SHARED_FILE}"


def local_storage(folder: Path) -> str:
    """The studies of the single-process campaigns whose rows go to `folder` (a GPU's and workload's)."""
    return f"sqlite:///{Path(folder) / LOCAL_FILE}"


def study_storages(root: Path) -> list[str]:
    """The SQLite storages under a results folder that exist, distributed campaigns' first."""
    shared = [default_storage(root)] if (Path(root) / SHARED_FILE).exists() else []
    return shared + [local_storage(p.parent.resolve()) for p in sorted(Path(root).glob(f"*/*/{LOCAL_FILE}"))]


def existing_storage(url: str, *, source: str = "", hint: str = "`tuner tune` creates it") -> str:
    """`url`, a storage to read or join, where it exists: a SQLite file that is not there is an error (opening
    it would create an empty database: a typo in the path would then be served as a storage without studies).
    The error names where the URL came from (`source`) and what to do (`hint`). The one check of this:
    `tuner worker`, `tuner status` and `tuner dashboard` make it here (tuner.cli.common.storage_url, find_study)."""
    if not url.startswith("sqlite:"):
        return url  # a server's database: opening it creates nothing
    path = sqlite_path(url)
    if path == ":memory:" or not path:
        raise TunerError(f"storage '{redact(url)}': an in-memory database holds no campaign's study")
    file = Path(path) if Path(path).is_file() else Path(path.split("?", 1)[0])  # sqlite:///x.db?timeout=...
    if not file.is_file():
        where = "no such file" if file.parent.is_dir() else f"no such folder {file.parent}"
        raise TunerError(f"no campaign database at {redact(url)}{source}: {where} ({hint})")
    return url


def find_study(root: Path, campaign: str | None, url: str | None) -> tuple[str, int | None]:
    """The storage to open and the study of `campaign` in it (None: all of that storage's studies).
    `url`: a storage the user named (it must exist: existing_storage); else the results folder's storages are
    searched. Nothing is created: every storage named here exists."""
    candidates = [existing_storage(url)] if url else study_storages(root)
    if not candidates:
        raise TunerError(f"no Optuna studies under {root} (a campaign's study is made by `tuner tune`)")
    if campaign is None:
        if len(candidates) > 1:
            listed = "\n  ".join(redact(c) for c in candidates)
            raise TunerError(
                f"several storages hold studies; name a campaign or choose one with --storage:\n  {listed}"
            )
        return candidates[0], None
    for candidate in candidates:
        storage = open_storage(candidate)
        try:
            return candidate, storage.get_study_id_from_name(campaign)
        except KeyError:
            continue
    studies = [(c, s) for c in candidates for s in optuna.get_all_study_summaries(open_storage(c))]
    # a campaign on one process names its study `<campaign>@<gpu>/<kernel hash>-<space hash>`: its name alone
    # will do where it names one study
    named = [(c, s) for c, s in studies if s.study_name.startswith(f"{campaign}@")]
    if len(named) == 1:
        candidate, summary = named[0]
        return candidate, open_storage(candidate).get_study_id_from_name(summary.study_name)
    if named:
        raise TunerError(
            f"'{campaign}' names {len(named)} studies (one per GPU and kernel version); name one: "
            + ", ".join(sorted(s.study_name for _, s in named))
        )
    names = sorted({s.study_name for _, s in studies})
    where = redact(url) if url else f"the storages under {root} ({redact(default_storage(root))} and the GPUs' folders)"
    raise TunerError(f"no campaign '{campaign}' in {where}" + (f"; there are: {', '.join(names)}" if names else ""))
