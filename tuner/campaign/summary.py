"""The closing notes of a campaign, live or replayed: why the search stopped, and where `tuner best` answers
another config than the campaign's top row, why (a confirmation chose among near-ties; the store ranks by the
median of every campaign's measurements; a replay's budget did not reach the stored best)."""

from __future__ import annotations

from tuner.formatting import config_text, readable

# what each strategy's `stop_reason` means to a reader (tuner/search: optuna_strategy, kt_strategies)
STOP_REASONS = {
    "patience": "no gain of 0.5% over the last evaluations (--patience)",
    "space exhausted": "every config of the space, or of the recording replayed, was evaluated",
    "budget": "the budget of evaluations was spent (--budget)",
    "time limit": "the time budget ran out (--budget)",
}


def stopped_line(stop_reason: str | None) -> str | None:
    """The line that says why the search stopped, where the strategy said (None: nothing to say)."""
    if not stop_reason:
        return None
    return f"stopped ({stop_reason})" + (f": {STOP_REASONS[stop_reason]}" if stop_reason in STOP_REASONS else "")


def chosen_line(best: dict | None, top: dict | None, *, replayed: bool = False) -> str | None:
    """A campaign whose confirmation chose another config than its top row: which, and that `tuner best`
    answers the chosen one (`replayed`: a distributed replay, whose confirmation resamples the recorded times
    and is kept apart from the store)."""
    if not best or not top or best["config"] == top["config"]:
        return None
    again = " (replayed: resampled from their recorded times)" if replayed else ""
    return (
        f"the campaign's top row was {config_text(top['config'])} ({readable(top['value'])} {top['objective']}); "
        f"measured again side by side with its near-ties{again}, the confirmation chose the best above"
        + ("" if replayed else ", which `tuner best` answers")
    )


def replay_line(answer: dict | None, top: dict | None, results: list) -> str | None:
    """A replay whose top row is not what `tuner best` answers for the recorded GPU, size and dtype (`answer`;
    None: nothing stored to compare with): what it answers and why (its confirmation's choice, a config the
    replay never reached, or the store's median over several measurements)."""
    if not answer or not top or answer["fallback"] != "exact" or answer["config"] == top["config"]:
        return None
    reached = any(r is not None and {k: r.get(k) for k in answer["config"]} == answer["config"] for r in results)
    if any("near-ties" in n for n in answer["notes"]):
        why = "a confirmation measured the near-ties again side by side after the recorded campaign and chose it"
    elif not reached:
        why = "this replay's budget did not reach it"
    else:
        why = (
            "the store ranks each config by the median of all its stored measurements "
            f"({answer['measurements']} of this one), this replay by its recording's"
        )
    return (
        f"`tuner best` answers {config_text(answer['config'])} ({readable(answer['value'])} {answer['objective']}), "
        f"not this replay's top row: {why}"
    )


def closing_notes(*lines: str | None) -> list[str]:
    """The lines that have something to say, in order."""
    return [line for line in lines if line]
