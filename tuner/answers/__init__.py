"""The answers stage: what the store says. The best config with its fallbacks, results tables, export
(JSON, YAML, C header), the regression check and the strategy comparison."""
