"""A stand-in compiler whose module takes 3 s to import: a pool worker that starts slowly (a loaded machine)."""

import time

time.sleep(3)


def compile_quickly(job) -> tuple[bytes, str]:
    return f"cubin of {job.source}".encode(), f"_lowered_{job.name}"
