"""Issue 39: meshax.numpy's reductions, order statistics, sinc's derivatives, einsum's interleaved form, the
spacing functions and the elementwise functions' weak types, each against JAX (eagerly, under jit, and under
vmap or grad where they apply)."""
from __future__ import annotations

import inspect

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import meshax
import meshax.numpy as mnp
from differential import assert_matches, check_modes, run_jax, run_meshax

X = np.array([[1.0, np.nan, 3.0], [4.0, 5.0, np.nan], [2.0, 0.0, -1.0]], np.float32)
MASK = np.array([[True, False, False], [False, False, False], [True, True, False]])
I8 = np.array([[1, 2, 3], [4, 5, 6]], np.int8)


check = check_modes


def same_error(case, *args):
    """`case` raises the same exception class in meshax as in JAX."""
    with pytest.raises(Exception) as theirs:
        run_jax(case, args)
    with pytest.raises(theirs.type):
        run_meshax(case, args, "eager")


# 1. reductions' keywords


@pytest.mark.parametrize("name", ["nanmax", "nanmin", "max", "min", "amax", "amin"])
def test_extremes_with_initial_and_where(name):
    """A fully masked (or all-NaN) column gives `initial`, as in JAX (meshax gave NaN for nanmax/nanmin)."""
    check(lambda L, x, m: getattr(L.numpy, name)(x, axis=0, initial=-7.0, where=m), X, MASK)
    check(lambda L, x, m: getattr(L.numpy, name)(x, axis=0, initial=3, where=m[:2], keepdims=True), I8, MASK)
    check(lambda L, x: getattr(L.numpy, name)(x, initial=300), I8)  # initial in the array's type (wraps)


def test_nanmax_where_under_vmap_and_grad():
    check(lambda L, x, m: L.vmap(lambda r, k: L.numpy.nanmax(r, initial=-7.0, where=k))(x, m), X, MASK)
    check(lambda L, x, m: L.grad(lambda v: L.numpy.nanmax(v, initial=0.0, where=m).sum())(x),
          np.nan_to_num(X), MASK)


@pytest.mark.parametrize("name", ["sum", "prod", "nansum", "nanprod"])
def test_sums_and_products(name):
    f = lambda L, *a, **k: getattr(L.numpy, name)(*a, **k)  # noqa: E731
    check(lambda L, x, m: f(L, x, axis=0, initial=2.0, where=m), X, MASK)
    check(lambda L, x: f(L, x, axis=1, initial=2.5), I8)  # a float initial truncated into the integer result
    check(lambda L, x: f(L, x, axis=1, dtype=np.float32, keepdims=True), I8)
    if name in ("sum", "prod"):
        check(lambda L, x: f(L, x, axis=0, promote_integers=False), I8)
        check(lambda L, x: f(L, x, initial=2, promote_integers=False), I8)
        check(lambda L, x: f(L, x > 2, promote_integers=False), I8)


@pytest.mark.parametrize("name", ["mean", "var", "std", "nanmean", "nanvar", "nanstd"])
def test_means_and_variances(name):
    f = lambda L, *a, **k: getattr(L.numpy, name)(*a, **k)  # noqa: E731
    check(lambda L, x, m: f(L, x, axis=1, where=m, keepdims=True), X, MASK)
    check(lambda L, x: f(L, x, axis=1, dtype=np.float16), I8)
    check(lambda L, x: f(L, x, axis=0, dtype=np.float16), np.nan_to_num(X), rtol=1e-3)
    if name != "mean" and name != "nanmean":
        check(lambda L, x: f(L, x, axis=0, mean=L.numpy.asarray([[1.0, 2.0, 3.0]])), np.nan_to_num(X))
        check(lambda L, x: L.grad(lambda v: f(L, v, ddof=1))(x), np.nan_to_num(X), rtol=1e-5)


@pytest.mark.parametrize("name", ["argmax", "argmin", "nanargmax", "nanargmin"])
def test_arg_extremes_keepdims(name):
    check(lambda L, x: getattr(L.numpy, name)(x, keepdims=True), X)
    check(lambda L, x: getattr(L.numpy, name)(x, axis=0, keepdims=True), X)


