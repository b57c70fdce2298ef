"""What the search needs from Optuna that Optuna offers no public API for, kept here so that an Optuna
upgrade that changes them breaks in one place (tests/test_distributed.py and tests/test_optuna_study.py run
each): the sampler view (tuner.search.sampler_view) rebuilds trials with their storage id, and a
distributed campaign needs the three below.

Optuna records heartbeats only inside `Study.optimize`; a worker drives `study.ask`/`study.tell` itself
(one thread measures while another keeps the books), so it beats for its trials through the storage's
public `record_heartbeat(trial_id)` (tuner.campaign.distributed.liveness). Everything else is public: the
storage is the RDBStorage the campaign opened (tuner.campaign.rdb_storage.open_storage), stale trials fail
through `optuna.storages.fail_stale_trials`, their retries are `RetryFailedTrialCallback`'s.

- `trial_id(trial)`: the storage's id of a trial, which `record_heartbeat` and `get_trial` take (and which a
  sampler such as CMA-ES writes its own attributes by, so the sampler view keeps it). `Trial` and
  `FrozenTrial` keep it private (`_trial_id`); the public route, `storage.get_trial_id_from_study_id_trial_number`,
  costs a database round trip per trial (on SQLite a write-locked one) on the path that every worker queues on.
- `fixed_params(trial)`: the config a queued trial was enqueued with. A WAITING trial has no params yet:
  `Study.enqueue_trial` keeps them in the system attribute "fixed_params", which Optuna documents no reader of.
- `never_beat(storage, ids)`: which running trials have no heartbeat at all. Optuna's stale check fails a
  trial whose last heartbeat is old, never one whose worker died before its first, which would stay
  RUNNING for good. Optuna has no public read of heartbeats: this reads its `trial_heartbeats` table through
  the storage's SQLAlchemy engine (`RDBStorage.engine`).
"""

from __future__ import annotations

import sqlalchemy
from optuna.storages import RDBStorage
from optuna.trial import FrozenTrial, Trial


def trial_id(trial: Trial | FrozenTrial) -> int:
    return trial._trial_id


def fixed_params(trial: FrozenTrial) -> dict | None:
    return trial.system_attrs.get("fixed_params")


def never_beat(storage: RDBStorage, trial_ids: list[int]) -> set[int]:
    if not trial_ids:
        return set()
    with storage.engine.connect() as conn:  # Optuna's schema: one row per trial that beat
        beating = {
            row[0]
            for row in conn.execute(
                sqlalchemy.text("SELECT trial_id FROM trial_heartbeats WHERE trial_id IN :ids").bindparams(
                    sqlalchemy.bindparam("ids", expanding=True)
                ),
                {"ids": trial_ids},
            )
        }
    return set(trial_ids) - beating
