"""Keywords of JAX 0.10's signatures that meshax honours, against real JAX: the special functions' parameter names
(lax.erfc(x=...), lax.igamma(a=..., x=...), ...), lax.mul's out_dtype, lax.dot's dimension_numbers and
preferred_element_type, cond's and switch's legacy operand=, lax.reduce's out_sharding, nn.standardize's where and
algorithm, nn.dot_product_attention's return_residual, and linalg.matrix_rank's (and svd's) hermitian. Values are
compared eagerly and under jit, and gradients where JAX defines them."""
from __future__ import annotations

from typing import Any, Callable

import jax
import numpy as np
import pytest
from jax.sharding import AxisType as JAxisType

import meshax
from meshax.sharding import AxisType
from differential import assert_matches

RNG = np.random.default_rng(8)
POSITIVE = np.array([0.3, 1.2, 2.5, 4.0], np.float32)
SIGNED = np.array([-2.0, -0.4, 0.7, 3.1], np.float32)
UNIT = np.array([0.1, 0.35, 0.6, 0.9], np.float32)


def _both(case: Callable[..., Any], *args: Any, jit: bool, rtol: float = 1e-5, atol: float = 1e-6,
          check_weak: bool = True) -> None:
    """`case(lib, *args)` in meshax (eagerly or jitted) and in JAX (likewise) agree."""
    def run(lib: Any) -> Any:
        arrays = tuple(lib.numpy.asarray(a) for a in args)
        if jit:
            return lib.jit(lambda *xs: case(lib, *xs))(*arrays)
        return case(lib, *arrays)

    assert_matches(run(meshax), run(jax), rtol=rtol, atol=atol, check_weak=check_weak)


def _same_error(case: Callable[..., Any], *args: Any) -> None:
    """`case` raises the same exception class in meshax as in JAX."""
    classes = []
    for lib in (meshax, jax):
        with pytest.raises(Exception) as error:  # noqa: PT011 - the class is what is compared
            case(lib, *(lib.numpy.asarray(a) for a in args))
        classes.append(type(error.value))
    assert classes[0] is classes[1] or issubclass(classes[0], classes[1]), classes


# ---- the special functions' parameter names ---------------------------------------------------------------------

SPECIAL_CASES = {
    "erfc": (lambda L, x: L.lax.erfc(x=x), (SIGNED,)),
    "lgamma": (lambda L, x: L.lax.lgamma(x=x), (POSITIVE,)),
    "digamma": (lambda L, x: L.lax.digamma(x=x), (POSITIVE,)),
    "polygamma": (lambda L, m, x: L.lax.polygamma(m=m, x=x), (np.float32([1, 2, 1, 3]), POSITIVE)),
    "igamma": (lambda L, a, x: L.lax.igamma(a=a, x=x), (POSITIVE[::-1].copy(), POSITIVE)),
    "igammac": (lambda L, a, x: L.lax.igammac(a=a, x=x), (POSITIVE[::-1].copy(), POSITIVE)),
    "zeta": (lambda L, x, q: L.lax.zeta(x=x, q=q), (np.float32([2, 3, 4.5, 6]), POSITIVE)),
    "betainc": (lambda L, a, b, x: L.lax.betainc(a=a, b=b, x=x), (POSITIVE, POSITIVE[::-1].copy(), UNIT)),
    "bessel_i0e": (lambda L, x: L.lax.bessel_i0e(x=x), (SIGNED,)),
    "bessel_i1e": (lambda L, x: L.lax.bessel_i1e(x=x), (SIGNED,)),
    "clz": (lambda L, x: L.lax.clz(x=x), (np.int32([0, 1, 255, -7]),)),
    "population_count": (lambda L, x: L.lax.population_count(x=x), (np.uint8([0, 1, 255, 96]),)),
    "nextafter": (lambda L, a, b: L.lax.nextafter(x1=a, x2=b), (SIGNED, np.float32([0, -1, 9, 3.1]))),
}

