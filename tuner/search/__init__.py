"""The search stage: which config to measure next. Optuna's samplers through one ask/tell loop, Kernel
Tuner's strategies by name, early stopping, warm starts from the store."""