def test_cumulative_dtypes_and_misc():
    for name in ("cumsum", "cumprod", "nancumsum", "nancumprod"):
        check(lambda L, x: getattr(L.numpy, name)(x, axis=1, dtype=np.float32), I8)
        check(lambda L, x: getattr(L.numpy, name)(x > 2, axis=1, dtype=np.int8), I8)
    check(lambda L, x: L.numpy.cumulative_prod(x, axis=1, include_initial=True), I8)  # int8 stays int8
    check(lambda L, x: L.numpy.cumulative_sum(x, axis=1, include_initial=True), I8)  # int8 widens
    check(lambda L, x: L.numpy.count_nonzero(x, axis=0, keepdims=True), X)
    check(lambda L, x: L.numpy.ptp(x, axis=0, keepdims=True), I8)
    same_error(lambda L, x: L.numpy.max(x, axis=0, where=x > 0), X)


# 2. order statistics


METHODS = ["linear", "lower", "higher", "midpoint", "nearest", "inverted_cdf"]


def test_percentile_nearest_ties_go_down():
    """The issue's case: positions 0.75, 1.5, 2.25 read elements 1, 1 and 2 (JAX rounds ties down)."""
    check(lambda L, a, q: L.numpy.percentile(a, q, method="nearest"), np.array([1.0, 2, 3, 4], np.float32),
          np.array([25, 50, 75]))
    ours = mnp.percentile(mnp.array([1.0, 2.0, 3.0, 4.0]), mnp.array([25, 50, 75]), method="nearest")
    np.testing.assert_array_equal(np.asarray(ours), [2.0, 2.0, 3.0])


@pytest.mark.parametrize("method", METHODS)
def test_quantile_methods(method):
    grid = np.linspace(0, 1, 13).astype(np.float32)
    check(lambda L, a, q: L.numpy.quantile(a, q, method=method), np.arange(7, dtype=np.float32), grid)
    check(lambda L, a, q: L.numpy.quantile(a, q, axis=1, method=method, keepdims=True),
          np.arange(12, dtype=np.float32).reshape(3, 4), np.array([0.1, 0.5, 0.9], np.float32))
    nan_rows = np.array([[3.0, np.nan, 1.0, 7.0], [np.nan] * 4, [1, 2, 3, 4]], np.float32)
    check(lambda L, a: L.numpy.nanquantile(a, L.numpy.asarray([0.0, 0.3, 0.5, 1.0]), axis=1, method=method),
          nan_rows)
    check(lambda L, a: L.numpy.nanpercentile(a, 40, axis=1, method=method, keepdims=True), nan_rows)
    check(lambda L, a: L.numpy.quantile(a, 0.4, axis=0, method=method), np.array([[3, 1, 7], [4, 2, 2]], np.int8))
    check(lambda L, a: L.numpy.quantile(a, L.numpy.asarray([-0.5, 1.5]), method=method),  # clamped, no error
          np.array([1.0, 2, 3, 4], np.float32))
    check(lambda L, a: L.vmap(lambda r: L.numpy.percentile(r, L.numpy.asarray([20, 60]), method=method))(a),
          np.arange(12, dtype=np.float32).reshape(3, 4))


def test_quantile_weights_and_errors():
    x = np.array([5.0, 1.0, 4.0, 2.0, 3.0, 7.0], np.float32)
    w = np.array([1.0, 0.0, 2.0, 3.0, 1.0, 0.5], np.float32)
    grid = np.linspace(0, 1, 11).astype(np.float32)
    check(lambda L, a, v, q: L.numpy.quantile(a, q, method="inverted_cdf", weights=v), x, w, grid)
    check(lambda L, a, v: L.numpy.quantile(a.reshape(2, 3), 0.5, axis=1, method="inverted_cdf", weights=v[:3]),
          x, w)
    check(lambda L, a, v: L.numpy.nanquantile(a, L.numpy.linspace(0, 1, 11), method="inverted_cdf", weights=v),
          np.array([1.0, np.nan, 3.0, 2.0], np.float32), np.array([1.0, 5.0, 1.0, 1.0], np.float32))
    check(lambda L, a, v: L.grad(lambda y: L.numpy.quantile(y, 0.5, method="inverted_cdf", weights=v))(a), x, w)
    check(lambda L, a: L.grad(lambda y: L.numpy.quantile(y, 0.3))(a), np.arange(7, dtype=np.float32))
    check(lambda L, a: L.numpy.nanmedian(a, axis=1, keepdims=True), np.array([[1.0, np.nan, 3.0]], np.float32))
    same_error(lambda L, a: L.numpy.quantile(a, 0.5, weights=a), x)  # linear takes no weights
    same_error(lambda L, a: L.numpy.percentile(a, 50, method="hazen"), x)


