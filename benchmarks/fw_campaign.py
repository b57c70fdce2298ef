"""A Floyd-Warshall tuning campaign that measures the given configs first (the seed's, say), then goes on
with the strategy: run_campaign with those configs put in front of the warm start (Optuna serves them
before it samples). Usage: python benchmarks/fw_campaign.py SIZE BUDGET [CONFIG_JSON ...]
(BUDGET: evaluations or a duration, as for `tuner tune --budget`)."""

import json
import sys

from tuner import campaign
from tuner.campaign import CampaignRequest, parse_budget, run_campaign


def main(size: str, budget: str, *configs: str) -> None:
    first = [json.loads(c) for c in configs]
    stored_warm = campaign.warm_configs
    campaign.warm_configs = lambda *a, **kw: first + [c for c in stored_warm(*a, **kw) if c not in first]
    max_evals, time_limit = parse_budget(budget)
    result = run_campaign(CampaignRequest(workload="floyd-warshall", size=size, strategy="tpe", max_evals=max_evals,
                                          time_limit=time_limit, patience=0, timeout=120, quiet=True))
    print(json.dumps({"size": result.size, "evaluated": result.evaluated, "failures": result.failures,
                      "best": result.best}, default=str))


if __name__ == "__main__":
    main(*sys.argv[1:])
