"""Arithmetic expressions from YAML spaces (restrictions, launch geometry, metrics), checked once and
evaluated with nothing but their variables and a few math functions in scope.

The checker also bounds what an expression can cost, before it is ever evaluated (by us, or by Kernel Tuner,
which compiles restriction strings itself): the text, the size and depth of its tree, and the bits of every
integer it can make (`bits_bound`), so that no single operation (`9**9**9`, a chain of big multiplications,
a huge shift or repetition) can hang the tool. Every name is assumed to hold at most a 64-bit number (the
schema bounds parameter values and sizes so; the loader says which names may hold text)."""

import ast
import math
import re
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


MAX_TEXT = 2000  # characters
MAX_NODES = 300  # of the syntax tree (the longest restriction of the built-ins has about 60)
MAX_DEPTH = 40
MAX_BITS = 4096  # of any integer an expression can make
NAME_BITS = 64  # what a variable holds at most (schema: parameter values and sizes fit 64 bits)
FLOAT_BITS = 1024  # int() of a float: at most 2**1024
MAX_STRING = 256  # characters of a string literal
MAX_EXPONENT = 64  # what a variable read as an exponent or a shift may hold (checked before evaluating)


# C's spellings that CUDA programmers type first, and Python's, which expressions are written in
_C_OPERATORS = {"&&": "and", "||": "or", "!": "not", "a ? b : c": "b if a else c", "=": "=="}
_C_WORDS = {"true": "True", "false": "False", "NULL": "None"}


def _c_spelling_hint(text: str) -> str:
    """'; expressions are Python's: ...' where a syntax error comes from C's spellings (`a && b`, `!a`, `a ? b : c`,
    or `=` for a comparison)."""
    found = [c for c in ("&&", "||") if c in text]
    if "!" in text.replace("!=", ""):
        found.append("!")
    if "?" in text:
        found.append("a ? b : c")
    if re.search(r"(?<![=<>!])=(?!=)", text):
        found.append("=")
    if not found:
        return ""
    said = ", ".join(f"'{_C_OPERATORS[c]}' for C's '{c}'" if c != "=" else "'==' to compare" for c in found)
    return f"; expressions are Python's: {said}"


class Expression:
    """A parsed expression; `names` are the free variables it reads. A subclass widens the language by its
    class attributes (the syntax `nodes` and the `functions` in scope) and `_check` (tuner/space/array_expressions.py)."""

    nodes: tuple[type, ...] = _ALLOWED_NODES
    functions: dict = FUNCTIONS
    source = "<expression>"

    def __init__(self, text: str) -> None:
        self.text = str(text)
        if len(self.text) > MAX_TEXT:
            raise ValueError(f"an expression has at most {MAX_TEXT} characters, this one {len(self.text)}")
        try:
            tree = ast.parse(self.text, mode="eval")
        except SyntaxError as e:
            raise ValueError(f"not a valid expression: {e.msg}{_c_spelling_hint(self.text)}") from None
        except (RecursionError, MemoryError):
            raise ValueError(f"nested more than {MAX_DEPTH} levels deep") from None
        nodes = list(ast.walk(tree))
        if len(nodes) > MAX_NODES:
            raise ValueError(f"too long: {len(nodes)} syntax nodes, at most {MAX_NODES}")
        if _depth(tree) > MAX_DEPTH:
            raise ValueError(f"nested more than {MAX_DEPTH} levels deep")
        for node in nodes:
            if not isinstance(node, self.nodes):
                raise ValueError(f"'{type(node).__name__}' is not allowed in an expression")
            if isinstance(node, ast.Call) and not (isinstance(node.func, ast.Name) and node.func.id in self.functions):
                raise ValueError(f"only these functions may be called: {', '.join(sorted(self.functions))}")
            _check_bounded(node)
            self._check(node)
        self._tree = tree
        bits = bits_bound(tree.body)
        if bits > MAX_BITS:
            raise ValueError(f"its integers could reach {bits} bits (at most {MAX_BITS}): use smaller powers")
        self.names = self._free_names(tree)
        self.exponents = exponent_names(tree)
        self._code = compile(tree, self.source, "eval")
        # its globals, built once (not per call: a count evaluates an expression up to millions of times). Shared
        # by every call, yet no call can change them: the language has no assignment, no attribute but a few of
        # an array's data, and only functions that change nothing; its variables are a fresh dict per call
        self._globals = {"__builtins__": {}, **self.functions}

    def _check(self, node: ast.AST) -> None:
        """What a subclass refuses besides the syntax and the calls."""

    def _free_names(self, tree: ast.AST) -> set[str]:
        return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} - set(self.functions)

    def check_names(self, known: Iterable[str], texts: Iterable[str] = ()) -> None:
        """Every free name is `known`; those in `texts` (which may hold strings) are only compared, never
        computed with (`S * n` would repeat a string n times)."""
        unknown = sorted(self.names - set(known))
        if unknown:
            c_words = [n for n in unknown if n in _C_WORDS]
            hint = f" ({', '.join(f'{n} is {_C_WORDS[n]}' for n in c_words)} in Python)" if c_words else ""
            raise ValueError(f"unknown name(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}{hint}")
        texts = set(texts)
        for node in ast.walk(self._tree):
            if isinstance(node, (ast.BinOp, ast.UnaryOp, ast.Call)):
                operands = (
                    [node.left, node.right]
                    if isinstance(node, ast.BinOp)
                    else [node.operand]
                    if isinstance(node, ast.UnaryOp)
                    else list(node.args)
                )
                named = [o.id for o in operands if isinstance(o, ast.Name) and o.id in texts]
                if named:
                    raise ValueError(f"'{named[0]}' has text values: it can only be compared (==, !=, in)")

    def check_exponents(self, values: dict) -> None:
        """Every variable read as an exponent or a shift holds at most MAX_EXPONENT in magnitude, in every
        one of its possible `values` ({name: value or list of values}), which keeps `bits_bound` true."""
        for name in self.exponents & set(values):
            given = values[name] if isinstance(values[name], (list, tuple)) else [values[name]]
            for v in given:
                if not isinstance(v, (int, float)) or not abs(v) <= MAX_EXPONENT:
                    raise ValueError(f"'{name}' is an exponent or a shift here and holds {v!r}: at most {MAX_EXPONENT}")

    def __call__(self, variables: dict) -> Any:
        if self.exponents:
            self.check_exponents(variables)
        return eval(self._code, self._globals, dict(variables))

    def __repr__(self) -> str:
        return f"Expression({self.text!r})"


