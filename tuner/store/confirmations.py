"""What the confirmations of a workload chose (tuner.campaign.confirmation measures and saves them): its parts
under results/<gpu>/<workload>/confirmations/, and the config the one that answers chose among near-ties, which
`tuner best` answers while the config that counts as best by its measurements was among its finalists."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from tuner.store.parts import read_parts
from tuner.store.rows import complete_configs

CONFIRM_DIR = "confirmations"


def load(workload: str, root: Path) -> pd.DataFrame:
    """The confirmations of `workload` in the store `root` (and those the built-in workloads ship)."""
    return read_parts(f"*/{workload}/{CONFIRM_DIR}/*.parquet", root)


def choice_for(
    rows: pd.DataFrame, leader: str, root: Path, confirmations: pd.DataFrame | None = None
) -> tuple[str, int] | None:
    """The config chosen by the confirmation that answers (`_answering`) for the GPU, size and dtype of `rows` (one
    campaign's or the store's rows of them), with its number of finalists, if `leader` (the config that counts as
    best by its measurements) was among those finalists: a later campaign may have found a clearly better one since.
    `confirmations`: the workload's, as `load` reads them (given by a caller that asks for many sizes: the read
    of every part is most of the cost of an answer), else read here."""
    workload = rows["workload"].iloc[0]
    found = load(workload, root) if confirmations is None else confirmations
    if found.empty:
        return None
    r = rows.iloc[0]
    found = found[(found["gpu"] == r["gpu"]) & (found["size_vars"] == r["size_vars"]) & (found["dtype"] == r["dtype"])]
    if found.empty:
        return None
    # a confirmation from before the space gained a parameter names its configs without it: with its default
    # (completed after the selection: an export asks once for each of GEMM's 136 sizes)
    from tuner.workloads import get_workload  # the workload's space (a plugin: imported when asked)

    found = complete_configs(found, get_workload(workload).space)
    first = _answering(found)
    rows_of = found[(found["worker"] == first["worker"]) & (found["timestamp"] == first["timestamp"])]
    if leader not in set(rows_of["config"]):
        return None
    return rows_of.loc[rows_of["chosen"], "config"].iloc[0], len(rows_of)


def _answering(found: pd.DataFrame) -> pd.Series:
    """A row of the confirmation that answers for one GPU, size and dtype: the latest campaign's (a later campaign
    may have found a clearly better config), and of that campaign's, the one drawn from the most results, the first
    of those (as the campaign's study keeps the first choice recorded for the same results). A distributed
    campaign's workers each confirm as they finish, and one that stopped on its time limit with fewer results may
    end its confirmation after a fuller one's: the study keeps the fuller one
    (tuner.campaign.distributed.worker._confirm_campaign), and so does this. Rows from before `drawn_from` was
    stored: the latest, as before. Of records alike, the first read."""
    last = found.loc[found["timestamp"] == found["timestamp"].max()].iloc[0]
    if "campaign_id" in found and isinstance(last["campaign_id"], str):
        found = found[found["campaign_id"] == last["campaign_id"]]
    if "drawn_from" not in found or found["drawn_from"].isna().all():
        return found.loc[found["timestamp"] == found["timestamp"].max()].iloc[0]
    fullest = found[found["drawn_from"] == found["drawn_from"].max()]
    return fullest.loc[fullest["timestamp"] == fullest["timestamp"].min()].iloc[0]
