"""Where a campaign's Optuna search starts and when it stops early, one rule for single-process campaigns
(tuner.campaign.local) and distributed ones (tuner.campaign.distributed.study, which queues the configs in the
shared study when it creates it, and keeps the patience among the campaign's settings): the configs measured
first (the request's own, then the warm start's: the best configs stored for other sizes, dtypes or GPUs), and
the patience (DEFAULT_PATIENCE where no budget was asked for). Kernel Tuner's strategies and brute force take
neither."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from tuner.errors import TunerError
from tuner.search.names import DEFAULT_PATIENCE, OPTUNA_SAMPLERS
from tuner.search.warmstart import warm_configs, warm_evaluations

if TYPE_CHECKING:
    import pandas as pd

    from tuner.campaign.request import CampaignRequest
    from tuner.space import Space


def first_configs(
    req: CampaignRequest,
    space: Space,
    size: dict,
    dtype: str,
    gpu: str | None,
    root: Path,
    evaluations: pd.DataFrame | None = None,
) -> list[dict]:
    """The configs an Optuna search measures before it samples: `req.first` (checked: a mistake is an error, not
    skipped), then the warm start's (`evaluations`: the store's rows, if the caller has read them already)."""
    if req.strategy not in OPTUNA_SAMPLERS:
        if req.first:
            raise TunerError(f"configs to measure first need an Optuna strategy ({', '.join(OPTUNA_SAMPLERS)})")
        return []
    first = [space.checked(c, "a config to measure first", dtype) for c in req.first]
    if not req.warm_start:
        return first
    warm = warm_configs(warm_evaluations(req.workload, root, own=evaluations), space, size, dtype, gpu)
    return first + [c for c in warm if c not in first]


def patience_of(req: CampaignRequest) -> int | None:
    """The request's patience: its own (0: never), else DEFAULT_PATIENCE where no budget was asked for (the
    default budget is then a ceiling); None for a strategy that does not stop early."""
    if req.strategy not in OPTUNA_SAMPLERS:
        return None
    patience = req.patience
    if patience is None:
        patience = DEFAULT_PATIENCE if req.max_evals is None and req.time_limit is None else None
    return patience or None
