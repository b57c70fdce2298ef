"""The search stage: which config to measure next. Optuna's samplers through one ask/tell loop (loop.py,
shared with distributed campaigns), Kernel Tuner's strategies by name (strategies.py is the face: make_strategy),
early stopping, warm starts from the store.

Modules: strategies (strategies by name), names (their names and defaults: a leaf the command line reads), loop
(the ask/tell loop), optuna_strategy (the loop as a Kernel Tuner strategy), kt_strategies (Kernel Tuner's own),
samplers (Optuna's, configured), codec (configs as Optuna params, the nearest free config, the penalty),
trial_kinds (how a trial is recorded), early_stopping (patience), warmstart (configs to try first)."""