# d/d(last argument), where JAX defines it (not for zeta) and meshax implements it
SPECIAL_GRADS = {
    "erfc": lambda L, x: L.lax.erfc(x=x), "lgamma": lambda L, x: L.lax.lgamma(x=x),
    "digamma": lambda L, x: L.lax.digamma(x=x), "bessel_i0e": lambda L, x: L.lax.bessel_i0e(x=x),
    "bessel_i1e": lambda L, x: L.lax.bessel_i1e(x=x),
    "polygamma": lambda L, x: L.lax.polygamma(m=L.numpy.float32(1), x=x),
    "igamma": lambda L, x: L.lax.igamma(a=L.numpy.float32(1.5), x=x),
    "igammac": lambda L, x: L.lax.igammac(a=L.numpy.float32(1.5), x=x),
    "betainc": lambda L, x: L.lax.betainc(a=L.numpy.float32(2.0), b=L.numpy.float32(3.0), x=x),
}


@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
@pytest.mark.parametrize("name", sorted(SPECIAL_CASES))
def test_special_functions_take_jax_parameter_names(name: str, jit: bool) -> None:
    case, args = SPECIAL_CASES[name]
    _both(case, *args, jit=jit, rtol=2e-5, atol=1e-6)


@pytest.mark.parametrize("name", sorted(SPECIAL_CASES))
def test_special_functions_still_take_positional_operands(name: str) -> None:
    case, args = SPECIAL_CASES[name]
    function = getattr(meshax.lax, name)
    assert_matches(function(*(meshax.numpy.asarray(a) for a in args)), case(meshax, *map(meshax.numpy.asarray, args)))


@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
@pytest.mark.parametrize("name", sorted(SPECIAL_GRADS))
def test_special_function_gradients(name: str, jit: bool) -> None:
    function = SPECIAL_GRADS[name]
    point = UNIT if name == "betainc" else POSITIVE
    _both(lambda L, x: L.vmap(L.grad(lambda t: function(L, t)))(x), point, jit=jit, rtol=2e-4, atol=1e-5)


# ---- lax.mul's out_dtype -------------------------------------------------------------------------------------------

MUL_CASES = {
    "int8 to int32 (no overflow)": (lambda L, x, y: L.lax.mul(x, y, out_dtype=L.numpy.int32),
                                    (np.int8([100, -100, 7]), np.int8([100, 3, -9]))),
    "int8 to float32": (lambda L, x, y: L.lax.mul(x, y, out_dtype=L.numpy.float32),
                        (np.int8([100, -100, 7]), np.int8([100, 3, -9]))),
    "float32 to int8 (inputs truncated)": (lambda L, x, y: L.lax.mul(x, y, out_dtype=L.numpy.int8),
                                           (np.float32([1.7, -2.5, 3.9]), np.float32([2.5, 2.0, -1.2]))),
    "int8 to uint8 (wraps)": (lambda L, x, y: L.lax.mul(x, y, out_dtype=L.numpy.uint8),
                              (np.int8([-3, 5, 7]), np.int8([5, 5, 5]))),
    "mixed dtypes to float32": (lambda L, x, y: L.lax.mul(x, y, out_dtype=L.numpy.float32),
                                (np.int8([1, 2, 3]), np.float32([0.5, 1.5, 2.5]))),
    "float32 to float16": (lambda L, x, y: L.lax.mul(x, y, out_dtype=L.numpy.float16),
                           (np.float32([1.5, 1e-3, 3.0]), np.float32([3.0, 7.0, 1.0 / 3]))),
    "complex64 to float32 (real parts)": (lambda L, x, y: L.lax.mul(x, y, out_dtype=L.numpy.float32),
                                          (np.complex64([1 + 2j, -3j]), np.complex64([3, 2 - 1j]))),
    "weak scalars stay weak": (lambda L: L.lax.mul(2, 3, out_dtype=L.numpy.float32), ()),
    "one weak scalar": (lambda L, y: L.lax.mul(2.0, y, out_dtype=L.numpy.float32), (np.float16([1.5, 3.0]),)),
    "None keeps the dtype": (lambda L, x, y: L.lax.mul(x, y, out_dtype=None), (SIGNED, POSITIVE)),
}


