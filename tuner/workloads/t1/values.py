"""T1 text in our terms: a parameter's `Values` as a list (parse_values), a `Conditions` expression in our
expression language (translate_condition), and sub-expressions without free names folded to numbers."""

from __future__ import annotations

import ast
import re
from typing import Any

from tuner.space.expressions import Expression

VALUE_LIMIT = 100_000  # values of one parameter: a range() beyond that is a typo, not a space


def parse_values(text: str) -> list:
    """A T1 parameter's `Values`: a Python literal list, or the few constructions the published files use
    (`list(range(32, 1025, 32))`, `[1, 2] + list(range(4, 9))`, `[2**i for i in range(6)]`), evaluated
    without eval: anything else is a ValueError."""
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        pass
    else:
        return list(value) if isinstance(value, (list, tuple)) else [value]
    try:
        tree = ast.parse(str(text).strip(), mode="eval")
    except SyntaxError as e:
        raise ValueError(f"not a Python list: {e.msg}") from None
    values = _values(tree.body)
    if len(values) > VALUE_LIMIT:
        raise ValueError(f"more than {VALUE_LIMIT} values")
    return values


def _values(node: ast.AST) -> list:
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_scalar(e, {}) for e in node.elts]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _values(node.left) + _values(node.right)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.keywords:
        if node.func.id in ("list", "tuple") and len(node.args) == 1:
            return _values(node.args[0])
        if node.func.id == "range" and 1 <= len(node.args) <= 3:
            bounds = [_scalar(a, {}) for a in node.args]
            if not all(isinstance(b, int) for b in bounds):
                raise ValueError("range() takes whole numbers")
            r = range(*bounds)
            if len(r) > VALUE_LIMIT:
                raise ValueError(f"more than {VALUE_LIMIT} values")
            return list(r)
    if isinstance(node, ast.ListComp) and len(node.generators) == 1:
        gen = node.generators[0]
        if isinstance(gen.target, ast.Name) and not gen.is_async:
            out = []
            for v in _values(gen.iter):
                scope = {gen.target.id: v}
                if all(_scalar(cond, scope) for cond in gen.ifs):
                    out.append(_scalar(node.elt, scope))
            return out
    raise ValueError(
        f"'{ast.unparse(node)}' is not understood: give a list, range(...), list(range(...)), "
        "'+' of those, or [expression for i in range(...)]"
    )


def _scalar(node: ast.AST, scope: dict) -> Any:
    """One value: a constant, or arithmetic over constants and the comprehension's variable, evaluated
    by the space's own expression language (no eval of arbitrary code)."""
    if isinstance(node, ast.Constant):
        return node.value
    return Expression(ast.unparse(node))(scope)


def translate_condition(text: str) -> str:
    """A T1 condition in our expression language: C's &&, || and ! become and, or, not."""
    text = str(text).replace("&&", " and ").replace("||", " or ")
    text = re.sub(r"!(?!=)", " not ", text)
    text = re.sub(r"\btrue\b", "True", re.sub(r"\bfalse\b", "False", text))
    return re.sub(r"\s+", " ", text).strip()


def fold(tree: ast.AST) -> ast.AST:
    """Sub-expressions without free names evaluated to numbers (`max([15]) - 1` -> 14)."""

    class Fold(ast.NodeTransformer):
        def generic_visit(s, node: ast.AST) -> ast.AST:
            node = super().generic_visit(node)
            called = {id(n.func) for n in ast.walk(node) if isinstance(n, ast.Call)}
            free = [n for n in ast.walk(node) if isinstance(n, ast.Name) and id(n) not in called]
            if (
                isinstance(node, ast.expr)
                and not isinstance(node, (ast.Constant, ast.Name, ast.List, ast.Tuple))
                and not free
            ):
                try:
                    value = Expression(ast.unparse(node))({})
                except Exception:  # noqa: BLE001  (left as it is; the expression check says what is wrong)
                    return node
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    if isinstance(value, float) and value.is_integer():
                        value = int(value)
                    return ast.Constant(value)
            return node

    return Fold().visit(tree)


def group(text: str) -> str:
    """`text` as an operand: parenthesized unless it is a name or a number."""
    return text if re.fullmatch(r"[\w.]+", text) else f"({text})"
