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

    nodes = _ARRAY_NODES
    functions = ARRAY_FUNCTIONS
    source = "<reference expression>"

    def _check(self, node: ast.AST) -> None:
        if isinstance(node, ast.Attribute) and node.attr not in ARRAY_ATTRIBUTES:
            raise ValueError(f"'.{node.attr}' is not allowed; arrays have {', '.join(sorted(ARRAY_ATTRIBUTES))}")
        if isinstance(node, ast.keyword) and node.arg not in ARRAY_KEYWORDS:
            raise ValueError(f"keyword '{node.arg}' is not allowed; allowed: {', '.join(sorted(ARRAY_KEYWORDS))}")

    def _free_names(self, tree: ast.AST) -> set[str]:
        """Every name but those called (an argument may be named like a numpy function)."""
        called = {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
        return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} - called

    def __repr__(self) -> str:
        return f"ArrayExpression({self.text!r})"
