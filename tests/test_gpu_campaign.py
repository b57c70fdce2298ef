"""On the GPU: a whole single-process `tuner tune` campaign, from the search to the confirmation of its
near-ties and the answer of `tuner best`. Skipped where no CUDA GPU is found."""

import pytest

from tuner.campaign import CampaignRequest, run_campaign
from tuner.query import best
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
