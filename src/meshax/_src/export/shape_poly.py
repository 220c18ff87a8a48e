"""Symbolic dimensions (jax.export.symbolic_shape): polynomials over named dimension variables with integer
coefficients, floordiv and mod by constants, bounds from constraints, and comparisons decided by those bounds.

meshax traces programs for concrete shapes only: `export` raises NotImplementedError for arguments with
symbolic dimensions (export once per concrete shape instead).
"""
from __future__ import annotations

import ast
import math
from typing import Any, Sequence

Monomial = tuple  # sorted ((atom, power), ...): an atom is a variable name or ("floordiv" | "mod", expr, int)


class InconclusiveDimensionOperation(Exception):
    """A comparison or conversion of symbolic dimensions whose answer the known bounds don't decide."""


class SymbolicScope:
    """The variables and constraints that symbolic dimensions share; dimensions of different scopes don't mix."""

    def __init__(self, constraints_str: Sequence[str] = ()) -> None:
        if isinstance(constraints_str, str):
            raise ValueError(f"The symbolic constraints should be a sequence of strings. Got {constraints_str!r}")
        self.constraints = tuple(constraints_str)
        self._bounds: dict[str, tuple[float, float]] = {}
        for text in self.constraints:
            self._add_constraint(text)

    def __repr__(self) -> str:
        return f"SymbolicScope(constraints={list(self.constraints)})"

    def bounds_of(self, name: str) -> tuple[float, float]:
        return self._bounds.get(name, (1, math.inf))

    def _add_constraint(self, text: str) -> None:
        for op, flip in ((">=", "<="), ("<=", ">="), ("==", "==")):
            if op in text:
                left, right = (_parse(side.strip(), self) for side in text.split(op, 1))
                break
        else:
            raise ValueError(f"Constraint parsing error: must contain one of '==', '>=', '<=' in {text!r}.")
        if op == "<=":
            left, right = right, left  # now: left >= right
        for var_side, const_side, lower in ((left, right, True), (right, left, False)):
            name, constant = var_side.as_variable(), const_side.as_constant()
            if name is not None and constant is not None:
                lo, hi = self.bounds_of(name)
                if op == "==":
                    lo, hi = constant, constant
                elif lower:
                    lo = max(lo, constant)
                else:
                    hi = min(hi, constant)
                self._bounds[name] = (lo, hi)
                return


_DEFAULT_SCOPE = SymbolicScope()


