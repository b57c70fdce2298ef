"""On the GPU: a whole single-process `tuner tune` campaign, from the search to the confirmation of its
near-ties and the answer of `tuner best`. Skipped where no CUDA GPU is found."""

import pytest

from tests.gpu_checks import device_count
from tuner.answers.best_config import best
from tuner.campaign.local import run_campaign
from tuner.campaign.request import CampaignRequest
from tuner.store import read_parts

pytestmark = pytest.mark.gpu


def test_a_campaign_on_the_gpu_confirms_what_it_stores(tmp_path):
    result = run_campaign(CampaignRequest(workload="reduction", size="seed", dtype="float32", strategy="random",
                                          max_evals=16, quiet=True, results=tmp_path))
    assert result.measured >= 8 and result.best is not None, result.failures
    answered = best("reduction", "seed", "float32", root=tmp_path)
    confirmations = list(tmp_path.glob("*/reduction/confirmations/*.parquet"))
    if result.best["confirmed"]:
        # a 17-us kernel has near-ties in any sample: they were measured again, and the choice is the answer
        stored = read_parts("*/reduction/confirmations/*.parquet", tmp_path)
        assert len(stored) >= 2 and stored["chosen"].sum() == 1
        assert answered["config"] == result.best["config"]
    else:
        assert not confirmations
    assert answered is not None


def test_a_distributed_campaign_on_the_gpus_of_this_host(tmp_path):
    """`tuner tune --workers N` on the real GPUs (one worker each, at most two): each worker launches its
    measuring process early, measures on its GPU, and the campaign's rows, status and best agree."""
    from tuner.campaign.distributed import (
        campaign_rows,
        campaign_status,
        default_name,
        default_storage,
        run_distributed,
    )
    workers = min(2, device_count())
    req = CampaignRequest(workload="reduction", size="seed", dtype="float32", strategy="tpe", max_evals=16,
                          quiet=True, results=tmp_path, warm_start=False)
    result = run_distributed(req, workers, log=lambda msg: None)
    assert result.best is not None and result.measured >= 8, result.failures
    status = campaign_status(default_name("reduction", "seed", "float32", "tpe", 1), default_storage(tmp_path))
    assert status["done"] >= 8 and status["running"] == 0 and status["gpu"] and not status["simulated"]
    assert len(status["workers"]) == workers
    for info in status["workers"].values():
        assert info["launched_early"] and "closed" in info["timeline_s"]
    rows = campaign_rows(status["campaign"], tmp_path, simulated=False, workload="reduction")
    assert len(rows) == result.measured and set(rows["worker"]) == set(status["workers"])
    assert best("reduction", "seed", "float32", root=tmp_path)["gpu"] == status["gpu"]