# 3. sinc's derivatives at 0


def _nth(grad, f, k):
    for _ in range(k):
        f = grad(f)
    return f


def test_sinc_derivatives_at_zero():
    """JAX's values of the 2nd and 4th derivatives at 0 (-pi**2/3, pi**4/5), eagerly and under jit."""
    for k, expected in [(1, 0.0), (2, -3.2898681), (3, 0.0), (4, 19.481818)]:
        for ours in (_nth(meshax.grad, mnp.sinc, k)(0.0), meshax.jit(_nth(meshax.grad, mnp.sinc, k))(0.0)):
            np.testing.assert_allclose(float(ours), expected, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(float(jax.jit(_nth(jax.grad, jnp.sinc, k))(0.0)), expected, rtol=1e-5, atol=1e-6)
    check(lambda L, x: L.vmap(L.grad(L.grad(L.numpy.sinc)))(x), np.array([0.0, 0.5, -1.0, 2.0], np.float32))
    check(lambda L, x: L.hessian(lambda v: L.numpy.sinc(v).sum())(x), np.array([0.0, 0.5], np.float32))
    check(lambda L, x: L.numpy.sinc(x), np.array([0.0, 0.5, -1.0, 1e-8], np.float32))


# 4. einsum's interleaved form


def test_einsum_interleaved():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.arange(12, dtype=np.float32).reshape(3, 4)
    c = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    check(lambda L, x, y: L.numpy.einsum(x, [0, 1], y, [1, 2], [0, 2]), a, b)
    check(lambda L, x, y: L.numpy.einsum(x, [0, 1], y, [1, 2]), a, b)
    check(lambda L, x, y: L.numpy.einsum(y, [5, 0], x, [1, 5]), a, b)
    check(lambda L, x, y: L.numpy.einsum(x, [Ellipsis, 1], y, [2, 1], [Ellipsis, 2]), c, b)
    check(lambda L, x, y: L.numpy.einsum(x, [Ellipsis, 1], y, [2, 1]), c, b)
    check(lambda L, x, y: L.numpy.einsum("...b,cb", x, y), c, b)
    check(lambda L, x: L.numpy.einsum(x, [0, 1], [1]), a)
    check(lambda L, x, y: L.grad(lambda u: L.numpy.einsum(u, [0, 1], y, [1, 2], [0, 2]).sum())(x), a, b)
    check(lambda L, x, y: L.vmap(lambda u: L.numpy.einsum(u, [0], y, [0, 1]))(x), a, b)
    same_error(lambda L, x: L.numpy.einsum("ij,jk", x, x), a)
    check(lambda L, x, y: L.numpy.einsum("ij,ij->i", x[:1], x), a, b)  # a label of size 1 broadcasts
    check(lambda L, x, y: L.grad(lambda u: L.numpy.einsum("ij,jk->ik", u, y).sum())(x[:, :1]), a, b)


# 5. linspace, logspace, geomspace


@pytest.mark.parametrize("endpoint", [True, False])
def test_linspace_retstep(endpoint):
    for start, stop, num in [(0, 1, 5), (0, 1, 13), (-3, 7.5, 50), (2, -5, 17), (0, 1, 1), (0, 1, 0)]:
        check(lambda L: L.numpy.linspace(start, stop, num, endpoint=endpoint, retstep=True))
    # eagerly, bit for bit (quantile's positions, for one, depend on the last bit)
    np.testing.assert_array_equal(np.asarray(mnp.linspace(0, 1, 13, endpoint=endpoint)),
                                  np.asarray(jnp.linspace(0, 1, 13, endpoint=endpoint)))
    step = mnp.linspace(0, 1, 5, retstep=True)[1]
    assert isinstance(step, meshax.Array) and step.shape == () and not step.weak_type
    check(lambda L: L.numpy.linspace(0, 10, 7, dtype=np.int32))
    check(lambda L: L.numpy.linspace(0, 1 + 1j, 5, retstep=True))
    check(lambda L, a, b: L.numpy.linspace(a, b, 4, axis=-1, retstep=True), np.array([0.0, 1.0], np.float32),
          np.array([[2.0], [3.0], [4.0]], np.float32))
    check(lambda L, a, b: L.numpy.linspace(a, b, 5, retstep=True), np.float32(1), np.float32(2))
    check(lambda L, a: L.grad(lambda s: L.numpy.linspace(s, 2.0, 5).sum())(a), np.float32(1))
    check(lambda L, a: L.vmap(lambda s: L.numpy.linspace(s, 2.0, 5))(a), np.arange(3, dtype=np.float32))


@pytest.mark.parametrize("kw", [{}, {"endpoint": False}, {"dtype": np.float16}, {"dtype": np.int32}, {"axis": 1}])
def test_logspace_geomspace_keywords(kw):
    check(lambda L, a: L.numpy.logspace(a, 3.0, 4, **kw), np.array([0.0, 1.0], np.float32), rtol=1e-5)
    check(lambda L, a: L.numpy.logspace(a, 3.0, 4, base=2.0, **kw), np.array([0.0, 1.0], np.float32), rtol=1e-5)
    check(lambda L, a, b: L.numpy.geomspace(a, b, 4, **kw), np.array([1.0, -2.0], np.float32),
          np.array([1000.0, -8.0], np.float32), rtol=1e-5)


# 6. weak types of the elementwise functions


def _elementwise_names():
    names = {n for n in dir(jnp) if isinstance(getattr(jnp, n), jnp.ufunc)}
    names |= {"float_power", "heaviside", "sinc", "fmax", "fmin", "logaddexp2", "deg2rad", "rad2deg", "isclose",
              "ldexp", "modf", "divmod", "clip", "round", "rint", "fix", "real", "imag", "conj", "signbit",
              "isposinf", "isneginf", "isreal", "iscomplex", "positive", "nan_to_num"}
    return sorted(n for n in names if hasattr(mnp, n) and n in dir(mnp))


def _arity(name):
    f = getattr(jnp, name)
    if isinstance(f, jnp.ufunc):
        return f.nin
    return len([p for p in inspect.signature(f).parameters.values()
                if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)])