class _DimExpr:
    """A symbolic dimension: {monomial: coefficient} in one scope."""

    __slots__ = ("terms", "scope")

    def __init__(self, terms: dict[Monomial, int], scope: SymbolicScope) -> None:
        self.terms = {m: c for m, c in terms.items() if c != 0}
        self.scope = scope

    # ---- construction and normal form ----
    @staticmethod
    def lift(x: Any, scope: SymbolicScope) -> "_DimExpr":
        if isinstance(x, _DimExpr):
            if x.scope is not scope:
                raise ValueError(f"Invalid mixing of symbolic scopes for {x} and its operand: create the dimensions "
                                 "with one SymbolicScope (pass scope=) so they can be combined.")
            return x
        if isinstance(x, int) or hasattr(x, "__index__"):
            return _DimExpr({(): int(x)}, scope)
        raise TypeError(f"Symbolic dimensions combine with integers and other symbolic dimensions; got {x!r}.")

    def _normal(self) -> "int | _DimExpr":
        constant = self.as_constant()
        return constant if constant is not None else self

    def as_constant(self) -> int | None:
        if not self.terms:
            return 0
        if set(self.terms) == {()}:
            return self.terms[()]
        return None

    def as_variable(self) -> str | None:
        if len(self.terms) == 1:
            (monomial, coefficient), = self.terms.items()
            if coefficient == 1 and len(monomial) == 1 and monomial[0][1] == 1 and isinstance(monomial[0][0], str):
                return monomial[0][0]
        return None

    # ---- arithmetic ----
    def __add__(self, other: Any) -> Any:
        other = _DimExpr.lift(other, self.scope)
        terms = dict(self.terms)
        for m, c in other.terms.items():
            terms[m] = terms.get(m, 0) + c
        return _DimExpr(terms, self.scope)._normal()

    __radd__ = __add__

    def __neg__(self) -> Any:
        return _DimExpr({m: -c for m, c in self.terms.items()}, self.scope)

    def __sub__(self, other: Any) -> Any:
        return self + (-_DimExpr.lift(other, self.scope))

    def __rsub__(self, other: Any) -> Any:
        return _DimExpr.lift(other, self.scope) - self

    def __mul__(self, other: Any) -> Any:
        other = _DimExpr.lift(other, self.scope)
        terms: dict[Monomial, int] = {}
        for m1, c1 in self.terms.items():
            for m2, c2 in other.terms.items():
                powers = dict(m1)
                for atom, p in m2:
                    powers[atom] = powers.get(atom, 0) + p
                m = tuple(sorted(powers.items(), key=lambda item: repr(item[0])))
                terms[m] = terms.get(m, 0) + c1 * c2
        return _DimExpr(terms, self.scope)._normal()

    __rmul__ = __mul__

    def __floordiv__(self, divisor: Any) -> Any:
        return self._divide("floordiv", divisor)

    def __mod__(self, divisor: Any) -> Any:
        return self._divide("mod", divisor)

    def __rfloordiv__(self, other: Any) -> Any:
        raise InconclusiveDimensionOperation(f"Symbolic dimension {self} as a divisor of {other} is not supported.")

    def _divide(self, kind: str, divisor: Any) -> Any:
        divisor = _DimExpr.lift(divisor, self.scope).as_constant()
        if not divisor:
            raise InconclusiveDimensionOperation(f"{kind}({self}, ...) needs a nonzero constant divisor.")
        if all(c % divisor == 0 for c in self.terms.values()):
            if kind == "mod":
                return 0
            return _DimExpr({m: c // divisor for m, c in self.terms.items()}, self.scope)._normal()
        return _DimExpr({(((kind, self, divisor), 1),): 1}, self.scope)

    # ---- bounds and comparisons ----
    def bounds(self) -> tuple[float, float]:
        lo, hi = 0, 0
        for monomial, coefficient in self.terms.items():
            m_lo, m_hi = 1, 1
            for atom, power in monomial:
                a_lo, a_hi = self._atom_bounds(atom)
                m_lo, m_hi = _interval_mul((m_lo, m_hi), (a_lo ** power, a_hi ** power))
            t_lo, t_hi = _interval_mul((m_lo, m_hi), (coefficient, coefficient))
            lo, hi = lo + t_lo, hi + t_hi
        return lo, hi

    def _atom_bounds(self, atom: Any) -> tuple[float, float]:
        if isinstance(atom, str):
            return self.scope.bounds_of(atom)
        kind, expr, divisor = atom
        if kind == "mod":
            return 0, abs(divisor) - 1
        lo, hi = expr.bounds()
        ends = [v // divisor if not math.isinf(v) else v * (1 if divisor > 0 else -1) for v in (lo, hi)]
        return min(ends), max(ends)

    def _decide(self, other: Any, what: str) -> tuple[float, float]:
        return _bounds_of(self - _DimExpr.lift(other, self.scope))

    def __ge__(self, other: Any) -> bool:
        lo, hi = self._decide(other, ">=")
        return _conclude(lo >= 0, hi < 0, f"'{self}' >= '{other}'")

    def __gt__(self, other: Any) -> bool:
        lo, hi = self._decide(other, ">")
        return _conclude(lo > 0, hi <= 0, f"'{self}' > '{other}'")

    def __le__(self, other: Any) -> bool:
        lo, hi = self._decide(other, "<=")
        return _conclude(hi <= 0, lo > 0, f"'{self}' <= '{other}'")

    def __lt__(self, other: Any) -> bool:
        lo, hi = self._decide(other, "<")
        return _conclude(hi < 0, lo >= 0, f"'{self}' < '{other}'")

    def __eq__(self, other: Any) -> bool:
        try:
            difference = self - _DimExpr.lift(other, self.scope)
        except (TypeError, ValueError):
            return False
        return isinstance(difference, int) and difference == 0

    def __ne__(self, other: Any) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return hash(str(self))

    def __int__(self) -> int:
        raise InconclusiveDimensionOperation(
            f"Symbolic dimension '{self}' used in a context that requires a constant; meshax traces for concrete "
            "shapes only: use integer dimensions.")

    __index__ = __int__

    # ---- printing ----
    def __str__(self) -> str:
        """Terms by decreasing degree, the constant last, as JAX prints them ("b^2 - 2*b + 1", "- b + 3")."""
        ordered = sorted(self.terms.items(), key=lambda t: (-sum(p for _, p in t[0]), _monomial_str(t[0])))
        out = ""
        for monomial, coefficient in ordered:
            magnitude = abs(coefficient)
            text = _monomial_str(monomial) if magnitude == 1 and monomial else \
                f"{magnitude}*{_monomial_str(monomial)}" if monomial else str(magnitude)
            sign = "-" if coefficient < 0 else "+"
            out = (f"- {text}" if sign == "-" else text) if not out else f"{out} {sign} {text}"
        return out or "0"

    __repr__ = __str__


def _monomial_str(monomial: Monomial) -> str:
    pieces = []
    for atom, power in monomial:
        text = atom if isinstance(atom, str) else f"{atom[0]}({atom[1]}, {atom[2]})"
        pieces.append(text if power == 1 else f"{text}^{power}")
    return "*".join(pieces)


def _interval_mul(a: tuple[float, float], b: tuple[float, float]) -> tuple[float, float]:
    products = [x * y if not ((x == 0 and math.isinf(y)) or (y == 0 and math.isinf(x))) else 0
                for x in a for y in b]
    return min(products), max(products)


def _bounds_of(value: Any) -> tuple[float, float]:
    return value.bounds() if isinstance(value, _DimExpr) else (value, value)


def _conclude(true: bool, false: bool, what: str) -> bool:
    if true:
        return True
    if false:
        return False
    raise InconclusiveDimensionOperation(f"Symbolic dimension comparison {what} is inconclusive.")


# ---- parsing ----

def _parse(text: str, scope: SymbolicScope) -> _DimExpr:
    try:
        tree = ast.parse(text.strip(), mode="eval").body
    except SyntaxError:
        raise ValueError(f"syntax error in symbolic dimension {text!r}: write integers, names, +, -, *, "
                         "floordiv(e, k) and mod(e, k).") from None
    return _DimExpr.lift(_evaluate(tree, text, scope), scope)


def _evaluate(node: ast.AST, text: str, scope: SymbolicScope) -> Any:
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.Name):
        return _DimExpr({((node.id, 1),): 1}, scope)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_DimExpr.lift(_evaluate(node.operand, text, scope), scope)
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Mod)):
        left = _DimExpr.lift(_evaluate(node.left, text, scope), scope)
        right = _evaluate(node.right, text, scope)
        operation = {ast.Add: "__add__", ast.Sub: "__sub__", ast.Mult: "__mul__", ast.FloorDiv: "__floordiv__",
                     ast.Mod: "__mod__"}[type(node.op)]
        return getattr(left, operation)(right)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("floordiv", "mod") \
            and len(node.args) == 2 and not node.keywords:
        left = _DimExpr.lift(_evaluate(node.args[0], text, scope), scope)
        return left._divide(node.func.id, _evaluate(node.args[1], text, scope))
    raise ValueError(f"syntax error in symbolic shape {text!r}: {ast.unparse(node)!r} is not an integer, a name, "
                     "or +, -, *, floordiv(e, k), mod(e, k) of them.")


