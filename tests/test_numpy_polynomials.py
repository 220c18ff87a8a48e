"""meshax.numpy's polynomial and signal helpers against real JAX: eagerly, under jit and in shard_map, grad and vmap
where they apply, several dtypes, shapes and keywords, and JAX's errors."""
from __future__ import annotations

import numpy as np
import pytest

jax = pytest.importorskip("jax")

import meshax  # noqa: E402
from differential import MODES, assert_matches, check_case, run_jax, run_meshax  # noqa: E402

RNG = np.random.default_rng(0)
F32 = lambda *shape: RNG.standard_normal(shape).astype(np.float32)  # noqa: E731
I32 = lambda *shape: RNG.integers(-4, 5, shape).astype(np.int32)  # noqa: E731
C64 = lambda *shape: (F32(*shape) + 1j * F32(*shape)).astype(np.complex64)  # noqa: E731
BF16 = jax.numpy.bfloat16
TOL = dict(rtol=2e-5, atol=2e-5)

CASES = {
    "polyadd": (lambda L, a, b: L.numpy.polyadd(a, b), (F32(3), F32(5))),
    "polyadd_int": (lambda L, a, b: L.numpy.polyadd(a, b), (I32(4), I32(2))),
    "polysub": (lambda L, a, b: L.numpy.polysub(a, b), (I32(2), F32(4))),
    "polymul": (lambda L, a, b: L.numpy.polymul(a, b), (F32(3), F32(5))),
    "polymul_int": (lambda L, a, b: L.numpy.polymul(a, b), (I32(4), I32(2))),
    "polymul_complex": (lambda L, a, b: L.numpy.polymul(a, b), (C64(4), F32(2))),
    "polydiv": (lambda L, u, v: L.numpy.polydiv(u, v), (F32(6), F32(3) + np.float32(3))),
    "polydiv_int": (lambda L, u, v: L.numpy.polydiv(u, v), (I32(4), np.array([2, 1], np.int32))),
    "polydiv_short": (lambda L, u, v: L.numpy.polydiv(u, v), (F32(2), F32(4))),
    "polydiv_complex": (lambda L, u, v: L.numpy.polydiv(u, v), (C64(5), F32(2) + np.float32(3))),
    "polyder": (lambda L, p: L.numpy.polyder(p), (F32(5),)),
    "polyder_m3": (lambda L, p: L.numpy.polyder(p, 3), (I32(6),)),
    "polyder_m_big": (lambda L, p: L.numpy.polyder(p, 4), (F32(3),)),
    "polyint": (lambda L, p: L.numpy.polyint(p), (F32(4),)),
    "polyint_m2_k": (lambda L, p: L.numpy.polyint(p, 2, k=L.numpy.array([1.5, -2.0])), (I32(3),)),
    "polyint_scalar_k": (lambda L, p: L.numpy.polyint(p, 3, k=2.0), (F32(3),)),
    "poly": (lambda L, z: L.numpy.poly(z), (F32(4),)),
    "poly_int": (lambda L, z: L.numpy.poly(z), (I32(3),)),
    "vander": (lambda L, x: L.numpy.vander(x), (F32(4),)),
    "vander_int_N": (lambda L, x: L.numpy.vander(x, 6, increasing=True), (I32(3),)),
    "vander_N0": (lambda L, x: L.numpy.vander(x, 0), (F32(3),)),
    "convolve_full": (lambda L, a, v: L.numpy.convolve(a, v), (F32(7), F32(3))),
    "convolve_short_first": (lambda L, a, v: L.numpy.convolve(a, v, mode="same"), (F32(3), F32(6))),
    "convolve_same": (lambda L, a, v: L.numpy.convolve(a, v, "same"), (F32(8), F32(4))),
    "convolve_valid": (lambda L, a, v: L.numpy.convolve(a, v, "valid"), (F32(6), F32(3))),
    "convolve_valid_swapped": (lambda L, a, v: L.numpy.convolve(a, v, "valid"), (F32(3), F32(6))),
    "convolve_int": (lambda L, a, v: L.numpy.convolve(a, v), (I32(5), I32(2))),
    "convolve_complex": (lambda L, a, v: L.numpy.convolve(a, v, "same"), (C64(5), C64(4))),
    "convolve_precision": (lambda L, a, v: L.numpy.convolve(a, v, precision="highest"), (F32(5), F32(3))),
    "convolve_bf16_preferred": (lambda L, a, v: L.numpy.convolve(a, v, preferred_element_type=np.float32),
                                (F32(5).astype(BF16), F32(3).astype(BF16))),
    "correlate_bf16": (lambda L, a, v: L.numpy.correlate(a, v, "same"), (F32(5).astype(BF16), F32(3).astype(BF16))),
    "correlate_valid": (lambda L, a, v: L.numpy.correlate(a, v), (F32(7), F32(3))),
    "correlate_full": (lambda L, a, v: L.numpy.correlate(a, v, "full"), (F32(4), F32(6))),
    "correlate_same": (lambda L, a, v: L.numpy.correlate(a, v, "same"), (F32(3), F32(6))),
    "correlate_same_long": (lambda L, a, v: L.numpy.correlate(a, v, "same"), (F32(6), F32(3))),
    "correlate_complex": (lambda L, a, v: L.numpy.correlate(a, v, "full"), (C64(3), C64(5))),
    "correlate_complex_valid": (lambda L, a, v: L.numpy.correlate(a, v, "valid"), (C64(3), C64(5))),
    "unwrap": (lambda L, p: L.numpy.unwrap(p), ((np.cumsum(F32(9)) * 3).astype(np.float32),)),
    "unwrap_axis0": (lambda L, p: L.numpy.unwrap(p, axis=0), ((np.cumsum(F32(6, 3), 0) * 3).astype(np.float32),)),
    "unwrap_period": (lambda L, p: L.numpy.unwrap(p, discont=2.5, period=4.0), (I32(8) * 3,)),
    "gradient_1d": (lambda L, f: L.numpy.gradient(f), (F32(6),)),
    "gradient_int": (lambda L, f: L.numpy.gradient(f), (I32(5),)),
    "gradient_2d": (lambda L, f: L.numpy.gradient(f), (F32(4, 5),)),
    "gradient_step": (lambda L, f: L.numpy.gradient(f, 0.5, axis=1), (F32(4, 5),)),
    "gradient_steps": (lambda L, f: L.numpy.gradient(f, 2.0, 0.5), (F32(3, 4),)),
    "gradient_mixed": (lambda L, f, x: L.numpy.gradient(f, x, 0.25), (I32(5, 3), np.cumsum(np.abs(F32(5)) + 0.1))),
    "gradient_coords": (lambda L, f, x: L.numpy.gradient(f, x, axis=0),
                        (F32(5, 2), np.array([0.0, 0.5, 1.5, 1.75, 3.0], np.float32))),
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_jax(name: str, mode: str) -> None:
    case, args = CASES[name]
    check_case(case, args, mode, **TOL)


def test_scalar_arguments() -> None:
    """Scalars where JAX takes them (weak types follow), and JAX's errors for 0-d coefficients."""
    for case in (lambda L: L.numpy.polyint(L.numpy.ones(2), 2, k=1), lambda L: L.numpy.polyint(L.numpy.ones(2), k=2.0),
                 lambda L: L.numpy.vander(L.numpy.arange(3.0), 2), lambda L: L.numpy.unwrap(L.numpy.arange(4), 1.0)):
        assert_matches(case(meshax), case(jax), **TOL)
    for case, error in ((lambda L: L.numpy.polyadd(L.numpy.arange(3), 3.0), IndexError),
                        (lambda L: L.numpy.polysub(1, L.numpy.ones(2)), IndexError),
                        (lambda L: L.numpy.polymul(2, 3.0), TypeError), (lambda L: L.numpy.polyder(4.0), TypeError),
                        (lambda L: L.numpy.polyint(2.0), TypeError)):
        for L in (jax, meshax):
            with pytest.raises(error):
                case(L)


@pytest.mark.parametrize("name", ["polyadd", "polymul", "polyder", "convolve", "vander", "poly"])
def test_lists_rejected(name: str) -> None:
    """As in JAX, Python lists are not arrays."""
    args = {"polyder": ([1, 2],), "vander": ([1, 2],), "poly": ([1, 2],)}.get(name, ([1, 2], [1.0]))
    for L in (jax, meshax):
        with pytest.raises(TypeError):
            getattr(L.numpy, name)(*args)


CONCRETE_CASES = {
    "trim_zeros": (lambda L, a: L.numpy.trim_zeros(a), (np.array([0, 0, 1, 0, 2, 0], np.float32),)),
    "trim_zeros_f": (lambda L, a: L.numpy.trim_zeros(a, "f"), (np.array([0, 0, 1, 0, 2, 0], np.int32),)),
    "trim_zeros_0d": (lambda L, a: L.numpy.trim_zeros(a), (np.float32(0),)),
    "trim_zeros_b": (lambda L, a: L.numpy.trim_zeros(a, trim="B"), (np.array([0, 3, 0], np.float32),)),
    "trim_zeros_all_zero": (lambda L, a: L.numpy.trim_zeros(a), (np.zeros(4, np.float32),)),
    "trim_zeros_2d": (lambda L, a: L.numpy.trim_zeros(a), (np.pad(np.ones((2, 3), np.float32), ((1, 2), (0, 1))),)),
    "trim_zeros_axis": (lambda L, a: L.numpy.trim_zeros(a, axis=1),
                        (np.pad(np.ones((2, 3), np.float32), ((1, 2), (2, 1))),)),
    "polydiv_trim": (lambda L, u, v: L.numpy.polydiv(u, v, trim_leading_zeros=True),
                     (np.array([1, -3, 2], np.float32), np.array([1, -1], np.float32))),
    "polydiv_trim_tolerance": (lambda L, u, v: L.numpy.polydiv(u, v, trim_leading_zeros=True),
                               (np.array([1, -2.9999, 2.001], np.float32), np.array([1, -1], np.float32))),
    "polydiv_trim_nan": (lambda L, u, v: L.numpy.polydiv(u, v, trim_leading_zeros=True),
                         (np.array([0, 1, 2, 4], np.float32), np.array([0, 2, -1], np.float32))),
    "polymul_trim": (lambda L, a, b: L.numpy.polymul(a, b, trim_leading_zeros=True),
                     (np.array([0, 0, 1, 2], np.float32), np.array([0, 3, 1], np.float32))),
}


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # polydiv_trim_nan divides by zero on purpose
@pytest.mark.parametrize("name", sorted(CONCRETE_CASES))
def test_concrete_only(name: str) -> None:
    """Value-dependent shapes: right eagerly, JAX's ConcretizationTypeError under jit."""
    case, args = CONCRETE_CASES[name]
    assert_matches(run_meshax(case, args, "eager"), run_jax(case, args), **TOL)
    with pytest.raises(meshax.errors.ConcretizationTypeError):
        run_meshax(case, args, "jit")
    with pytest.raises(jax.errors.ConcretizationTypeError):
        jax.jit(lambda *xs: case(jax, *xs))(*args)


GRAD_CASES = {
    "polymul": (lambda L, a, b: L.numpy.sum(L.numpy.polymul(a, b) ** 2), (F32(3), F32(4))),
    "convolve_same": (lambda L, a, b: L.numpy.sum(L.numpy.sin(L.numpy.convolve(a, b, "same"))), (F32(6), F32(3))),
    "correlate": (lambda L, a, b: L.numpy.sum(L.numpy.correlate(a, b, "full") ** 2), (F32(3), F32(5))),
    "polyint": (lambda L, a, b: L.numpy.sum(L.numpy.polyint(a, 2) * b), (F32(3), F32(5))),
    "polyder": (lambda L, a, b: L.numpy.sum(L.numpy.polyder(a) * b), (F32(4), F32(3))),
    "polydiv": (lambda L, a, b: L.numpy.sum(L.numpy.polydiv(a, b + 3)[0]) + L.numpy.sum(L.numpy.polydiv(a, b + 3)[1]),
                (F32(5), F32(3))),
    "poly": (lambda L, a, b: L.numpy.sum(L.numpy.poly(a) * b), (F32(3), F32(4))),
    "unwrap": (lambda L, a, b: L.numpy.sum(L.numpy.unwrap(a * 4) * b), (F32(6), F32(6))),
    "gradient": (lambda L, a, b: L.numpy.sum(L.numpy.gradient(a) * b), (F32(6), F32(6))),
    "vander": (lambda L, a, b: L.numpy.sum(L.numpy.vander(a) * b), (F32(3), F32(3, 3))),
}


@pytest.mark.parametrize("name", sorted(GRAD_CASES))
def test_grad(name: str) -> None:
    loss, args = GRAD_CASES[name]
    check_case(lambda L, *xs: L.grad(lambda *ys: loss(L, *ys), argnums=(0, 1))(*xs), args, "jit", **TOL)


VMAP_CASES = {
    "convolve": (lambda L, a, v: L.numpy.convolve(a, v, "same"), (F32(3, 6), F32(3, 4))),
    "correlate": (lambda L, a, v: L.numpy.correlate(a, v), (F32(2, 6), F32(2, 3))),
    "polyadd": (lambda L, a, v: L.numpy.polyadd(a, v), (F32(2, 3), F32(2, 5))),
    "polyval_polyint": (lambda L, a, v: L.numpy.polyint(a, k=v), (F32(4, 3), F32(4))),
    "unwrap": (lambda L, a, v: L.numpy.unwrap(a * 5) + v, (F32(3, 5), F32(3, 5))),
    "gradient": (lambda L, a, v: L.numpy.gradient(a * v), (F32(2, 5), F32(2, 5))),
}


@pytest.mark.parametrize("name", sorted(VMAP_CASES))
def test_vmap(name: str) -> None:
    case, args = VMAP_CASES[name]
    check_case(lambda L, *xs: L.vmap(lambda *ys: case(L, *ys))(*xs), args, "eager", **TOL)


ERROR_CASES = [
    (lambda L: L.numpy.convolve(L.numpy.ones((2, 2)), L.numpy.ones(2)), ValueError),
    (lambda L: L.numpy.correlate(L.numpy.ones(0), L.numpy.ones(2)), ValueError),
    (lambda L: L.numpy.convolve(L.numpy.ones(3), L.numpy.ones(2), mode="bad"), ValueError),
    (lambda L: L.numpy.gradient(L.numpy.ones(3), edge_order=1), NotImplementedError),
    (lambda L: L.numpy.gradient(L.numpy.ones(1)), ValueError),
    (lambda L: L.numpy.gradient(L.numpy.ones(3), L.numpy.ones(2)), ValueError),
    (lambda L: L.numpy.gradient(L.numpy.ones((3, 3)), 1.0, 2.0, 3.0), TypeError),
    (lambda L: L.numpy.polyder(L.numpy.ones(3), -1), ValueError),
    (lambda L: L.numpy.polydiv(L.numpy.ones(3), 2.0), TypeError),
    (lambda L: L.numpy.polyint(L.numpy.ones(3), 2, k=L.numpy.ones(3)), ValueError),
    (lambda L: L.numpy.polyint(L.numpy.ones(3), 2, k=[1.0, 2.0]), TypeError),
    (lambda L: L.numpy.vander(L.numpy.ones((2, 2))), ValueError),
]


@pytest.mark.parametrize("index", range(len(ERROR_CASES)))
def test_errors(index: int) -> None:
    case, error = ERROR_CASES[index]
    with pytest.raises(error):
        case(jax)
    with pytest.raises(error):
        case(meshax)


# roots, polyfit and poly of a matrix need linear algebra: they live in polynomials_linalg (just above lax).
from meshax._src.numpy import polynomials_linalg as mpl  # noqa: E402


def _api(L):
    return jax.numpy if L is jax else mpl


X7 = np.linspace(-1, 2, 7).astype(np.float32)
LINALG_CASES = {
    "polyfit": (lambda L, x, y: _api(L).polyfit(x, y, 2), (X7, F32(7))),
    "polyfit_full": (lambda L, x, y: _api(L).polyfit(x, y, 3, full=True), (X7, F32(7))),
    "polyfit_rcond": (lambda L, x, y: _api(L).polyfit(x, y, 2, rcond=1e-3, full=True), (X7, F32(7))),
    "polyfit_cov": (lambda L, x, y: _api(L).polyfit(x, y, 2, cov=True), (X7, F32(7))),
    "polyfit_2d_w_cov": (lambda L, x, y, w: _api(L).polyfit(x, y, 2, w=w, cov=True),
                         (X7, F32(7, 2), np.linspace(0.5, 2, 7).astype(np.float32))),
    "polyfit_unscaled": (lambda L, x, y: _api(L).polyfit(x, y, 1, cov="unscaled"), (X7, F32(7, 3))),
    "polyfit_int": (lambda L, x, y: _api(L).polyfit(x, y, 1, rcond=1e-6), (np.arange(5, dtype=np.int32), I32(5))),
    "roots": (lambda L, p: L.numpy.sort_complex(_api(L).roots(p, strip_zeros=False)),
              (np.array([1, -6, 11, -6], np.float32),)),
    "roots_complex": (lambda L, p: L.numpy.sort_complex(_api(L).roots(p, strip_zeros=False)), (C64(4),)),
    "poly_matrix": (lambda L, a: _api(L).poly(a), (F32(3, 3),)),
    "poly_roots": (lambda L, z: _api(L).poly(z), (F32(3),)),
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", sorted(LINALG_CASES))
def test_linalg_backed(name: str, mode: str) -> None:
    case, args = LINALG_CASES[name]
    check_case(case, args, mode, rtol=2e-4, atol=2e-4)


ROOTS_CONCRETE = {
    "roots_strip": np.array([0, 0, 1, -6, 11, -6, 0, 0], np.float32),
    "roots_int": np.array([2, 1, 3], np.int32),
    "roots_all_zero": np.zeros(3, np.float32),
}


@pytest.mark.parametrize("name", sorted(ROOTS_CONCRETE))
def test_roots_strip_zeros(name: str) -> None:
    """strip_zeros=True (the default) needs concrete values: right eagerly, JAX's error under jit."""
    case = lambda L, p: L.numpy.sort_complex(_api(L).roots(p))  # noqa: E731
    args = (ROOTS_CONCRETE[name],)
    assert_matches(run_meshax(case, args, "eager"), run_jax(case, args), rtol=2e-4, atol=2e-4)
    with pytest.raises(meshax.errors.ConcretizationTypeError):
        run_meshax(case, args, "jit")
    with pytest.raises(jax.errors.ConcretizationTypeError):
        jax.jit(lambda p: case(jax, p))(*args)


def test_roots_of_constants() -> None:
    for p in (np.array([3], np.float32), np.array([0], np.int32)):
        for mode in MODES:
            check_case(lambda L, p: _api(L).roots(p), (p,), mode)


def test_polyfit_grad_and_vmap() -> None:
    fit = lambda L, x, y: _api(L).polyfit(x, y, 2)  # noqa: E731
    check_case(lambda L, x, y: L.grad(lambda y: L.numpy.sum(fit(L, x, y) ** 2))(y), (X7, F32(7)), "jit",
               rtol=2e-4, atol=2e-4)
    check_case(lambda L, x, y: L.vmap(lambda y: fit(L, x, y))(y), (X7, F32(3, 7)), "eager", rtol=2e-4, atol=2e-4)


def test_roots_grad() -> None:
    loss = lambda L, p: L.numpy.sum(L.numpy.abs(_api(L).roots(p, strip_zeros=False)) ** 2)  # noqa: E731
    check_case(lambda L, p: L.grad(lambda p: loss(L, p))(p), (np.array([1, -6, 11, -6], np.float32),), "jit",
               rtol=2e-4, atol=2e-4)


@pytest.mark.parametrize("call, error", [
    (lambda N: N.polyfit(N_ones(3), N_ones(3), -1), ValueError),
    (lambda N: N.polyfit(N_ones((3, 1)), N_ones(3), 1), TypeError),
    (lambda N: N.polyfit(N_ones(3), N_ones(4), 1), TypeError),
    (lambda N: N.roots(N_ones((2, 2))), ValueError),
    (lambda N: N.polyfit(np.arange(4), N_ones(4), 1), ValueError),
    (lambda N: N.poly(N_ones((2, 3))), ValueError),
])
def test_linalg_backed_errors(call, error) -> None:
    for N in (jax.numpy, mpl):
        with pytest.raises(error):
            call(N)


def N_ones(shape):
    return np.ones(shape, np.float32)


def test_lstsq_residuals_of_a_vector_and_eig_of_a_non_finite_matrix_as_jax():
    """lstsq of a 1-D b keeps its residuals' column (shape (1,)); eigenvalues of a matrix with an infinity are
    NaN in both parts (it raised LinAlgError)."""
    a = np.random.RandomState(0).randn(5, 2).astype(np.float32)
    b = np.arange(5.0, dtype=np.float32)
    ours, theirs = meshax.numpy.linalg.lstsq(a, b), jax.numpy.linalg.lstsq(a, b)
    assert ours[1].shape == theirs[1].shape == (1,)
    np.testing.assert_allclose(np.asarray(ours[1]), np.asarray(theirs[1]), rtol=1e-4)
    bad = np.array([[1.0, np.inf], [0.0, 1.0]], np.float32)
    ours, theirs = np.asarray(meshax.numpy.linalg.eigvals(bad)), np.asarray(jax.numpy.linalg.eigvals(bad))
    assert np.isnan(ours.real).all() and np.isnan(ours.imag).all() and np.isnan(theirs.imag).all()
