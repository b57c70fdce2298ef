"""Arithmetic expressions from YAML spaces (restrictions, launch geometry, metrics), checked once and
evaluated with nothing but their variables and a few math functions in scope."""

import ast
import math
from collections.abc import Iterable
from typing import Any

FUNCTIONS = {
    "ceil": lambda x: int(math.ceil(x)),
    "floor": lambda x: int(math.floor(x)),
    "min": min,
    "max": max,
    "abs": abs,
    "log2": math.log2,
    "sqrt": math.sqrt,
    "int": int,
    "float": float,
}

_ALLOWED_NODES = (
    ast.Expression,
    ast.BoolOp,
    ast.BinOp,
    ast.UnaryOp,
    ast.Compare,
    ast.IfExp,
    ast.Call,
    ast.Name,
    ast.Load,
    ast.Constant,
    ast.And,
    ast.Or,
    ast.Not,
    ast.Add,
    ast.Sub,
    ast.Mult,
    ast.Div,
    ast.FloorDiv,
    ast.Mod,
    ast.Pow,
    ast.USub,
    ast.UAdd,
    ast.Eq,
    ast.NotEq,
    ast.Lt,
    ast.LtE,
    ast.Gt,
    ast.GtE,
    ast.In,
    ast.NotIn,
    ast.Tuple,
    ast.List,
    ast.BitAnd,
    ast.BitOr,
    ast.BitXor,
    ast.LShift,
    ast.RShift,
)


class Expression:
    """A parsed expression; `names` are the free variables it reads. A subclass widens the language by its
    class attributes (the syntax `nodes` and the `functions` in scope) and `_check` (tuner/space/array_expressions.py)."""

    nodes: tuple[type, ...] = _ALLOWED_NODES
    functions: dict = FUNCTIONS
    source = "<expression>"

    def __init__(self, text: str) -> None:
        self.text = str(text)
        try:
            tree = ast.parse(self.text, mode="eval")
        except SyntaxError as e:
            raise ValueError(f"not a valid expression: {e.msg}") from None
        for node in ast.walk(tree):
            if not isinstance(node, self.nodes):
                raise ValueError(f"'{type(node).__name__}' is not allowed in an expression")
            if isinstance(node, ast.Call) and not (isinstance(node.func, ast.Name) and node.func.id in self.functions):
                raise ValueError(f"only these functions may be called: {', '.join(sorted(self.functions))}")
            self._check(node)
        self.names = self._free_names(tree)
        self._code = compile(tree, self.source, "eval")

    def _check(self, node: ast.AST) -> None:
        """What a subclass refuses besides the syntax and the calls."""

    def _free_names(self, tree: ast.AST) -> set[str]:
        return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} - set(self.functions)

    def check_names(self, known: Iterable[str]) -> None:
        unknown = sorted(self.names - set(known))
        if unknown:
            raise ValueError(f"unknown name(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")

    def __call__(self, variables: dict) -> Any:
        return eval(self._code, {"__builtins__": {}, **self.functions}, dict(variables))

    def __repr__(self) -> str:
        return f"Expression({self.text!r})"
