"""The numpy expressions of a space's `reference`: the language of tuner.space.expressions, plus indexing,
slicing, `@`, a few array attributes and numpy functions (ARRAY_FUNCTIONS) with a few keyword arguments.
The space's JSON schema documents these lists word for word (tests/test_declared.py holds them together)."""

from __future__ import annotations

import ast

import numpy as np

from tuner.space.expressions import _ALLOWED_NODES, Expression

# what a reference expression may call: numpy's, by these names
ARRAY_FUNCTIONS = {
    **{
        name: getattr(np, name)
        for name in (
            "abs",
            "arange",
            "ceil",
            "clip",
            "cos",
            "cumsum",
            "diag",
            "dot",
            "einsum",
            "exp",
            "flip",
            "floor",
            "log",
            "log2",
            "log10",
            "matmul",
            "maximum",
            "mean",
            "minimum",
            "ones_like",
            "outer",
            "prod",
            "reshape",
            "roll",
            "sign",
            "sin",
            "sqrt",
            "square",
            "sum",
            "tanh",
            "trace",
            "transpose",
            "tril",
            "triu",
            "where",
            "zeros_like",
            "concatenate",
            "stack",
        )
    },
    "min": np.min,
    "max": np.max,
}
ARRAY_KEYWORDS = {"axis", "axes", "keepdims", "k"}
ARRAY_ATTRIBUTES = {"T", "shape", "size", "ndim"}  # data, never methods: no way to reach Python internals
_ARRAY_NODES = (*_ALLOWED_NODES, ast.Subscript, ast.Slice, ast.Attribute, ast.keyword, ast.MatMult, ast.Invert)


class ArrayExpression(Expression):
    """A numpy expression of a reference: Expression's whitelist of syntax, and more (see the module). Checked
    once, evaluated with nothing but its variables and ARRAY_FUNCTIONS in scope; `names` are the free
    variables it reads, and `check_names` is Expression's."""

    def __init__(self, text: str) -> None:
        self.text = str(text)
        try:
            tree = ast.parse(self.text, mode="eval")
        except SyntaxError as e:
            raise ValueError(f"not a valid expression: {e.msg}") from None
        for node in ast.walk(tree):
            if not isinstance(node, _ARRAY_NODES):
                raise ValueError(f"'{type(node).__name__}' is not allowed in an expression")
            if isinstance(node, ast.Call) and not (isinstance(node.func, ast.Name) and node.func.id in ARRAY_FUNCTIONS):
                raise ValueError(f"only these functions may be called: {', '.join(sorted(ARRAY_FUNCTIONS))}")
            if isinstance(node, ast.Attribute) and node.attr not in ARRAY_ATTRIBUTES:
                raise ValueError(f"'.{node.attr}' is not allowed; arrays have {', '.join(sorted(ARRAY_ATTRIBUTES))}")
            if isinstance(node, ast.keyword) and node.arg not in ARRAY_KEYWORDS:
                raise ValueError(f"keyword '{node.arg}' is not allowed; allowed: {', '.join(sorted(ARRAY_KEYWORDS))}")
        called = {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
        self.names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} - called
        self._code = compile(tree, "<reference expression>", "eval")

    def __call__(self, variables: dict) -> object:
        return eval(self._code, {"__builtins__": {}, **ARRAY_FUNCTIONS}, dict(variables))

    def __repr__(self) -> str:
        return f"ArrayExpression({self.text!r})"
