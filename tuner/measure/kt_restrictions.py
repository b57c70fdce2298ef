"""Restrictions as Kernel Tuner is given them: the text itself where its parser reads it exactly as the space's
checker does, else a python-constraint constraint that the checker evaluates (tuner.space.expressions), so a
restriction never means one thing when the space is counted and another when Kernel Tuner searches it."""

from __future__ import annotations

import ast
import builtins
import re
from collections.abc import Iterable, Sequence
from typing import Any

from constraint import Constraint, FunctionConstraint
from constraint.parser import extract_operators

from tuner.space.expressions import FUNCTIONS, Expression


def restrictions_for_kernel_tuner(texts: Iterable[str], params: dict) -> list:
    """Each restriction (checked text, tuner.space.expressions) as the text itself where Kernel Tuner reads that
    text exactly as our checker does (reads_exactly: its fast path, python-constraint's own constraints), else
    a CheckedRestriction, which our checker evaluates: never a text Kernel Tuner would refuse or misread."""
    out: list = []
    for text in texts:
        expr = Expression(text)
        out.append(text if reads_exactly(expr, params) else CheckedRestriction(text, list(params)))
    return out


# ---- what Kernel Tuner reads of a restriction's text ----------------------------------------------------------
# Kernel Tuner 1.5 gives restriction strings to python-constraint's parser (constraint.parser.parse_restrictions)
# when it builds a Searchspace, and evaluates them with its own eval (kernel_tuner.util.check_restriction, after
# putting each parameter's value, str(), in place of its name) when a simulation meets a config its cache lacks.
# The parser reads a text with regular expressions, not as Python:
#  - a text with " and " or " or " in it becomes a Python function of the text as written (exact, but in the
#    parser's scope: Python's builtins, none of ceil, floor, log2, sqrt);
#  - any other is split at every <, <=, >, >= it holds when it holds two or more (a chain, `2 <= a < 8`; it
#    breaks `(a > 2) == (b > 2)`, `a >> c >= 2`, `(1 << s) * t <= 16` and an unspaced chain), then each part
#    with one comparison is matched against a few shapes and made one of python-constraint's constraints:
#    `a * b <= 64` (MaxProdConstraint), `a <= b * c` (VariableMinProdConstraint), `a == 4` (ExactSumConstraint).
#    The matching sees only + - * / ** as operators and rewrites - and / across the comparison: `a % b == c`
#    became b + c == a, `a // 2 <= 3` a <= 9, `a != b != c` all different; names it does not know (ceil, abs,
#    min) are an error, and a part without a parameter a function Kernel Tuner calls with every parameter.
# reads_exactly accepts a text only in shapes the parser is known to read exactly (every other restriction
# reaches Kernel Tuner as a CheckedRestriction); tests/test_space_restrictions_kt.py checks the shapes against
# a brute force.

_BUILTIN_CALLS = frozenset({"min", "max", "abs", "int", "float"})  # Python's own: the same in every scope
# names a parameter may not have in a text Kernel Tuner reads: Python's (the parser evaluates a side of a
# comparison to see whether it is a number) and our functions'
_RESERVED = frozenset(dir(builtins)) | frozenset(FUNCTIONS)
_PLAIN = re.compile(r"[A-Za-z0-9_ .,()\[\]+\-*/%<>=!&|^~]+")  # no quotes, comments, backslashes, tabs or lines
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_COMPARATOR = re.compile(r"<=|>=|==|!=|<|>")
_CHAIN_SPLIT = re.compile(r"<=|>=|>|<")  # where the parser splits a text holding two or more (its own pattern)
_SYMBOLS = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">="}
_ORDERINGS = (ast.Lt, ast.LtE, ast.Gt, ast.GtE)
_INT = re.compile(r"[0-9]+")
_PRODUCT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\s*\*\s*[A-Za-z_][A-Za-z0-9_]*)+")
_SUM = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\s*\+\s*[A-Za-z_][A-Za-z0-9_]*)+")


def reads_exactly(expr: Expression, params: dict) -> bool:
    """Whether Kernel Tuner reads `expr`'s text (a restriction over `params`, name -> values) exactly as our
    checker does: a conservative rule over its syntax and its parameters' values (see above)."""
    text = expr.text
    if not _PLAIN.fullmatch(text):
        return False
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    called = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and not (isinstance(node.func, ast.Name) and node.func.id in _BUILTIN_CALLS):
            return False
        if isinstance(node, ast.Constant) and type(node.value) not in (int, float):
            return False  # a string or a boolean: other shapes to match
        if isinstance(node, ast.Name) and id(node) not in called:
            names.add(node.id)
    if not names or not names <= set(params) or names & _RESERVED:
        return False  # without a parameter Kernel Tuner calls it with all of them
    if not all(_IDENTIFIER.fullmatch(n) for n in names):
        return False  # the parser finds names as ASCII identifiers
    # non-negative numbers only: Kernel Tuner's eval puts str(value) in place of a name (-3 ** 2 is -9)
    if not all(type(v) in (int, float, bool) and v >= 0 for n in names for v in params[n]):
        return False
    if " and " in text or " or " in text:
        return True  # a Python function of the text as written, in the parser's scope (builtins only)
    if called:
        return False  # a name it does not know, where it matches shapes
    if not any(c in text for c in "<>=!"):
        return True  # no comparison to match: a function of the text as written
    body = tree.body
    if not isinstance(body, ast.Compare) or any(type(op) not in _SYMBOLS for op in body.ops):
        return False
    if _COMPARATOR.findall(text) != [_SYMBOLS[type(op)] for op in body.ops]:
        return False  # a comparison inside an operand, a shift: the parser would cut there
    if len(body.ops) == 1:
        return _reads_comparison(text, params)
    if not all(isinstance(op, _ORDERINGS) for op in body.ops):
        return False
    operands = [body.left, *body.comparators]
    for i, piece in enumerate(_chain_pieces(text)):
        try:
            got = ast.parse(piece, mode="eval").body
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return False
        want = ast.Compare(left=operands[i], ops=[body.ops[i]], comparators=[operands[i + 1]])
        if ast.dump(got) != ast.dump(want) or not _reads_comparison(piece, params):
            return False
    return True