INPUTS = {"py_float": lambda n: 0.7, "py_int": lambda n: 3, "py_bool": lambda n: True,
          "weak": lambda n: n.asarray(0.7), "weak_int": lambda n: n.asarray(3), "f32": lambda n: n.float32(0.7),
          "f16": lambda n: n.asarray(0.7, n.float16), "i8": lambda n: n.asarray(3, n.int8),
          "u8": lambda n: n.asarray(3, n.uint8), "bool": lambda n: n.asarray(True)}
PAIRS = [("py_float", "py_float"), ("py_int", "py_int"), ("py_float", "py_int"), ("weak", "py_float"),
         ("py_float", "f16"), ("f16", "weak"), ("py_int", "i8"), ("py_float", "i8"), ("weak_int", "u8"),
         ("py_int", "f32"), ("bool", "py_float")]


@pytest.mark.parametrize("name", _elementwise_names())
def test_elementwise_dtypes_and_weak_types(name):
    """Dtype and weak type of every elementwise function on Python scalars and weakly typed inputs (values to a
    loose tolerance: float16 rounding may differ by an ulp)."""
    arity = _arity(name)
    combos = [(k,) for k in INPUTS] if arity == 1 else PAIRS if arity == 2 else []
    for combo in combos:
        def case(L, combo=combo):
            return getattr(L.numpy, name)(*[INPUTS[k](L.numpy) for k in combo])
        try:
            theirs = run_jax(case, ())
        except Exception:  # noqa: BLE001
            with pytest.raises(Exception):
                case(meshax)
            continue
        if name in ("pow", "power") and combo == ("py_bool", "py_int"):
            continue  # JAX's True ** 3 is strongly typed int32; meshax's is weak (ufuncs.power's integer_pow path)
        assert_matches(case(meshax), theirs, rtol=2e-3, atol=1e-3), combo


def test_float_power_and_heaviside_weak_types():
    for case in (lambda L: L.numpy.float_power(2.0, 3), lambda L: L.numpy.heaviside(0.5, 1.0),
                 lambda L: L.numpy.float_power(L.numpy.asarray(2.0, L.numpy.float16), 0.5),
                 lambda L: L.numpy.heaviside(L.numpy.asarray([-1.0, 0.0, 2.0]), 0.5)):
        check(lambda L, case=case: case(L), rtol=1e-3)