def _split_dimensions(text: str) -> list[str]:
    """The dimensions of a shape's text: split at the commas outside parentheses."""
    pieces, depth, start = [], 0, 0
    for index, char in enumerate(text):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            pieces.append(text[start:index].strip())
            start = index + 1
    return pieces + [text[start:].strip()]


def symbolic_shape(shape_spec: str | None, *, constraints: Sequence[str] = (), scope: SymbolicScope | None = None,
                   like: Sequence[int | None] | None = None) -> tuple[Any, ...]:
    """The dimensions of a shape written as text ("b, 4", "(batch, 2*n)"): integers and symbolic dimensions; a
    dimension `_` takes its value from `like`."""
    if constraints and scope is not None:
        raise ValueError("Cannot use both `scope` and `constraints`: put the constraints in the scope.")
    scope = scope if scope is not None else (SymbolicScope(constraints) if constraints else _DEFAULT_SCOPE)
    text = (shape_spec or "").strip()
    if text.startswith("(") and text.endswith(")"):
        text = text[1:-1]
    pieces = _split_dimensions(text) if text else []
    if pieces and pieces[-1] == "" and len(pieces) > 1 and text.rstrip().endswith(","):
        pieces = pieces[:-1]
    dims = []
    for index, piece in enumerate(pieces):
        if piece == "":
            raise ValueError(f"syntax error in symbolic shape {shape_spec!r} in dimension {index}: empty dimension.")
        if piece == "_":
            if like is None or index >= len(like) or like[index] is None:
                raise ValueError(f"symbolic shape {shape_spec!r}: dimension {index} is '_' but `like` gives no "
                                 "value for it.")
            dims.append(int(like[index]))
            continue
        dim = _parse(piece, scope)._normal()
        if isinstance(dim, int) and like is not None and index < len(like) and like[index] not in (None, dim):
            raise ValueError(f"symbolic shape {shape_spec!r}: dimension {index} is {dim} and `like` says "
                             f"{like[index]}.")
        dims.append(dim)
    if like is not None and len(like) != len(dims):
        raise ValueError(f"symbolic shape {shape_spec!r} has {len(dims)} dimensions and `like` has {len(like)}.")
    return tuple(dims)


