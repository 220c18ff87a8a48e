"""Issue 39: jax.numpy's indexing, shape and search functions against real JAX (values, dtypes, weak types,
shapes and exception classes), eagerly, under jit, and under vmap and grad where they apply.

Each case is `case(L)` with `L` either `meshax` or `jax`; both run it and must agree: the same leaves (values,
dtype, weak type, shape), or the same exception class.
"""
from __future__ import annotations

import inspect
import warnings
from typing import Any, Callable

import jax
import numpy as np
import pytest

import meshax
import meshax.errors


def _outcome(case: Callable[[Any], Any], L: Any) -> tuple:
    """("ok", leaves) or ("raises", exception class name)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            result = case(L)
        except Exception as error:  # noqa: BLE001  (the class is what is compared)
            return "raises", type(error).__name__
    leaves = result if isinstance(result, (tuple, list)) else (result,)
    return "ok", [(np.asarray(x), np.asarray(x).dtype, bool(getattr(x, "weak_type", False)), np.shape(x))
                  for x in leaves]


def check(case: Callable[[Any], Any]) -> None:
    ours, theirs = _outcome(case, meshax), _outcome(case, jax)
    assert ours[0] == theirs[0], (ours, theirs)
    if ours[0] == "raises":
        assert ours[1] == theirs[1], (ours, theirs)
        return
    assert len(ours[1]) == len(theirs[1]), (ours, theirs)
    for (a, a_dtype, a_weak, a_shape), (b, b_dtype, b_weak, b_shape) in zip(ours[1], theirs[1]):
        assert (a_shape, a_dtype, a_weak) == (b_shape, b_dtype, b_weak), (ours, theirs)
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6, equal_nan=True)


def _cases(table: dict[str, Callable[[Any], Any]]) -> Any:
    return pytest.mark.parametrize("case", list(table.values()), ids=list(table))


# ---- 1. x.at[...] and its keywords ------------------------------------------------------------------------------------

def _index(L: Any, kind: Any) -> Any:
    return {"array": L.numpy.array([20, -1, -7, 1, 1]), "nested": np.array([[0, -2], [3, 3]]),
            "slice": slice(-3, None), "mask": np.array([True, False, True, False, True]),
            "tuple": (L.numpy.array([3, -1]),)}.get(kind, kind)


def _at_case(method: str, mode: Any, wrap: bool, kind: Any, jitted: bool) -> Callable[[Any], Any]:
    def case(L: Any) -> Any:
        def update(x: Any, v: Any) -> Any:
            ref = x.at[_index(L, kind)]
            if method == "get":
                return ref.get(mode=mode, wrap_negative_indices=wrap, fill_value=-5.0 if wrap else None)
            return getattr(ref, method)(v, mode=mode, wrap_negative_indices=wrap)
        return (L.jit(update) if jitted else update)(L.numpy.arange(1.0, 6.0), L.numpy.asarray(2.0))
    return case


AT_CASES = {f"{m}-{mode}-wrap{w}-{k}-{'jit' if j else 'eager'}": _at_case(m, mode, w, k, j)
            for m in ("get", "set", "add", "subtract", "divide", "power", "max")
            for mode in (None, "clip", "drop", "fill", "promise_in_bounds", "wrap")
            for w in (True, False) for k in (20, -20, -1, "array", "slice", "mask", "tuple") for j in (False, True)
            if not j or k == "array"}
AT_CASES.update({
    "brief-add-clip": lambda L: L.numpy.arange(5).at[20].add(10, mode="clip"),
    "brief-set-no-wrap-drop": lambda L: L.numpy.arange(5).at[-1].set(99, wrap_negative_indices=False, mode="drop"),
    "get-fill-value": lambda L: L.numpy.arange(5).at[L.numpy.array([9, -1, -7])].get(mode="fill", fill_value=-1),
    "get-fill-value-ignored-when-clipping": lambda L: L.numpy.arange(5).at[L.numpy.array([9])].get(fill_value=-1),
    "get-new-axis-fill": lambda L: L.numpy.arange(5).at[None, 7].get(mode="fill", fill_value=-1),
    "mode-enum": lambda L: L.numpy.arange(5).at[9].add(1, mode=L.lax.GatherScatterMode.CLIP),
    "mode-uppercase-rejected": lambda L: L.numpy.arange(5).at[9].add(1, mode="CLIP"),
    "int-divide-gives-floats": lambda L: L.numpy.arange(1, 6).at[L.numpy.array([0, 0])].divide(2),
    "int-power": lambda L: L.numpy.arange(1, 6).at[L.numpy.array([1, 1])].power(2),
    "weak-operand-stays-weak": lambda L: L.numpy.asarray(3.0).at[()].add(L.numpy.float32(2)),
    "mul-alias": lambda L: L.numpy.arange(1, 6).at[2].mul(3, mode="clip"),
    "apply-repeated": lambda L: L.numpy.arange(1.0, 6.0).at[L.numpy.array([0, 0, 2, 9])].apply(lambda v: v * 10),
    "apply-clip": lambda L: L.numpy.arange(1.0, 6.0).at[L.numpy.array([0, 0, 2, 9])].apply(lambda v: v * 10,
                                                                                             mode="clip"),
    "apply-no-wrap": lambda L: L.numpy.arange(1.0, 6.0).at[L.numpy.array([-1, 0])].apply(
        L.numpy.negative, wrap_negative_indices=False),
    "apply-jit-traced-repeated": lambda L: L.jit(lambda x, i: x.at[i].apply(lambda v: v * 10))(
        L.numpy.arange(1.0, 6.0), L.numpy.array([1, 1, 3])),
    "apply-slice": lambda L: L.numpy.arange(1.0, 6.0).at[1:3].apply(L.numpy.negative),
    "2d-array-clip": lambda L: L.numpy.zeros((3, 4)).at[1:, L.numpy.array([0, 5])].set(1.0, mode="clip"),
    "2d-static-clip": lambda L: L.numpy.zeros((3, 3)).at[5, 1].set(1, mode="clip"),
    "2d-no-wrap": lambda L: L.numpy.zeros((3, 3)).at[L.numpy.array([-1, 0]), -2].set(1, wrap_negative_indices=False),
    "vmap-add-clip": lambda L: L.vmap(lambda x, i: x.at[i].add(10, mode="clip"))(
        L.numpy.zeros((3, 4)), L.numpy.array([0, 7, -9])),
    "vmap-get-fill": lambda L: L.vmap(lambda x, i: x.at[i].get(mode="fill", fill_value=-1.0))(
        L.numpy.ones((3, 4)), L.numpy.array([0, 7, -9])),
    "grad-add-clip": lambda L: L.grad(lambda v: L.numpy.sum(
        L.numpy.arange(5.0).at[L.numpy.array([1, 9])].add(v, mode="clip") ** 2))(3.0),
    "grad-get-fill-no-wrap": lambda L: L.grad(lambda x: L.numpy.sum(x.at[L.numpy.array([1, 9, -1])].get(
        mode="fill", fill_value=0.0, wrap_negative_indices=False) ** 2))(L.numpy.arange(5.0)),
})


@_cases(AT_CASES)
def test_at_methods_honour_every_keyword(case: Callable[[Any], Any]) -> None:
    check(case)


def test_at_methods_take_jax_keywords() -> None:
    from jax._src.numpy.array_methods import _IndexUpdateRef as JaxRef

    ours = type(meshax.numpy.arange(3).at[0])
    for name in ("get", "set", "add", "subtract", "multiply", "mul", "divide", "power", "min", "max", "apply"):
        theirs = set(inspect.signature(getattr(JaxRef, name)).parameters) - {"self"}
        assert theirs <= set(inspect.signature(getattr(ours, name)).parameters), name


def test_at_out_sharding_is_refused_not_ignored() -> None:
    x = meshax.numpy.arange(4.0)
    with pytest.raises(NotImplementedError, match="out_sharding"):
        x.at[0].set(1.0, out_sharding=meshax.sharding.PartitionSpec())


# ---- 2.-4. reshape/ravel order, expand_dims, size/shape/ndim ---------------------------------------------------------

SHAPE_CASES = {}
for _o in "CFAKX":
    SHAPE_CASES[f"reshape-{_o}"] = lambda L, o=_o: L.numpy.reshape(L.numpy.arange(6), (2, 3), order=o)
    SHAPE_CASES[f"reshape-3d-{_o}"] = lambda L, o=_o: L.numpy.reshape(L.numpy.arange(24).reshape(2, 3, 4), (4, -1),
                                                                      order=o)
    SHAPE_CASES[f"ravel-{_o}"] = lambda L, o=_o: L.numpy.ravel(L.numpy.arange(6).reshape(2, 3), order=o)
    SHAPE_CASES[f"ravel-jit-{_o}"] = lambda L, o=_o: L.jit(lambda x: L.numpy.ravel(x, order=o))(
        L.numpy.arange(6).reshape(2, 3))
    SHAPE_CASES[f"reshape-vmap-{_o}"] = lambda L, o=_o: L.vmap(lambda x: L.numpy.reshape(x, (3, 2), order=o))(
        L.numpy.arange(12.0).reshape(2, 6))
SHAPE_CASES.update({
    "reshape-grad-F": lambda L: L.grad(lambda x: (L.numpy.reshape(x, (3, 2), order="F")[0] ** 2).sum())(
        L.numpy.arange(6.0)),
    "ravel-method-F": lambda L: L.numpy.arange(6).reshape(2, 3).ravel(order="F"),
    "flatten-method-F": lambda L: L.numpy.arange(6).reshape(2, 3).flatten(order="F"),
    "reshape-copy": lambda L: L.numpy.reshape(L.numpy.arange(6), 6, copy=False),
    "reshape-newshape-rejected": lambda L: L.numpy.reshape(L.numpy.arange(6), newshape=6),
})
for _axis in (range(2), (0, 1), [0, -1], np.array([0, 1]), (-1, 0), (0, 0), 5, -1, (3,), range(0)):
    SHAPE_CASES[f"expand_dims-{_axis!r}"] = lambda L, a=_axis: L.numpy.expand_dims(L.numpy.zeros((3, 4)), a)
    SHAPE_CASES[f"expand_dims-jit-{_axis!r}"] = lambda L, a=_axis: L.jit(lambda x: L.numpy.expand_dims(x, a))(
        L.numpy.zeros((3, 4)))
for _axis in (None, (1,), (0, 1), -1, 5, (), [0, 1], (0, 0), np.int64(1)):
    SHAPE_CASES[f"size-{_axis!r}"] = lambda L, a=_axis: L.numpy.size(L.numpy.zeros((3, 4)), axis=a)
    SHAPE_CASES[f"size-jit-{_axis!r}"] = lambda L, a=_axis: L.jit(lambda x: L.numpy.size(x, axis=a))(
        L.numpy.zeros((3, 4)))
SHAPE_CASES.update({
    "size-list": lambda L: L.numpy.size([[1, 2], [3, 4]], axis=0),
    "size-scalar": lambda L: L.numpy.size(3.0),
    "shape-list": lambda L: L.numpy.shape([[1, 2, 3]]),
    "ndim-list": lambda L: L.numpy.ndim([[1, 2, 3]]),
    "ndim-scalar": lambda L: L.numpy.ndim(3),
    "shape-ndim-jit": lambda L: L.jit(lambda x: L.numpy.shape(x)[0] + L.numpy.ndim(x))(L.numpy.zeros((3, 4))),
})


@_cases(SHAPE_CASES)
def test_order_expand_dims_and_size(case: Callable[[Any], Any]) -> None:
    check(case)


def test_size_returns_a_python_int() -> None:
    assert type(meshax.numpy.size(meshax.numpy.zeros((3, 4)), axis=(1,))) is int


# ---- 5. pad modes -----------------------------------------------------------------------------------------------------

def _pad_function(vector: Any, pad_width: Any, iaxis: int, kwargs: dict) -> Any:
    vector = vector.at[:pad_width[0]].set(kwargs.get("v", 10))
    return vector.at[vector.shape[0] - pad_width[1]:].set(-1)


def _vec(L: Any) -> Any:
    return L.numpy.array([1.0, 2.0, 4.0, 7.0])


def _ivec(L: Any) -> Any:
    return L.numpy.array([1, 2, 4, 7])


def _mat(L: Any) -> Any:
    return L.numpy.arange(6.0).reshape(2, 3)


PAD_CASES = {}
for _mode in ("mean", "maximum", "minimum", "median"):
    for _length in (None, 1, 2, 3, ((1, 3),), 9, 0):
        for _name, _make in (("float", _vec), ("int", _ivec)):
            PAD_CASES[f"{_mode}-{_length}-{_name}"] = lambda L, m=_mode, s=_length, make=_make: L.numpy.pad(
                make(L), (2, 3), mode=m, **({} if s is None else {"stat_length": s}))
    PAD_CASES[f"{_mode}-2d"] = lambda L, m=_mode: L.numpy.pad(_mat(L), ((1, 0), (0, 2)), mode=m)
    PAD_CASES[f"{_mode}-2d-int"] = lambda L, m=_mode: L.numpy.pad(
        L.numpy.array([[1, 5, 2], [8, 3, 3]]), ((1, 2), (2, 1)), mode=m, stat_length=2)
    PAD_CASES[f"{_mode}-jit"] = lambda L, m=_mode: L.jit(lambda a: L.numpy.pad(a, 2, mode=m, stat_length=2))(_mat(L))
    PAD_CASES[f"{_mode}-grad"] = lambda L, m=_mode: L.grad(
        lambda a: (L.numpy.pad(a, 2, mode=m, stat_length=3) ** 2).sum())(_vec(L))
    PAD_CASES[f"{_mode}-vmap"] = lambda L, m=_mode: L.vmap(lambda a: L.numpy.pad(a, 2, mode=m))(_mat(L))
    PAD_CASES[f"{_mode}-weak"] = lambda L, m=_mode: L.numpy.pad(L.numpy.asarray(2.0).reshape(1), 1, mode=m)
for _ends in (None, 3, (5, -3), 2.5):
    for _name, _make in (("float", _vec), ("int", _ivec)):
        PAD_CASES[f"linear_ramp-{_ends}-{_name}"] = lambda L, e=_ends, make=_make: L.numpy.pad(
            make(L), 3, mode="linear_ramp", **({} if e is None else {"end_values": e}))
PAD_CASES.update({
    "linear_ramp-2d": lambda L: L.numpy.pad(_mat(L), 2, mode="linear_ramp", end_values=((1, 2), (3, 4))),
    "linear_ramp-jit": lambda L: L.jit(lambda a: L.numpy.pad(a, 2, mode="linear_ramp", end_values=(5, -3)))(_vec(L)),
    "linear_ramp-grad": lambda L: L.grad(
        lambda a: (L.numpy.pad(a, 2, mode="linear_ramp", end_values=(5, -3)) ** 2).sum())(_vec(L)),
})
for _mode in ("reflect", "symmetric"):
    for _kind in ("even", "odd"):
        for _width in (1, 3, 6, 7, (0, 9)):
            PAD_CASES[f"{_mode}-{_kind}-{_width}"] = lambda L, m=_mode, k=_kind, w=_width: L.numpy.pad(
                _vec(L), w, mode=m, reflect_type=k)
            PAD_CASES[f"{_mode}-{_kind}-{_width}-int"] = lambda L, m=_mode, k=_kind, w=_width: L.numpy.pad(
                _ivec(L), w, mode=m, reflect_type=k)
        PAD_CASES[f"{_mode}-{_kind}-2d"] = lambda L, m=_mode, k=_kind: L.numpy.pad(
            _mat(L), ((1, 2), (3, 1)), mode=m, reflect_type=k)
        PAD_CASES[f"{_mode}-{_kind}-jit"] = lambda L, m=_mode, k=_kind: L.jit(
            lambda a: L.numpy.pad(a, 3, mode=m, reflect_type=k))(_mat(L))
        PAD_CASES[f"{_mode}-{_kind}-grad"] = lambda L, m=_mode, k=_kind: L.grad(
            lambda a: (L.numpy.pad(a, 5, mode=m, reflect_type=k) ** 2).sum())(_vec(L))
    PAD_CASES[f"{_mode}-odd-one-element"] = lambda L, m=_mode: L.numpy.pad(L.numpy.array([3.0]), 2, mode=m,
                                                                           reflect_type="odd")
for _mode in ("edge", "wrap"):
    PAD_CASES[f"{_mode}-grad"] = lambda L, m=_mode: L.grad(lambda a: (L.numpy.pad(a, 5, mode=m) ** 2).sum())(_vec(L))
PAD_CASES.update({
    "empty": lambda L: L.numpy.pad(_vec(L), 2, mode="empty"),
    "unsupported-keyword": lambda L: L.numpy.pad(_vec(L), 2, mode="edge", stat_length=3),
    "unknown-keyword": lambda L: L.numpy.pad(_vec(L), 2, mode="constant", foo=3),
    "unknown-mode": lambda L: L.numpy.pad(_vec(L), 2, mode="foo"),
    "constant-pairs": lambda L: L.numpy.pad(_ivec(L), 1, constant_values=((1, 2),)),
    "wrap": lambda L: L.numpy.pad(_vec(L), 5, mode="wrap"),
    "edge": lambda L: L.numpy.pad(_mat(L), (1, 2), mode="edge"),
    "callable": lambda L: L.numpy.pad(_mat(L), 1, mode=_pad_function, v=7),
    "callable-jit": lambda L: L.jit(lambda a: L.numpy.pad(a, 1, mode=_pad_function))(_mat(L)),
    "callable-1d": lambda L: L.numpy.pad(_vec(L), (2, 1), mode=_pad_function),
    "callable-grad": lambda L: L.grad(lambda a: (L.numpy.pad(a, (2, 1), mode=_pad_function) ** 2).sum())(_vec(L)),
    "callable-uneven-widths": lambda L: L.numpy.pad(_mat(L), ((0, 1), (2, 0)), mode=_pad_function, v=3),
    "traced-pad-width": lambda L: L.jit(lambda a, p: L.numpy.pad(a, p))(_vec(L), 2),
})


@_cases(PAD_CASES)
def test_pad_modes(case: Callable[[Any], Any]) -> None:
    check(case)


# ---- 6.-7. delete, extract/compress, repeat, unique, argwhere, nonzero, bincount ---------------------------------------

def _x6(L: Any) -> Any:
    return L.numpy.arange(6)


def _c6(L: Any) -> Any:
    return L.numpy.array([True, False, True, True, False, True])


def _u(L: Any) -> Any:
    return L.numpy.array([3, 1, 3, 2, 1, 5])


def _nans(L: Any) -> Any:
    return L.numpy.array([1.0, np.nan, np.nan, 2.0])


SEARCH_CASES = {
    "delete-assume-unique": lambda L: L.numpy.delete(_x6(L), L.numpy.array([1, 3]), assume_unique_indices=True),
    "delete-assume-unique-jit": lambda L: L.jit(lambda a, i: L.numpy.delete(a, i, assume_unique_indices=True))(
        _x6(L), L.numpy.array([1, 3])),
    "delete-traced-raises": lambda L: L.jit(lambda a, i: L.numpy.delete(a, i))(_x6(L), L.numpy.array([1, 3])),
    "delete-traced-int-raises": lambda L: L.jit(lambda a, i: L.numpy.delete(a, i))(_x6(L), 2),
    "delete-list-rejected": lambda L: L.numpy.delete(_x6(L), [1, 1, -1]),
    "delete-mask": lambda L: L.numpy.delete(_x6(L), np.array([True, False, True, False, False, False])),
    "delete-mask-wrong-length": lambda L: L.numpy.delete(_x6(L), np.array([True, False])),
    "delete-assume-unique-negative": lambda L: L.numpy.delete(_x6(L), L.numpy.array([-1, 0]),
                                                              assume_unique_indices=True),
    "delete-assume-unique-int": lambda L: L.numpy.delete(_x6(L), 2, assume_unique_indices=True),
    "delete-slice": lambda L: L.numpy.delete(_x6(L), slice(1, None, 2)),
    "delete-float-rejected": lambda L: L.numpy.delete(_x6(L), 1.0),
    "delete-out-of-bounds": lambda L: L.numpy.delete(_x6(L), 9),
    "delete-out-of-bounds-array": lambda L: L.numpy.delete(_x6(L), np.array([1, 9])),
    "delete-repeated": lambda L: L.numpy.delete(_x6(L), np.array([1, 1, -1])),
    "delete-axis": lambda L: L.numpy.delete(_x6(L).reshape(2, 3), np.array([0]), axis=1),
    "delete-assume-unique-axis-jit": lambda L: L.jit(lambda a, i: L.numpy.delete(
        a, i, axis=1, assume_unique_indices=True))(_x6(L).reshape(2, 3), L.numpy.array([2])),
    "delete-assume-unique-vmap": lambda L: L.vmap(lambda a, i: L.numpy.delete(a, i, assume_unique_indices=True))(
        _x6(L).reshape(2, 3), L.numpy.array([0, 2])),
    "delete-assume-unique-grad": lambda L: L.grad(lambda a: (L.numpy.delete(
        a, L.numpy.array([1]), assume_unique_indices=True) ** 2).sum())(L.numpy.arange(3.0)),
    "extract-size-jit": lambda L: L.jit(lambda c, a: L.numpy.extract(c, a, size=3, fill_value=-1))(_c6(L), _x6(L)),
    "extract-size-padded-jit": lambda L: L.jit(lambda c, a: L.numpy.extract(c, a, size=6, fill_value=-1))(
        _c6(L), _x6(L)),
    "extract-size-too-big": lambda L: L.jit(lambda c, a: L.numpy.extract(c, a, size=8))(_c6(L), _x6(L)),
    "extract-no-size-jit-raises": lambda L: L.jit(lambda c, a: L.numpy.extract(c, a))(_c6(L), _x6(L)),
    "extract-eager": lambda L: L.numpy.extract(_c6(L), _x6(L)),
    "extract-2d": lambda L: L.numpy.extract(_c6(L).reshape(2, 3), _x6(L).reshape(2, 3), size=5),
    "extract-short-condition": lambda L: L.numpy.extract(_c6(L)[:3], _x6(L)),
    "extract-long-condition": lambda L: L.numpy.extract(L.numpy.array([1, 0, 2, 0, 0, 0, 1]), _x6(L)),
    "extract-float-fill": lambda L: L.numpy.extract(_c6(L), L.numpy.arange(6.0), size=5, fill_value=2.5),
    "extract-vmap": lambda L: L.vmap(lambda c, a: L.numpy.extract(c, a, size=2))(_c6(L).reshape(2, 3),
                                                                                _x6(L).reshape(2, 3)),
    "compress-size-jit": lambda L: L.jit(lambda c, a: L.numpy.compress(c, a, size=5, fill_value=9))(_c6(L), _x6(L)),
    "compress-no-size-jit-raises": lambda L: L.jit(lambda c, a: L.numpy.compress(c, a))(_c6(L), _x6(L)),
    "compress-axis-size": lambda L: L.numpy.compress(L.numpy.array([False, True]), _x6(L).reshape(2, 3), axis=0,
                                                     size=2, fill_value=-3),
    "compress-long-true": lambda L: L.numpy.compress(L.numpy.array([True] * 7), _x6(L)),
    "compress-long-false": lambda L: L.numpy.compress(L.numpy.array([True] * 6 + [False]), _x6(L)),
    "compress-size-over-condition": lambda L: L.numpy.compress(L.numpy.array([True, False, True]),
                                                               _x6(L).reshape(2, 3), size=4),
    "compress-axis1-size": lambda L: L.numpy.compress(L.numpy.array([True, False, True]), _x6(L).reshape(2, 3),
                                                      axis=1, size=3, fill_value=-1),
    "compress-out-refused": lambda L: L.numpy.compress(L.numpy.array([1, 0, 2]), _x6(L), out=_x6(L)),
    "compress-2d-condition": lambda L: L.numpy.compress(L.numpy.array([[True]]), _x6(L)),
    "compress-grad": lambda L: L.grad(lambda a: L.numpy.compress(L.numpy.array([1, 0, 1]), a, size=3).sum())(
        L.numpy.arange(3.0)),
    "repeat-traced": lambda L: L.jit(lambda a, r: L.numpy.repeat(a, r, total_repeat_length=7))(
        L.numpy.arange(3), L.numpy.array([1, 2, 3])),
    "repeat-traced-cut": lambda L: L.jit(lambda a, r: L.numpy.repeat(a, r, total_repeat_length=4))(
        L.numpy.arange(3), L.numpy.array([1, 2, 3])),
    "repeat-traced-extended": lambda L: L.jit(lambda a, r: L.numpy.repeat(a, r, total_repeat_length=9))(
        L.numpy.arange(3), L.numpy.array([1, 2, 3])),
    "repeat-traced-scalar": lambda L: L.jit(lambda a, r: L.numpy.repeat(a, r, total_repeat_length=7))(
        L.numpy.arange(3), 2),
    "repeat-traced-no-length-raises": lambda L: L.jit(lambda a, r: L.numpy.repeat(a, r))(
        L.numpy.arange(3), L.numpy.array([1, 2, 3])),
    "repeat-traced-axis": lambda L: L.jit(lambda a, r: L.numpy.repeat(a, r, axis=1, total_repeat_length=5))(
        _x6(L).reshape(2, 3), L.numpy.array([1, 2, 1])),
    "repeat-static-cut": lambda L: L.numpy.repeat(L.numpy.arange(3), 2, total_repeat_length=4),
    "repeat-static-extended": lambda L: L.numpy.repeat(L.numpy.arange(3), 2, total_repeat_length=8),
    "repeat-all-zero": lambda L: L.numpy.repeat(L.numpy.arange(3), L.numpy.array([0, 0, 0]), total_repeat_length=2),
    "repeat-all-zero-jit": lambda L: L.jit(lambda r: L.numpy.repeat(L.numpy.arange(3), r, total_repeat_length=2))(
        L.numpy.array([0, 0, 0])),
    "repeat-last-zero": lambda L: L.numpy.repeat(L.numpy.arange(3), L.numpy.array([1, 2, 0]), total_repeat_length=5),
    "repeat-grad": lambda L: L.grad(lambda a: L.numpy.repeat(a, L.numpy.array([1, 2, 3]),
                                                              total_repeat_length=7).sum())(L.numpy.arange(3.0)),
    "repeat-grad-jit": lambda L: L.jit(L.grad(lambda a, r: L.numpy.repeat(a, r, total_repeat_length=7).sum()))(
        L.numpy.arange(3.0), L.numpy.array([1, 2, 3])),
    "repeat-float-repeats": lambda L: L.numpy.repeat(L.numpy.arange(3), 2.0),
    "repeat-list-rejected": lambda L: L.numpy.repeat(L.numpy.arange(3), [1, 2, 0]),
    "repeat-0d": lambda L: L.numpy.repeat(L.numpy.asarray(3), 2),
    "repeat-vmap": lambda L: L.vmap(lambda a, r: L.numpy.repeat(a, r, total_repeat_length=4))(
        _x6(L).reshape(2, 3), L.numpy.array([[1, 2, 1], [0, 3, 1]])),
    "unique-size-jit": lambda L: L.jit(lambda a: L.numpy.unique(a, size=3, fill_value=-1))(_u(L)),
    "unique-size-padded-jit": lambda L: L.jit(lambda a: L.numpy.unique(a, size=7, fill_value=-1))(_u(L)),
    "unique-size-default-fill": lambda L: L.jit(lambda a: L.numpy.unique(a, size=7))(_u(L)),
    "unique-all-outputs-jit": lambda L: L.jit(lambda a: L.numpy.unique(
        a, return_index=True, return_inverse=True, return_counts=True, size=6, fill_value=0))(_u(L)),
    "unique-all-outputs-cut-jit": lambda L: L.jit(lambda a: L.numpy.unique(
        a, return_index=True, return_inverse=True, return_counts=True, size=3))(_u(L)),
    "unique-all-outputs-eager": lambda L: L.numpy.unique(_u(L), return_index=True, return_inverse=True,
                                                         return_counts=True),
    "unique-no-size-jit-raises": lambda L: L.jit(lambda a: L.numpy.unique(a))(_u(L)),
    "unique-unsorted-allowed": lambda L: L.numpy.unique(_u(L), sorted=False),
    "unique-2d-inverse": lambda L: L.numpy.unique(_u(L).reshape(2, 3), return_inverse=True),
    "unique-2d-inverse-size-jit": lambda L: L.jit(lambda a: L.numpy.unique(a, return_inverse=True, size=2))(
        _u(L).reshape(2, 3)),
    "unique-axis-inverse": lambda L: L.numpy.unique(L.numpy.array([[1, 2], [1, 2], [0, 1]]), return_inverse=True,
                                                    axis=0),
    "unique-axis-size": lambda L: L.numpy.unique(L.numpy.array([[1, 2], [1, 2], [0, 1]]), axis=0, size=3,
                                                 fill_value=9),
    "unique-axis-size-all": lambda L: L.numpy.unique(L.numpy.array([[1, 2], [1, 2], [0, 1]]), True, True, True,
                                                     axis=0, size=3),
    "unique-nan": lambda L: L.numpy.unique(_nans(L)),
    "unique-nan-not-equal": lambda L: L.numpy.unique(_nans(L), equal_nan=False),
    "unique-nan-not-equal-size-jit": lambda L: L.jit(lambda a: L.numpy.unique(a, equal_nan=False, size=5))(_nans(L)),
    "unique-nan-counts-size-jit": lambda L: L.jit(lambda a: L.numpy.unique(a, size=4, return_counts=True))(_nans(L)),
    "unique-0d-weak": lambda L: L.numpy.unique(L.numpy.asarray(3)),
    "unique-weak-size": lambda L: L.numpy.unique(L.numpy.asarray(3.0), size=2),
    "unique-bool-size-jit": lambda L: L.jit(lambda a: L.numpy.unique(a, size=3, return_counts=True))(_c6(L)),
    "unique-vmap": lambda L: L.vmap(lambda a: L.numpy.unique(a, size=3, fill_value=0))(
        L.numpy.array([[1, 1, 2, 5], [4, 4, 4, 4]])),
    "unique_values-nans-distinct": lambda L: L.numpy.unique_values(_nans(L)),
    "unique_counts": lambda L: L.numpy.unique_counts(_u(L)),
    "unique_inverse-2d": lambda L: L.numpy.unique_inverse(_u(L).reshape(2, 3)),
    "unique_all-size-jit": lambda L: L.jit(lambda a: L.numpy.unique_all(a, size=6, fill_value=0))(_nans(L)),
    "argwhere-0d": lambda L: L.numpy.argwhere(L.numpy.asarray(3)),
    "argwhere-0d-false": lambda L: L.numpy.argwhere(L.numpy.asarray(0)),
    "argwhere-0d-size": lambda L: L.numpy.argwhere(L.numpy.asarray(3), size=2),
    "argwhere-0d-size-jit": lambda L: L.jit(lambda a: L.numpy.argwhere(a, size=2, fill_value=7))(L.numpy.asarray(3)),
    "argwhere-0d-jit-raises": lambda L: L.jit(lambda a: L.numpy.argwhere(a))(L.numpy.asarray(3)),
    "argwhere-jit-raises": lambda L: L.jit(lambda a: L.numpy.argwhere(a))(_u(L)),
    "argwhere-size-jit": lambda L: L.jit(lambda a: L.numpy.argwhere(a > 2, size=4, fill_value=-1))(
        _u(L).reshape(2, 3)),
    "nonzero-jit-raises": lambda L: L.jit(lambda a: L.numpy.nonzero(a))(_u(L)),
    "flatnonzero-jit-raises": lambda L: L.jit(lambda a: L.numpy.flatnonzero(a))(_u(L)),
    "where-one-argument-jit-raises": lambda L: L.jit(lambda a: L.numpy.where(a))(_u(L)),
    "where-one-argument-size-jit": lambda L: L.jit(lambda a: L.numpy.where(a > 2, size=3, fill_value=-1))(_u(L)),
    "where-three-arguments-size": lambda L: L.numpy.where(_u(L) > 1, _u(L), 0, size=3),
    "where-two-arguments": lambda L: L.numpy.where(_u(L) > 1, _u(L)),
    "nonzero-0d": lambda L: L.numpy.nonzero(L.numpy.asarray(3)),
    "nonzero-0d-size": lambda L: L.numpy.nonzero(L.numpy.asarray(3), size=2),
    "nonzero-fill-tuple": lambda L: L.numpy.nonzero(_u(L).reshape(2, 3) > 2, size=4, fill_value=(-1, -2)),
    "bincount-negative-length": lambda L: L.numpy.bincount(L.numpy.array([-1, 0, 1, 3]), length=5),
    "bincount-negative-eager": lambda L: L.numpy.bincount(L.numpy.array([-1, 0, 1, 3])),
    "bincount-weights-minlength": lambda L: L.numpy.bincount(L.numpy.array([-1, 0, 1, 3]),
                                                             weights=L.numpy.array([0.5, 1, 2, 3]), minlength=6),
    "bincount-int-weights": lambda L: L.numpy.bincount(L.numpy.array([0, 1]), weights=L.numpy.array([2, 3])),
    "bincount-bool-weights": lambda L: L.numpy.bincount(L.numpy.array([0, 1]), weights=L.numpy.array([True, True])),
    "bincount-past-length": lambda L: L.numpy.bincount(L.numpy.array([0, 1, 7]), length=3),
    "bincount-jit": lambda L: L.jit(lambda a: L.numpy.bincount(a, length=3))(L.numpy.array([0, 1, 7, -2])),
    "bincount-weights-jit": lambda L: L.jit(lambda a, w: L.numpy.bincount(a, w, length=3))(
        L.numpy.array([0, 1, 7, -2]), L.numpy.array([1.0, 2.0, 3.0, 4.0])),
    "bincount-no-length-jit-raises": lambda L: L.jit(lambda a: L.numpy.bincount(a))(L.numpy.array([0, 1, 7, -2])),
    "bincount-minlength-jit-raises": lambda L: L.jit(lambda a: L.numpy.bincount(a, minlength=4))(
        L.numpy.array([0, 1, 7, -2])),
    "bincount-float-rejected": lambda L: L.numpy.bincount(L.numpy.array([0.0, 1.0])),
    "bincount-2d-rejected": lambda L: L.numpy.bincount(L.numpy.array([[0, 1]])),
    "bincount-empty": lambda L: L.numpy.bincount(L.numpy.array([], dtype=np.int32)),
    "bincount-length-over-minlength": lambda L: L.numpy.bincount(L.numpy.array([0, 1]), minlength=5, length=3),
    "bincount-all-negative": lambda L: L.numpy.bincount(L.numpy.array([-1, -3])),
    "bincount-all-negative-minlength": lambda L: L.numpy.bincount(L.numpy.array([-1, -3]), minlength=2),
    "bincount-uint8": lambda L: L.numpy.bincount(L.numpy.array([0, 1], dtype=np.uint8)),
    "bincount-bool": lambda L: L.numpy.bincount(L.numpy.array([True, False])),
    "bincount-float16-weights": lambda L: L.numpy.bincount(L.numpy.array([0, 1]),
                                                           weights=L.numpy.array([1.0, 2.0], dtype=np.float16)),
    "bincount-grad": lambda L: L.grad(lambda w: (L.numpy.bincount(L.numpy.array([0, 1, 1, -1]), w, length=3) ** 2
                                                 ).sum())(L.numpy.arange(4.0)),
    "bincount-vmap": lambda L: L.vmap(lambda a: L.numpy.bincount(a, length=4))(L.numpy.array([[0, 1, 1], [3, -1, 9]])),
}


@_cases(SEARCH_CASES)
def test_data_dependent_shapes(case: Callable[[Any], Any]) -> None:
    check(case)


@pytest.mark.parametrize("function, call", [
    ("nonzero", lambda m, a: m.numpy.nonzero(a)), ("argwhere", lambda m, a: m.numpy.argwhere(a)),
    ("flatnonzero", lambda m, a: m.numpy.flatnonzero(a)), ("where", lambda m, a: m.numpy.where(a)),
    ("unique", lambda m, a: m.numpy.unique(a)), ("extract", lambda m, a: m.numpy.extract(a, a)),
    ("compress", lambda m, a: m.numpy.compress(a, a)),
])
def test_missing_size_under_jit_names_the_function_and_the_fix(function: str, call: Callable) -> None:
    with pytest.raises(meshax.errors.ConcretizationTypeError, match=f"(?s){function}.*size="):
        meshax.jit(lambda a: call(meshax, a))(meshax.numpy.array([3, 0, 2]))


# ---- lax.gather / lax.scatter* modes -----------------------------------------------------------------------------------

def _gather_numbers(L: Any) -> Any:
    return L.lax.GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0,))


def _scatter_numbers(L: Any) -> Any:
    return L.lax.ScatterDimensionNumbers(update_window_dims=(1,), inserted_window_dims=(0,),
                                         scatter_dims_to_operand_dims=(0,))


def _rows(L: Any) -> Any:
    return L.numpy.arange(12.0).reshape(4, 3)


def _starts(L: Any) -> Any:
    return L.numpy.array([[0], [3], [7], [-1]])


LAX_CASES = {}
for _mode in (None, "clip", "fill", "promise_in_bounds", "drop"):
    LAX_CASES[f"gather-{_mode}"] = lambda L, m=_mode: L.lax.gather(_rows(L), _starts(L), _gather_numbers(L), (1, 3),
                                                                   mode=m, fill_value=-1.0)
    for _op in ("scatter", "scatter_add", "scatter_sub", "scatter_mul", "scatter_min", "scatter_max"):
        LAX_CASES[f"{_op}-{_mode}"] = lambda L, m=_mode, op=_op: getattr(L.lax, op)(
            _rows(L), _starts(L), L.numpy.full((4, 3), 2.0), _scatter_numbers(L), mode=m)
    LAX_CASES[f"scatter_apply-repeated-{_mode}"] = lambda L, m=_mode: L.lax.scatter_apply(
        _rows(L), L.numpy.array([[0], [0], [7]]), lambda v: v * 10, _scatter_numbers(L), update_shape=(3, 3), mode=m)
LAX_CASES["scatter_apply-repeated-jit"] = lambda L: L.jit(lambda x, i: L.lax.scatter_apply(
    x, i, lambda v: v * 10, _scatter_numbers(L), update_shape=(2, 3)))(_rows(L), L.numpy.array([[1], [1]]))


@_cases(LAX_CASES)
def test_lax_gather_and_scatter_modes(case: Callable[[Any], Any]) -> None:
    check(case)


# ---- 8. keywords -------------------------------------------------------------------------------------------------------

KEYWORD_CASES = {
    "sort-kind": lambda L: L.numpy.sort(L.numpy.array([3, 1, 2]), kind="stable"),
    "sort-order": lambda L: L.numpy.sort(L.numpy.array([3, 1, 2]), order="a"),
    "sort-unstable-descending": lambda L: L.numpy.sort(L.numpy.array([3, 1, 2]), stable=False, descending=True),
    "argsort-dtype": lambda L: L.numpy.argsort(L.numpy.array([3, 1, 2]), dtype=np.int16),
    "argsort-dtype-descending": lambda L: L.numpy.argsort(L.numpy.array([3, 1, 2]), dtype=np.int16, descending=True),
    "argsort-kind": lambda L: L.numpy.argsort(L.numpy.array([3, 1, 2]), kind="heapsort"),
    "stack-out": lambda L: L.numpy.stack([L.numpy.arange(3)] * 2, out=L.numpy.arange(3)),
    "vstack-dtype": lambda L: L.numpy.vstack([L.numpy.arange(3)] * 2, dtype=np.float32),
    "hstack-dtype": lambda L: L.numpy.hstack([L.numpy.arange(3)] * 2, dtype=np.float32),
    "concat-no-dtype": lambda L: L.numpy.concat([L.numpy.arange(3)] * 2, dtype=np.float32),
    "broadcast_to-array-keyword": lambda L: L.numpy.broadcast_to(array=L.numpy.arange(3), shape=(2, 3)),
    "take-out": lambda L: L.numpy.take(L.numpy.arange(3), L.numpy.array([0]), out=L.numpy.arange(3)),
    "take-wrap": lambda L: L.numpy.take(L.numpy.arange(3), L.numpy.array([4, -4]), mode="wrap"),
    "take-raise": lambda L: L.numpy.take(L.numpy.arange(3), L.numpy.array([4]), mode="raise"),
    "take-bad-mode": lambda L: L.numpy.take(L.numpy.arange(3), L.numpy.array([4]), mode="bad"),
    "take-fill": lambda L: L.numpy.take(L.numpy.arange(3), L.numpy.array([4, -1]), fill_value=9),
    "take-hints": lambda L: L.numpy.take(L.numpy.arange(3), L.numpy.array([2, 0]), unique_indices=True,
                                         indices_are_sorted=True),
    "take_along_axis-no-wrap": lambda L: L.numpy.take_along_axis(L.numpy.arange(3), L.numpy.array([-1, 0]), axis=0,
                                                                 wrap_negative_indices=False),
    "take_along_axis-no-wrap-fill": lambda L: L.numpy.take_along_axis(
        L.numpy.arange(3), L.numpy.array([-1, 0]), axis=0, wrap_negative_indices=False, mode="fill", fill_value=7),
    "take_along_axis-no-wrap-clip": lambda L: L.numpy.take_along_axis(
        L.numpy.arange(3), L.numpy.array([-1, 0]), axis=0, wrap_negative_indices=False, mode="clip"),
    "take_along_axis-no-wrap-jit": lambda L: L.jit(lambda a, i: L.numpy.take_along_axis(
        a, i, axis=0, wrap_negative_indices=False))(L.numpy.arange(3), L.numpy.array([-1, 0])),
    "take_along_axis-default-axis": lambda L: L.numpy.take_along_axis(L.numpy.arange(6).reshape(2, 3),
                                                                      L.numpy.array([[2], [0]])),
    "searchsorted-bad-method": lambda L: L.numpy.searchsorted(L.numpy.arange(3), 2, method="bad"),
    "searchsorted-sort-method": lambda L: L.numpy.searchsorted(L.numpy.arange(3), 2, method="sort"),
    "isin-bad-method": lambda L: L.numpy.isin(L.numpy.arange(3), L.numpy.array([1]), method="bad"),
    "isin-sort-method": lambda L: L.numpy.isin(L.numpy.arange(3), L.numpy.array([1]), method="sort"),
    "lax-dynamic_index_in_dim-no-negative": lambda L: L.jit(lambda x, i: L.lax.dynamic_index_in_dim(
        x, i, allow_negative_indices=False))(L.numpy.arange(5.0), -1),
    "lax-dynamic_update_index_in_dim-no-negative": lambda L: L.lax.dynamic_update_index_in_dim(
        L.numpy.arange(5.0), 9.0, -1, 0, allow_negative_indices=False),
}


@_cases(KEYWORD_CASES)
def test_keywords(case: Callable[[Any], Any]) -> None:
    check(case)


def _functions(module: Any) -> list[tuple[str, Callable]]:
    return [(name, f) for name, f in vars(module).items()
            if not name.startswith("_") and inspect.isfunction(f) and f.__module__ == module.__name__]


def test_signatures_take_every_jax_keyword() -> None:
    """Every keyword JAX's function takes, meshax's takes too (and so honours it or refuses it by name)."""
    import jax.numpy as jjnp
    from meshax._src.lax import gather_scatter, slicing
    from meshax._src.numpy import indexing, searching, shape_ops

    missing = {}
    for module, namespace in ((indexing, jjnp), (shape_ops, jjnp), (searching, jjnp), (slicing, jax.lax),
                              (gather_scatter, jax.lax)):
        for name, ours in _functions(module):
            theirs = getattr(namespace, name, None)
            if theirs is None:
                continue
            wanted = {p for p in inspect.signature(theirs).parameters if p not in ("args", "kwargs")}
            lacking = wanted - set(inspect.signature(ours).parameters)
            if lacking:
                missing[f"{module.__name__}.{name}"] = sorted(lacking)
    assert not missing, missing
