"""The numbers of a T1 file as size variables of our space (ProblemSize, BenchmarkConfig sizes, array
sizes: one variable per distinct large number), and its expressions in our expression language, over them."""

from __future__ import annotations

import ast
from typing import NoReturn

from tuner.space.expressions import Expression
from tuner.workloads.t1.file import T1File
from tuner.workloads.t1.values import fold

SIZE_VAR_MIN = 64  # a number this large in the file is a problem size; smaller ones stay numbers


class SizeVariables:
    """What the import knows of the file's sizes: `sizes` (size variable -> its value in the file),
    `problem` (ProblemSize per dimension), `linked` (the numbers read as a size variable, for the notes),
    and `constants` (BenchmarkConfig)."""

    def __init__(self, t1: T1File) -> None:
        self.t1, self.doc, self.spec = t1, t1.doc, t1.spec
        # BenchmarkConfig: BAT's constants, in scope where it evaluates launch sizes
        self.constants = {
            k: v
            for k, v in (self.doc.get("BenchmarkConfig") or {}).items()
            if isinstance(v, (int, float)) and not isinstance(v, bool) and k.isidentifier()
        }
        self.sizes: dict[str, int] = {}  # size variable -> its value in the file
        self.problem: list | None = None  # ProblemSize per dimension: a size variable or a small number
        self.linked: dict[str, int] = {}  # size variable -> the number read as it, for the notes

    def fail(self, key_path: list, message: str) -> NoReturn:
        self.t1.fail(key_path, message)

    def expression(self, text: str, known: set, at: list, what: str, link_sizes: bool = False) -> str:
        """`text` in our expression language, over `known` names: BenchmarkConfig constants put in as
        numbers, and (with link_sizes) numbers equal to a problem size replaced by its size variable."""
        try:
            tree = ast.parse(text, mode="eval")
            Expression(text)  # our syntax whitelist, before any rewriting
        except (SyntaxError, ValueError) as e:
            msg = e.msg if isinstance(e, SyntaxError) else str(e)
            self.fail(at, f"'{text}' {what}: {msg}")
        changed = False
        sizes_by_value = {v: k for k, v in self.sizes.items() if v >= SIZE_VAR_MIN}
        for node in ast.walk(tree):
            for field, child in ast.iter_fields(node):
                for k, sub in enumerate(child if isinstance(child, list) else [child]):
                    new: ast.expr | None = None
                    if (
                        isinstance(sub, ast.Name)
                        and sub.id not in known
                        and sub.id not in self.sizes
                        and sub.id in self.constants
                    ):
                        new = ast.Constant(self.constants[sub.id])
                    elif (
                        link_sizes
                        and isinstance(sub, ast.Constant)
                        and type(sub.value) is int
                        and sub.value in sizes_by_value
                    ):
                        new = ast.Name(sizes_by_value[sub.value], ast.Load())
                        self.linked[sizes_by_value[sub.value]] = sub.value
                    if new is not None:
                        changed = True
                        if isinstance(child, list):
                            child[k] = new
                        else:
                            setattr(node, field, new)
        result = ast.unparse(tree) if changed else text
        try:
            Expression(result).check_names(known)
        except ValueError as e:
            self.fail(at, f"'{text}' {what}: {e}")
        return result

    def size_var(self, value: int, preferred: str | None = None, new: bool = False) -> str | int:
        """The size variable for a number of the file (one per distinct value, unless `new`: a variable of
        its own); a small number stays a number."""
        if value < SIZE_VAR_MIN:
            return value
        for k, v in self.sizes.items():
            if v == value and not new:
                return k
        taken = set(self.sizes) | {p["Name"] for p in self.doc["ConfigurationSpace"]["TuningParameters"]}
        taken |= {a.get("Name") for a in self.spec.get("Arguments", [])}
        candidates = [preferred] if preferred else []
        candidates += ["n"] + [f"n{i}" for i in range(2, 100)]
        name = next(c for c in candidates if c not in taken)
        self.sizes[name] = value
        return name

    def named_sizes(self, params: dict) -> None:
        """BenchmarkConfig entries that launch sizes or array sizes read (BAT's `dataSize`, say) are size
        variables under their own names, when large enough to be a size rather than a limit."""
        texts = [str(v) for v in self.spec["GlobalSize"].values()]
        texts += [a["Size"] for a in self.spec.get("Arguments") or [] if isinstance(a.get("Size"), str)]
        for text in texts:
            try:
                names = {n.id for n in ast.walk(ast.parse(text, mode="eval")) if isinstance(n, ast.Name)}
            except SyntaxError:
                continue  # said where the text is read
            for name in sorted(names):
                value = self.constants.get(name)
                if name not in params and name not in self.sizes and type(value) is int and value >= SIZE_VAR_MIN:
                    self.sizes[name] = value

    def problem_size(self) -> None:
        """Kernel Tuner's ProblemSize: one size variable per dimension (problem_x, problem_y, ...), equal
        values included, so that a size of another shape (not square) can be given."""
        if "ProblemSize" not in self.spec:
            return
        ps = self.spec["ProblemSize"]
        dims = ps if isinstance(ps, list) else [ps]
        if not 1 <= len(dims) <= 3:
            self.fail(["KernelSpecification", "ProblemSize"], "expected 1 to 3 dimensions")
        self.problem = []
        for i, d in enumerate(dims):
            if type(d) is not int or d < 1:
                self.fail(
                    ["KernelSpecification", "ProblemSize", *([i] if isinstance(ps, list) else [])],
                    f"expected a whole number >= 1, got {d!r} (expressions are not supported)",
                )
            self.problem.append(str(self.size_var(d, f"problem_{'xyz'[i]}", new=True)) if d >= SIZE_VAR_MIN else d)

    def size_expression(self, size: int | str, at: list, params: dict) -> str | int:
        """An argument's Size: a number (a size variable if large), or an expression over ProblemSize and
        the parameters (as Kernel Tuner reads it: a parameter stands for its list of values), folded to
        numbers and size variables."""
        if type(size) is int:
            if size < 0:
                self.fail(at, f"{size} is not a size")
            return self.size_var(size)
        try:
            tree = ast.parse(str(size), mode="eval")
        except SyntaxError as e:
            self.fail(at, f"'{size}' is not an expression: {e.msg}")

        class Rewrite(ast.NodeTransformer):
            def visit_Subscript(s, node: ast.Subscript) -> ast.AST:
                if (
                    isinstance(node.value, ast.Name)
                    and node.value.id == "ProblemSize"
                    and isinstance(node.slice, ast.Constant)
                    and isinstance(node.slice.value, int)
                ):
                    return self.problem_dim(node.slice.value, at)
                return s.generic_visit(node)

            def visit_Name(s, node: ast.Name) -> ast.AST:
                if node.id == "ProblemSize":
                    return self.problem_dim(0, at)
                if node.id in self.sizes:
                    return node
                if node.id in params:
                    return ast.List([ast.Constant(v) for v in params[node.id]], ast.Load())
                if node.id in self.constants:
                    return ast.Constant(self.constants[node.id])
                return node

        tree = ast.fix_missing_locations(Rewrite().visit(tree))
        text = ast.unparse(fold(tree))
        if text.isdigit():  # folded to a number (`max(filter_height)*max(filter_width)`): it stays one
            return int(text)
        return self.expression(text, set(self.sizes), at, "is not a size over ProblemSize")

    def problem_dim(self, i: int, at: list) -> ast.AST:
        if self.problem is None or i >= len(self.problem):
            self.fail(at, f"ProblemSize[{i}] is not given (KernelSpecification.ProblemSize)")
        d = self.problem[i]  # problem is set: i < len(problem)
        return ast.Name(d, ast.Load()) if isinstance(d, str) else ast.Constant(d)
