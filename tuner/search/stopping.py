"""Moved to tuner.search.early_stopping; this name stays for the importers from before (tuner.answers.compare_scores)
until they import it from there."""

from tuner.search.early_stopping import MIN_DELTA, Patience, evaluations_until_stop

__all__ = ["MIN_DELTA", "Patience", "evaluations_until_stop"]