@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
@pytest.mark.parametrize("name", sorted(MUL_CASES))
def test_mul_out_dtype(name: str, jit: bool) -> None:
    case, args = MUL_CASES[name]
    _both(case, *args, jit=jit)


@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
def test_mul_out_dtype_gradient(jit: bool) -> None:
    def case(L: Any, x: Any, y: Any) -> Any:
        loss = lambda a, b: L.numpy.sum(L.lax.mul(a, b, out_dtype=L.numpy.float32) ** 2)  # noqa: E731
        return L.grad(loss, argnums=(0, 1))(x, y)

    _both(case, np.float16([1.5, -2.0, 0.25]), np.float16([3.0, 0.5, -4.0]), jit=jit, rtol=1e-3)


def test_mul_without_out_dtype_still_refuses_mixed_dtypes() -> None:
    _same_error(lambda L, x, y: L.lax.mul(x, y), np.int8([1]), np.float32([1]))


# ---- lax.dot's dimension_numbers and preferred_element_type -------------------------------------------------------

A3 = RNG.standard_normal((4, 2, 3)).astype(np.float32)
B3 = RNG.standard_normal((4, 3, 5)).astype(np.float32)
DOT_CASES = {
    "batched dimension_numbers": (lambda L, a, b: L.lax.dot(a, b, dimension_numbers=(((2,), (1,)), ((0,), (0,)))),
                                  (A3, B3)),
    "contract the first dimensions": (lambda L, a, b: L.lax.dot(a, b, dimension_numbers=(((0,), (0,)), ((), ()))),
                                      (A3[:, 0], B3[:, 0])),
    "plain matrix product": (lambda L, a, b: L.lax.dot(a, b), (A3[0], B3[0])),
    "matrix-vector": (lambda L, a, b: L.lax.dot(a, b, precision=L.lax.Precision.HIGHEST), (A3[0], B3[0, :, 0])),
    "preferred_element_type int32": (lambda L, a, b: L.lax.dot(a, b, preferred_element_type=L.numpy.int32),
                                     (np.int8([[100, 100], [-100, 3]]), np.int8([[100, 2], [100, 1]]))),
    "preferred_element_type float32 of float16": (
        lambda L, a, b: L.lax.dot(a, b, preferred_element_type=L.numpy.float32),
        (A3[0].astype(np.float16), B3[0].astype(np.float16))),
}


