"""The measure stage: Kernel Tuner configured from a space (kt), the measuring process that compiles, runs,
times and verifies one config at a time in isolation (protocol, process, runner), timing and vendor
references, host code builds, provenance, and replay of recordings."""
