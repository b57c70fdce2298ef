"""How the tool writes values and configs for people."""


def readable(v: float, keep_zeros: bool = False) -> str:
    """A measured value in 4 significant digits, never in exponent form: 43122.2 -> "43122", 0.39841 ->
    "0.3984"; `keep_zeros` ("281.0", not "281") lines a table's column up."""
    if abs(v) >= 1000:
        return f"{v:.0f}"
    return f"{v:#.4g}" if keep_zeros else f"{v:.4g}"


def config_text(config: dict) -> str:
    """block_size_x=256, variant=7, ..."""
    return ", ".join(f"{k}={v}" for k, v in config.items())