@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
@pytest.mark.parametrize("name", sorted(DOT_CASES))
def test_dot_keywords(name: str, jit: bool) -> None:
    case, args = DOT_CASES[name]
    _both(case, *args, jit=jit, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
def test_dot_dimension_numbers_gradient(jit: bool) -> None:
    numbers = (((2,), (1,)), ((0,), (0,)))
    _both(lambda L, a, b: L.grad(lambda x, y: L.numpy.sum(L.numpy.sin(L.lax.dot(x, y, dimension_numbers=numbers))),
                                 argnums=(0, 1))(a, b), A3, B3, jit=jit, rtol=1e-5, atol=1e-5)


def test_dot_of_batches_needs_dimension_numbers_as_in_jax() -> None:
    _same_error(lambda L, a, b: L.lax.dot(a, b), A3, B3)


# ---- cond's and switch's legacy operand= ----------------------------------------------------------------------------

@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
@pytest.mark.parametrize("pred", [True, False])
def test_cond_operand_keyword(pred: bool, jit: bool) -> None:
    _both(lambda L, x: L.lax.cond(pred, lambda t: L.numpy.sin(t) * 2, lambda t: t - 1, operand=x), SIGNED, jit=jit)
    _both(lambda L, x: L.lax.cond(x[0] > 0 if pred else x[0] < 0, lambda t: t["a"] * 2, lambda t: t["a"] - 1,
                                  operand={"a": x}), SIGNED, jit=jit)


@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
@pytest.mark.parametrize("index", [-1, 0, 1, 2, 5])
def test_switch_operand_keyword(index: int, jit: bool) -> None:
    branches = [lambda t: t + 1, lambda t: t * 3, lambda t: -t]
    _both(lambda L, x: L.lax.switch(index, branches, operand=x), SIGNED, jit=jit)
    _both(lambda L, x, i: L.lax.switch(i, branches, operand=x), SIGNED, np.int32(index), jit=jit)


@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
def test_cond_and_switch_operand_keyword_gradients(jit: bool) -> None:
    _both(lambda L, x: L.grad(lambda t: L.numpy.sum(L.lax.cond(True, L.numpy.sin, L.numpy.cos, operand=t)))(x),
          SIGNED, jit=jit)
    _both(lambda L, x: L.grad(lambda t: L.numpy.sum(L.lax.switch(1, [L.numpy.sin, L.numpy.exp], operand=t)))(x),
          SIGNED, jit=jit)


def test_operand_keyword_with_positional_operands_is_refused_as_in_jax() -> None:
    _same_error(lambda L, x: L.lax.cond(True, lambda t: t, lambda t: t, x, operand=x), SIGNED)
    _same_error(lambda L, x: L.lax.switch(0, [lambda t: t], x, operand=x), SIGNED)


def test_operand_none_is_one_operand_as_in_jax() -> None:
    for lib in (meshax, jax):
        assert lib.lax.cond(True, lambda t: t is None, lambda t: False, operand=None)
        assert lib.lax.switch(0, [lambda t: t is None], operand=None)


# ---- lax.reduce's out_sharding -------------------------------------------------------------------------------------

def _on_explicit_mesh(lib: Any, types: Any, fn: Callable[[Any], Any], spec: Any, jitted: bool) -> tuple:
    """The type, sharding spec and values of `fn(lib, x)` for an 8x4 x laid out as `spec` on a 4x2 Explicit mesh."""
    mesh = lib.make_mesh((4, 2), ("X", "Y"), axis_types=(types.Explicit, types.Explicit))
    with lib.set_mesh(mesh):
        x = lib.device_put(np.arange(32, dtype=np.float32).reshape(8, 4) / 7, spec(lib))
        out = lib.jit(lambda a: fn(lib, a))(x) if jitted else fn(lib, x)
        out_spec = tuple(out.sharding.spec) + (None,) * (out.ndim - len(out.sharding.spec))
        return str(lib.typeof(out)), out_spec, np.asarray(out)


REDUCE_SHARDING_CASES = {  # name: (fn(lib, x), out_sharding(lib)) for x sharded P("X", "Y")
    "add over Y, P(None)": (lambda L, a, s: L.lax.reduce(a, np.float32(0), L.lax.add, (1,), out_sharding=s),
                            lambda L: L.P(None)),
    "add over Y, P()": (lambda L, a, s: L.lax.reduce(a, np.float32(0), L.lax.add, (1,), out_sharding=s),
                        lambda L: L.P()),
    "add over Y, P(Y)": (lambda L, a, s: L.lax.reduce(a, np.float32(0), L.lax.add, (1,), out_sharding=s),
                         lambda L: L.P("Y")),
    "add over X, P(Y)": (lambda L, a, s: L.lax.reduce(a, np.float32(0), L.lax.add, (0,), out_sharding=s),
                         lambda L: L.P("Y")),
    "reduce_sum, P(Y)": (lambda L, a, s: L.lax.reduce_sum(a, (1,), out_sharding=s), lambda L: L.P("Y")),
    "reduce_sum, P(None)": (lambda L, a, s: L.lax.reduce_sum(a, (1,), out_sharding=s), lambda L: L.P(None)),
}


@pytest.mark.parametrize("jitted", [False, True], ids=["eager", "jit"])
@pytest.mark.parametrize("name", sorted(REDUCE_SHARDING_CASES))
def test_reduce_out_sharding_as_jax(name: str, jitted: bool) -> None:
    fn, out_sharding = REDUCE_SHARDING_CASES[name]
    case = lambda L, a: fn(L, a, out_sharding(L))  # noqa: E731
    ours = _on_explicit_mesh(meshax, AxisType, case, lambda L: L.P("X", "Y"), jitted)
    theirs = _on_explicit_mesh(jax, JAxisType, case, lambda L: L.P("X", "Y"), jitted)
    assert ours[:2] == theirs[:2]
    np.testing.assert_allclose(ours[2], theirs[2], rtol=1e-5)


GENERAL_REDUCTIONS = {  # computations that are not one of lax's monoids, and a monoid JAX cannot lay out
    "lambda": lambda L, a, s: L.lax.reduce(a, np.float32(0), lambda p, q: p + q, (1,), out_sharding=s),
    "pair": lambda L, a, s: L.lax.reduce((a, a * 2), (np.float32(0), np.float32(1)),
                                         lambda p, q: (p[0] + q[0], p[1] * q[1]), (1,), out_sharding=s)[1],
    "max": lambda L, a, s: L.lax.reduce(a, np.float32(-np.inf), L.lax.max, (1,), out_sharding=s),
}


@pytest.mark.parametrize("jitted", [False, True], ids=["eager", "jit"])
@pytest.mark.parametrize("name", sorted(GENERAL_REDUCTIONS))
def test_general_reduce_out_sharding_is_honoured(name: str, jitted: bool) -> None:
    """JAX 0.10.2 ignores out_sharding for a general computation (and raises NotImplementedError for max): meshax
    lays the result out as asked, with JAX's values."""
    fn = GENERAL_REDUCTIONS[name]
    ours = _on_explicit_mesh(meshax, AxisType, lambda L, a: fn(L, a, L.P("X")), lambda L: L.P(), jitted)
    theirs = _on_explicit_mesh(jax, JAxisType, lambda L, a: fn(L, a, None), lambda L: L.P(), jitted)
    assert ours[:2] == ("float32[8@X]", ("X",))
    np.testing.assert_allclose(ours[2], theirs[2], rtol=1e-5)


@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
def test_reduce_without_out_sharding(jit: bool) -> None:
    _both(lambda L, x: L.lax.reduce(x, np.float32(0), L.lax.add, (0,), out_sharding=None), A3, jit=jit)


# ---- nn.standardize's where and algorithm ------------------------------------------------------------------------

X = np.array([[1.0, 2.0, 4.0, 8.0], [3.0, -1.0, 0.5, 2.0]], np.float32)
MASK = np.array([[True, False, True, True], [False, True, True, False]])
STANDARDIZE_CASES = {
    "where": (lambda L, x, m: L.nn.standardize(x, where=m), (X, MASK)),
    "where stable": (lambda L, x, m: L.nn.standardize(x, where=m, algorithm="stable"), (X, MASK)),
    "where axis=None": (lambda L, x, m: L.nn.standardize(x, axis=None, where=m), (X, MASK)),
    "where axis=0": (lambda L, x, m: L.nn.standardize(x, axis=0, where=m), (X, MASK)),
    "where broadcast": (lambda L, x, m: L.nn.standardize(x, where=m[0]), (X, MASK)),
    "where positional": (lambda L, x, m: L.nn.standardize(x, -1, None, None, 1e-3, m), (X, MASK)),
    "mean given, where": (lambda L, x, m: L.nn.standardize(x, mean=L.numpy.float32([[1], [2]]), where=m), (X, MASK)),
    "mean given, where, stable": (lambda L, x, m: L.nn.standardize(x, mean=L.numpy.float32([[1], [2]]), where=m,
                                                                    algorithm="stable"), (X, MASK)),
    "mean given, stable": (lambda L, x: L.nn.standardize(x, mean=L.numpy.float32([[1], [2]]), algorithm="stable"),
                           (X,)),
    "variance given, where": (lambda L, x, m: L.nn.standardize(x, variance=L.numpy.float32([[1], [2]]), where=m),
                              (X, MASK)),
    "variance given, algorithm unchecked": (
        lambda L, x: L.nn.standardize(x, variance=L.numpy.float32([[1], [2]]), algorithm="unknown"), (X,)),
    "fast": (lambda L, x: L.nn.standardize(x, algorithm="fast"), (X,)),
    "stable": (lambda L, x: L.nn.standardize(x, algorithm="stable"), (X,)),
    "stable, large offset": (lambda L, x: L.nn.standardize(x + 10000.0, algorithm="stable"), (UNIT,)),
    "fast, constant (variance clipped at 0)": (lambda L, x: L.nn.standardize(x * 0 + 10000.1), (UNIT,)),
    "integers": (lambda L: L.nn.standardize(L.numpy.arange(5), algorithm="stable"), ()),
    "float16": (lambda L, x: L.nn.standardize(x.astype(L.numpy.float16)), (X,)),
    "float16 where": (lambda L, x, m: L.nn.standardize(x.astype(L.numpy.float16), where=m), (X, MASK)),
}


@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
@pytest.mark.parametrize("name", sorted(STANDARDIZE_CASES))
def test_standardize_where_and_algorithm(name: str, jit: bool) -> None:
    case, args = STANDARDIZE_CASES[name]
    tolerance = 2e-3 if "float16" in name else 2e-5
    _both(case, *args, jit=jit, rtol=tolerance, atol=tolerance)


@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
@pytest.mark.parametrize("algorithm", ["fast", "stable"])
def test_standardize_where_gradient(algorithm: str, jit: bool) -> None:
    def case(L: Any, x: Any, m: Any) -> Any:
        return L.grad(lambda t: L.numpy.sum(L.nn.standardize(t, where=m, algorithm=algorithm) ** 3))(x)

    _both(case, X, MASK, jit=jit, rtol=2e-4, atol=2e-4)


def test_standardize_unknown_algorithm_is_refused_as_in_jax() -> None:
    _same_error(lambda L, x: L.nn.standardize(x, algorithm="two-pass"), X)


# ---- nn.dot_product_attention's return_residual -------------------------------------------------------------------

Q = RNG.standard_normal((2, 3, 4, 8)).astype(np.float32)
K = RNG.standard_normal((2, 5, 2, 8)).astype(np.float32)
V = RNG.standard_normal((2, 5, 2, 8)).astype(np.float32)
ATTENTION_MASK = RNG.random((2, 4, 3, 5)) > 0.4
ATTENTION_MASK[0, 0, 0] = False  # a row with every key masked
BIAS = RNG.standard_normal((2, 4, 3, 5)).astype(np.float32)
ATTENTION_CASES = {
    "plain": (lambda L, q, k, v: L.nn.dot_product_attention(q, k, v, return_residual=True), (Q, K, V)),
    "not asked": (lambda L, q, k, v: L.nn.dot_product_attention(q, k, v, return_residual=False), (Q, K, V)),
    "mask": (lambda L, q, k, v, m: L.nn.dot_product_attention(q, k, v, mask=m, return_residual=True),
             (Q, K, V, ATTENTION_MASK)),
    "bias, scale": (lambda L, q, k, v, b: L.nn.dot_product_attention(q, k, v, bias=b, scale=0.5,
                                                                      return_residual=True), (Q, K, V, BIAS)),
    "causal": (lambda L, q, k, v: L.nn.dot_product_attention(q, k, v, is_causal=True, return_residual=True),
               (Q, K, V)),
    "unbatched": (lambda L, q, k, v: L.nn.dot_product_attention(q, k, v, return_residual=True),
                  (Q[0], K[0], V[0])),
    "bfloat16": (lambda L, q, k, v: L.nn.dot_product_attention(
        q.astype(L.numpy.bfloat16), k.astype(L.numpy.bfloat16), v.astype(L.numpy.bfloat16), return_residual=True),
                 (Q, K, V)),
}


@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
@pytest.mark.parametrize("name", sorted(ATTENTION_CASES))
def test_dot_product_attention_return_residual(name: str, jit: bool) -> None:
    case, args = ATTENTION_CASES[name]
    tolerance = 2e-2 if name == "bfloat16" else 2e-5
    _both(case, *args, jit=jit, rtol=tolerance, atol=tolerance)


@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
def test_dot_product_attention_residual_gradient(jit: bool) -> None:
    """The output's gradient is unchanged by return_residual, and none flows through the residual (as in JAX)."""
    def case(L: Any, q: Any, k: Any, v: Any, m: Any) -> Any:
        def loss(q: Any, k: Any, v: Any) -> Any:
            out, residual = L.nn.dot_product_attention(q, k, v, mask=m, return_residual=True)
            return L.numpy.sum(out ** 2) + L.numpy.sum(L.numpy.where(residual > -1e30, residual, 0.0))

        return L.grad(loss, argnums=(0, 1, 2))(q, k, v)

    _both(case, Q, K, V, ATTENTION_MASK, jit=jit, rtol=1e-4, atol=1e-5)


# ---- linalg.matrix_rank's and svd's hermitian ---------------------------------------------------------------------

UPPER = np.array([[1.0, 2.0], [0.0, 1e-9]], np.float32)  # rank 1; its symmetrization has rank 2
LOWER = np.array([[1.0, 0.0], [5.0, 1.0]], np.float32)
NEAR_SINGULAR = np.array([[1.0, 1e-3], [1e-3, 1e-6]], np.float32)
SYMMETRIC = np.array([[2.0, 1.0, 0.0], [1.0, 2.0, 1.0], [0.0, 1.0, 2.0]], np.float32)
RANK_CASES = {
    "upper": (UPPER,), "lower": (LOWER,), "near singular": (NEAR_SINGULAR,),
    "batch": (np.stack([SYMMETRIC, np.ones((3, 3), np.float32), np.diag([1.0, -2.0, 0.0]).astype(np.float32)]),),
    "complex": (np.array([[1.0, 1j], [-1j, 1.0]], np.complex64),),
    "vector": (np.array([0.0, 2.0], np.float32),),
}


@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
@pytest.mark.parametrize("hermitian", [False, True])
@pytest.mark.parametrize("name", sorted(RANK_CASES))
def test_matrix_rank_hermitian(name: str, hermitian: bool, jit: bool) -> None:
    _both(lambda L, a: L.numpy.linalg.matrix_rank(a, hermitian=hermitian), *RANK_CASES[name], jit=jit)


@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
def test_matrix_rank_hermitian_with_tolerances(jit: bool) -> None:
    _both(lambda L, a: (L.numpy.linalg.matrix_rank(a, 0.1, hermitian=True),
                        L.numpy.linalg.matrix_rank(a, hermitian=True, tol=1.5)), *RANK_CASES["batch"], jit=jit)


@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
@pytest.mark.parametrize("matrix", [UPPER, LOWER, SYMMETRIC, np.diag([2.0, -3.0]).astype(np.float32)],
                         ids=["upper", "lower", "symmetric", "indefinite"])
def test_svd_hermitian(matrix: np.ndarray, jit: bool) -> None:
    _both(lambda L, a: L.numpy.linalg.svd(a, compute_uv=False, hermitian=True), matrix, jit=jit, rtol=1e-5)

    def reconstructed(L: Any, a: Any) -> Any:
        u, s, vh = L.numpy.linalg.svd(a, hermitian=True)
        return (u * s[..., None, :]) @ vh, L.numpy.abs(u), L.numpy.abs(vh)

    _both(reconstructed, matrix, jit=jit, rtol=1e-5, atol=1e-5)


def test_matrix_rank_hermitian_of_a_non_square_matrix_is_refused_as_in_jax() -> None:
    _same_error(lambda L, a: L.numpy.linalg.matrix_rank(a, hermitian=True), np.ones((3, 4), np.float32))