def _depth(node: ast.AST) -> int:
    """How deeply the tree nests (iteratively: a deep tree must not overflow our own stack)."""
    deepest, stack = 0, [(node, 1)]
    while stack:
        n, d = stack.pop()
        deepest = max(deepest, d)
        stack.extend((c, d + 1) for c in ast.iter_child_nodes(n))
    return deepest


def _constant_number(node: ast.AST) -> float | None:
    """The value of a number literal, signed or not; None for anything else."""
    sign = 1
    while isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        sign, node = (-sign if isinstance(node.op, ast.USub) else sign), node.operand
    value = node.value if isinstance(node, ast.Constant) else None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return sign * value
    return None


def _check_bounded(node: ast.AST) -> None:
    """What could make one operation unbounded whatever the values: a computed exponent or shift, a big or
    odd literal, arithmetic on a string literal or a list (repetition, %-formatting); a list's own size is
    bounded by the text."""
    if isinstance(node, ast.Constant):
        value = node.value
        if type(value) not in (int, float, str, bool):
            raise ValueError(f"the literal {value!r} is not a number, a string or a boolean")
        if type(value) is int and value.bit_length() > NAME_BITS:
            raise ValueError(f"the number {value} does not fit in {NAME_BITS} bits")
        if isinstance(value, str) and len(value) > MAX_STRING:
            raise ValueError(f"a string literal has at most {MAX_STRING} characters")
    if isinstance(node, ast.BinOp):
        if isinstance(node.op, (ast.Pow, ast.LShift)):
            what = "an exponent (**)" if isinstance(node.op, ast.Pow) else "a left shift (<<)"
            k = _constant_number(node.right)
            if _operand_name(node.right) is None and (k is None or not math.isfinite(k)):
                raise ValueError(f"{what} must be a finite number written out or a variable, not computed")
            if k is not None and isinstance(node.op, ast.LShift) and (type(k) is not int or not 0 <= k <= MAX_BITS):
                raise ValueError(f"a left shift (<<) takes a whole number 0..{MAX_BITS}, got {k}")
        for side in (node.left, node.right):
            if isinstance(side, (ast.List, ast.Tuple)) or (
                isinstance(side, ast.Constant) and isinstance(side.value, str)
            ):
                raise ValueError("arithmetic on a string or a list is not allowed (only comparisons)")


def _operand_name(node: ast.AST) -> str | None:
    """The variable an exponent or a shift reads, signed or not; None for anything else."""
    while isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        node = node.operand
    return node.id if isinstance(node, ast.Name) else None


def exponent_names(tree: ast.AST) -> set[str]:
    """The variables read as an exponent or a shift: each may hold at most MAX_EXPONENT (in magnitude)."""
    return {
        name
        for n in ast.walk(tree)
        if isinstance(n, ast.BinOp) and isinstance(n.op, (ast.Pow, ast.LShift))
        for name in [_operand_name(n.right)]
        if name is not None
    }


def bits_bound(node: ast.AST) -> int:
    """An upper bound on the bits of any integer `node` makes, each name holding at most NAME_BITS bits and
    int() of a float at most FLOAT_BITS (a float result is bounded by its type: it overflows, it never grows)."""
    if isinstance(node, ast.Constant):
        return abs(node.value).bit_length() if type(node.value) is int else 1
    if isinstance(node, ast.Name):
        return NAME_BITS
    if isinstance(node, ast.BinOp):
        left, right = bits_bound(node.left), bits_bound(node.right)
        k = MAX_EXPONENT if _operand_name(node.right) is not None else _constant_number(node.right) or 0
        if isinstance(node.op, ast.Pow):
            return left * max(1, math.ceil(abs(k)))
        if isinstance(node.op, ast.LShift):
            return left + int(k)
        if isinstance(node.op, ast.Mult):
            return left + right
        if isinstance(node.op, (ast.Add, ast.Sub, ast.BitOr, ast.BitXor, ast.BitAnd)):
            return max(left, right) + 1
        return left  # /, //, %, >>: no larger than the left operand (a quotient of floats is a float)
    if isinstance(node, ast.Call):
        args = [bits_bound(a) for a in node.args]
        if isinstance(node.func, ast.Name) and node.func.id in ("int", "ceil", "floor"):
            return max([FLOAT_BITS, *args])
        return max(args, default=1)
    children = [bits_bound(c) for c in ast.iter_child_nodes(node) if isinstance(c, ast.expr)]
    return max(children, default=1)
