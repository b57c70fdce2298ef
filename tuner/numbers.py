"""How the tool writes a measured value for people: 4 significant digits, never in exponent form."""


def readable(v: float, keep_zeros: bool = False) -> str:
    """43122.2 -> "43122", 0.39841 -> "0.3984"; `keep_zeros` ("281.0", not "281") lines a table's column up."""
    if abs(v) >= 1000:
        return f"{v:.0f}"
    return f"{v:#.4g}" if keep_zeros else f"{v:.4g}"