def _chain_pieces(text: str) -> list[str]:
    """A chain of comparisons as the parser cuts it (to_multiple_restrictions): from one operator to the next,
    skipping the character after each."""
    at = [(m.start(), m.end()) for m in _CHAIN_SPLIT.finditer(text)]
    return [
        text[(at[i - 1][1] + 1 if i else 0) : (at[i + 1][0] if i < len(at) - 1 else len(text))].strip()
        for i in range(len(at))
    ]


def _reads_comparison(text: str, params: dict) -> bool:
    """One comparison, as the parser reads it after taking off brackets around the whole: the shapes it makes
    a constraint of, over distinct parameters with whole values (python-constraint's sums and products), or a
    shape it cannot make one of (a function of the text as written)."""
    text = text.strip()
    while text and text[0] == "(" and text[-1] == ")" and "(" not in text[1:]:
        text = text[1:-1].strip()
    found = list(_COMPARATOR.finditer(text))
    if len(found) != 1:
        return False
    op = found[0].group()
    sides = [text[: found[0].start()].strip(), text[found[0].end() :].strip()]
    kinds = [_side(side, params) for side in sides]
    named = [n for side in sides for n in _IDENTIFIER.findall(side) if n in params]
    if not named:
        return False  # a part without a parameter
    if op == "!=":
        return True  # no shape but a != b (python-constraint's AllDifferentConstraint, the same for two)
    whole = all(type(v) is int for n in named for v in params[n])
    distinct = len(named) == len(set(named))
    if "int" in kinds:
        other = kinds[1 - kinds.index("int")]
        if other == "other":  # no shape: unless the parser rewrites the other side (a - b, a // b)
            return set(extract_operators(sides[1 - kinds.index("int")])) not in ({"-"}, {"/"})
        if other == "int" or not (whole and distinct):
            return False
        n = int(sides[kinds.index("int")])
        # < and > are matched as <= and >= with 1e-12 added: exact where that falls between whole numbers
        return op not in ("<", ">") or (n - 1 < n - 1e-12 < n and n < n + 1e-12 < n + 1)
    return whole and distinct and "name" in kinds and "other" not in kinds  # a <= b, a == b * c, a + b >= c


def _side(text: str, params: dict) -> str:
    """What one side of a comparison is to the parser: a whole number written out, a parameter, a product or a
    sum of parameters, or other."""
    if _INT.fullmatch(text):
        return "int"
    if _IDENTIFIER.fullmatch(text):
        return "name" if text in params else "other"
    for kind, pattern in (("product", _PRODUCT), ("sum", _SUM)):
        if pattern.fullmatch(text) and all(n in params for n in _IDENTIFIER.findall(text)):
            return kind
    return "other"


class CheckedRestriction(FunctionConstraint):
    """A restriction Kernel Tuner is given as a python-constraint FunctionConstraint, evaluated by our checker
    (tuner.space.expressions), so it means what it meant when the space was counted. Kernel Tuner calls it with
    every parameter's value (a FunctionConstraint in its list; util.check_restriction); python-constraint's
    solver, once preProcess has narrowed it to the parameters it reads, as soon as those are set."""

    def __init__(self, text: str, param_names: Sequence[str]) -> None:
        self.text = text
        self.expression = Expression(text)
        self.param_names = tuple(param_names)
        self.names = tuple(n for n in self.param_names if n in self.expression.names)
        super().__init__(self.holds_for_values)

    def holds_for_values(self, *values: object) -> bool:
        """With every parameter's value, in the order of the space's parameters."""
        return bool(self.expression(dict(zip(self.param_names, values))))

    def __call__(self, variables: Sequence, domains: dict, assignments: dict, forwardcheck: Any = False) -> bool:
        try:
            config = {n: assignments[n] for n in self.names}
        except KeyError:
            return True  # not all set yet
        return bool(self.expression(config))

    def preProcess(self, variables: Sequence, domains: dict, constraints: list, vconstraints: dict) -> None:
        """Kernel Tuner adds a FunctionConstraint over every parameter: narrow it to those the restriction reads
        (the solver tests it as soon as they are set, and only when one of them changes)."""
        own = [v for v in variables if v in self.names]
        if own != list(variables):
            entry, narrowed = (self, variables), (self, own)
            constraints[constraints.index(entry)] = narrowed
            for v in variables:
                listed = vconstraints[v]
                i = next(i for i, c in enumerate(listed) if c[0] is self)
                if v in own:
                    listed[i] = narrowed
                else:
                    del listed[i]
            variables = own
        if not own:  # a constant: it holds for every config or for none
            constraints.remove((self, variables))
            if not self.expression({}):
                for domain in domains.values():
                    del domain[:]
            return
        Constraint.preProcess(self, variables, domains, constraints, vconstraints)  # one parameter: its values

    def __reduce__(self) -> tuple:
        return (CheckedRestriction, (self.text, self.param_names))

    def __deepcopy__(self, memo: dict) -> CheckedRestriction:
        return self  # nothing in it changes

    def __repr__(self) -> str:
        return f"CheckedRestriction({self.text!r})"