def symbolic_args_specs(args: Any, shapes_specs: Any, constraints: Sequence[str] = (),
                        scope: SymbolicScope | None = None) -> Any:
    """ShapeDtypeStruct-like specs of `args` with the shapes of `shapes_specs` (one string, or a pytree prefix of
    `args` of strings; None keeps an argument's shape)."""
    from ..transforms.shape_eval import ShapeDtypeStruct
    from ..tree.tree_util import prefix_leaves, tree_flatten, tree_unflatten

    if constraints and scope is None:
        scope = SymbolicScope(constraints)
    leaves, structure = tree_flatten(args)
    specs = prefix_leaves(shapes_specs, args, is_leaf=lambda s: s is None or isinstance(s, str)) \
        if not isinstance(shapes_specs, str) else [shapes_specs] * len(leaves)
    out = []
    for leaf, spec in zip(leaves, specs):
        struct = ShapeDtypeStruct.__new__(ShapeDtypeStruct)  # keeps symbolic dimensions (no int() of them)
        struct.shape = tuple(leaf.shape) if spec is None else symbolic_shape(spec, scope=scope,
                                                                             like=tuple(leaf.shape))
        struct.dtype, struct.sharding, struct.weak_type = leaf.dtype, getattr(leaf, "sharding", None), False
        out.append(struct)
    return tree_unflatten(structure, out)


def symbolic_dim_bounds(dimension: Any) -> tuple[float, float]:
    """The lower and upper bounds of a dimension (integers, or infinity) from its scope's constraints."""
    if isinstance(dimension, _DimExpr):
        return dimension.bounds()
    value = int(dimension)
    return value, value


def is_symbolic_dim(p: Any) -> bool:
    """Whether `p` is a symbolic dimension (not an integer)."""
    return isinstance(p, _DimExpr)


def has_symbolic_dims(shape: Any) -> bool:
    return any(isinstance(d, _DimExpr) for d in (shape or ()))
