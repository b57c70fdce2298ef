"""The campaign stage: a request checked once, a session on one GPU (the measuring process, where its rows
go), the single-process and distributed runs, the confirmation of near-ties, progress on screen."""
