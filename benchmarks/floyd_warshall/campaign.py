"""A Floyd-Warshall tuning campaign that measures the given configs first (the seed's, say), then goes on
with the strategy (CampaignRequest.first: in front of the warm start; Optuna serves them before it samples).
Usage: python benchmarks/floyd_warshall/campaign.py SIZE BUDGET [CONFIG_JSON ...] (BUDGET: evaluations or a duration, as for `tuner tune --budget`). The Optuna study is a fresh one in a
temporary directory: a study kept from an earlier run already holds the given configs, and Optuna skips an
enqueued trial it has seen, so they would not come first. (Measured configs still come from the store.)"""

import json
import sys
import tempfile

from tuner.campaign.local import run_campaign
from tuner.campaign.request import CampaignRequest, parse_budget


def main(size: str, budget: str, *configs: str) -> None:
    max_evals, time_limit = parse_budget(budget)
    with tempfile.TemporaryDirectory() as tmp:
        result = run_campaign(CampaignRequest(workload="floyd-warshall", size=size, strategy="tpe", max_evals=max_evals,
                                              time_limit=time_limit, patience=0, timeout=120, quiet=True,
                                              first=tuple(json.loads(c) for c in configs),
                                              storage=f"sqlite:///{tmp}/study.db"))
    print(json.dumps({"size": result.size, "evaluated": result.evaluated, "failures": result.failures,
                      "best": result.best}, default=str))


if __name__ == "__main__":
    main(*sys.argv[1:])
