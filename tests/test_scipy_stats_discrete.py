"""meshax.scipy.stats' discrete distributions (bernoulli, betabinom, binom, geom, nbinom, poisson, multinomial) and
dirichlet against JAX 0.12's: every function over float32 arrays of edge values broadcast against each other,
Python scalars and integer arrays, eagerly and under jit; grad and vmap for a sample."""
from __future__ import annotations

from typing import Any

import jax
import numpy as np
import pytest

import meshax
from differential import assert_matches
from test_scipy_stats_continuous import compare, outer

ROLES = {
    "k": np.array([-1, 0, 1, 2, 3, 5, 10, 2.5, np.inf, np.nan], np.float32),
    "q": np.array([-0.1, 0, 0.2, 0.5, 0.8, 1, 1.2, np.nan], np.float32),
    "p": np.array([0, 0.2, 0.5, 1, -0.1, 1.5], np.float32),
    "n": np.array([0, 1, 5, 10, -1, 2.5], np.float32),
    "mu": np.array([0, 0.5, 3, 25, -1, np.nan], np.float32),
    "shape": np.array([0.5, 2, 0, -1], np.float32),
    "loc": np.array([0, 1], np.float32),
}
SCALARS = {"k": 2.0, "q": 0.4, "p": 0.3, "n": 6.0, "mu": 2.5, "shape": 1.5, "loc": 0.0}
INTS = {"k": np.arange(-1, 7, dtype=np.int32), "q": np.array([0, 1], np.int32), "p": 0.3,
        "n": np.array([[0], [3], [6]], np.int32), "mu": 2, "shape": 2, "loc": 1}

SPECS = {
    "bernoulli": {"logpmf": "k p loc", "pmf": "k p loc", "cdf": "k p", "ppf": "q p"},
    "betabinom": {"logpmf": "k n shape shape loc", "pmf": "k n shape shape loc"},
    "binom": {"logpmf": "k n p loc", "pmf": "k n p loc"},
    "geom": {"logpmf": "k p loc", "pmf": "k p loc"},
    "nbinom": {"logpmf": "k n p loc", "pmf": "k n p loc"},
    "poisson": {"logpmf": "k mu loc", "pmf": "k mu loc", "cdf": "k mu loc", "entropy": "mu loc"},
}
CASES = [(module, function, roles) for module, functions in SPECS.items() for function, roles in functions.items()]
IDS = [f"{m}.{f}" for m, f, _ in CASES]


@pytest.mark.parametrize("module,function,roles", CASES, ids=IDS)
def test_edge_value_arrays(module: str, function: str, roles: str) -> None:
    compare(module, function, tuple(outer(*(ROLES[r] for r in roles.split()))), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("module,function,roles", CASES, ids=IDS)
def test_python_scalars(module: str, function: str, roles: str) -> None:
    compare(module, function, tuple(SCALARS[r] for r in roles.split()), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("module,function,roles", CASES, ids=IDS)
def test_integer_array_with_python_scalars(module: str, function: str, roles: str) -> None:
    names = roles.split()
    compare(module, function, (INTS[names[0]],) + tuple(SCALARS[r] for r in names[1:]), modes=("eager",),
            rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("module,function,roles", CASES, ids=IDS)
def test_integer_arrays(module: str, function: str, roles: str) -> None:
    compare(module, function, tuple(INTS[r] for r in roles.split()), modes=("eager",), rtol=1e-4, atol=1e-5)


def test_poisson_entropy_over_its_three_regimes() -> None:
    mu = np.array([0, 0.3, 4, 9.99, 10, 55, 99.9, 100, 1e4], np.float32)
    compare("poisson", "entropy", (mu, np.array([[0], [2]], np.float32)), rtol=1e-4, atol=1e-5)


INTERIOR = {"k": 3.0, "q": 0.4, "p": 0.35, "n": 7.0, "mu": 2.5, "shape": 1.7, "loc": 0.0}
CONTINUOUS_ARGUMENTS = {"p", "mu", "shape", "n"}


def _gradient(library: Any, module: str, function: str, args: tuple, argnum: int) -> Any:
    f = getattr(getattr(library.scipy.stats, module), function)
    return library.grad(lambda *a: f(*a), argnums=argnum)(*(library.numpy.asarray(a) for a in args))


@pytest.mark.parametrize("module,function,roles", [c for c in CASES if c[1] in ("logpmf", "entropy")],
                         ids=[f"{m}.{f}" for m, f, _ in CASES if f in ("logpmf", "entropy")])
def test_grad_with_respect_to_continuous_parameters(module: str, function: str, roles: str) -> None:
    names = roles.split()
    args = tuple(np.float32(INTERIOR[r]) for r in names)
    for argnum, name in enumerate(names):
        if name in CONTINUOUS_ARGUMENTS:
            with jax.disable_jit():
                theirs = _gradient(jax, module, function, args, argnum)
            assert_matches(_gradient(meshax, module, function, args, argnum), theirs, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("module", list(SPECS))
def test_vmap(module: str) -> None:
    function = "logpmf" if "logpmf" in SPECS[module] else "cdf"
    roles = SPECS[module][function].split()
    ks = np.arange(6, dtype=np.float32)
    params = tuple(np.float32(INTERIOR[r]) for r in roles[1:])

    def mapped(library: Any) -> Any:
        f = getattr(getattr(library.scipy.stats, module), function)
        return library.vmap(lambda k: f(k, *params))(library.numpy.asarray(ks))

    with jax.disable_jit():
        theirs = mapped(jax)
    assert_matches(mapped(meshax), theirs, rtol=1e-4, atol=1e-5)


# multinomial: integer counts along the last axis, probabilities broadcast against them
COUNTS = np.array([[2, 1, 0], [0, 0, 3], [1, 1, 1], [4, 0, -1], [1, 0, 0]], np.int32)
PROBABILITIES = [np.array([0.2, 0.3, 0.5], np.float32), np.array([0.0, 0.5, 0.5], np.float32),
                 np.array([[0.1, 0.1, 0.8], [1.0, 0.0, 0.0]], np.float32)[:, None, :]]


@pytest.mark.parametrize("function", ["logpmf", "pmf"])
@pytest.mark.parametrize("p", range(len(PROBABILITIES)))
@pytest.mark.parametrize("n", [3, np.array([3, 3, 3, 3, 1], np.int32)], ids=["scalar_n", "array_n"])
def test_multinomial(function: str, p: int, n: Any) -> None:
    compare("multinomial", function, (COUNTS, n, PROBABILITIES[p]), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("x,n", [(COUNTS.astype(np.float32), 3), (COUNTS, 3.0)], ids=["float_x", "float_n"])
def test_multinomial_rejects_non_integer_counts(x: Any, n: Any) -> None:
    compare("multinomial", "logpmf", (x, n, PROBABILITIES[0]))


def test_multinomial_grad_and_vmap() -> None:
    def case(library: Any) -> Any:
        stats = library.scipy.stats
        counts = library.numpy.asarray(COUNTS[:3])
        grad = library.grad(lambda p: library.numpy.sum(stats.multinomial.logpmf(counts, 3, p)))(
            library.numpy.asarray(PROBABILITIES[0]))
        mapped = library.vmap(lambda x: stats.multinomial.pmf(x, 3, library.numpy.asarray(PROBABILITIES[0])))(counts)
        return grad, mapped

    with jax.disable_jit():
        theirs = case(jax)
    assert_matches(case(meshax), theirs, rtol=1e-5, atol=1e-6)


# dirichlet: the components along axis 0 (the last one may be left out), alpha one-dimensional
SIMPLEX = np.array([[0.2, 0.5, 0.0, 0.4, 1 / 3], [0.3, 0.25, 0.5, 0.4, 1 / 3], [0.5, 0.25, 0.5, 0.3, 1 / 3]],
                   np.float32)
ALPHAS = [np.array([1.0, 2.0, 3.0], np.float32), np.array([0.5, 0.5, 4.0], np.float32),
          np.array([1.0, 1.0, 1.0], np.float32)]


@pytest.mark.parametrize("function", ["logpdf", "pdf"])
@pytest.mark.parametrize("alpha", range(len(ALPHAS)))
@pytest.mark.parametrize("x", ["columns", "one_point", "last_left_out"])
def test_dirichlet(function: str, alpha: int, x: str) -> None:
    points = {"columns": SIMPLEX, "one_point": SIMPLEX[:, 0], "last_left_out": SIMPLEX[:2]}[x]
    compare("dirichlet", function, (points, ALPHAS[alpha]), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("x,alpha", [(SIMPLEX, ALPHAS[0][:, None]), (SIMPLEX[:1], ALPHAS[0])],
                         ids=["two_dimensional_alpha", "too_few_components"])
def test_dirichlet_rejects_bad_shapes(x: np.ndarray, alpha: np.ndarray) -> None:
    compare("dirichlet", "logpdf", (x, alpha))


def test_dirichlet_grad_and_vmap() -> None:
    def case(library: Any) -> Any:
        stats, x = library.scipy.stats, library.numpy.asarray(SIMPLEX[:, 0])
        grad = library.grad(lambda a: stats.dirichlet.logpdf(x, a))(library.numpy.asarray(ALPHAS[0]))
        mapped = library.vmap(lambda p: stats.dirichlet.pdf(p, library.numpy.asarray(ALPHAS[1])), in_axes=1)(
            library.numpy.asarray(SIMPLEX))
        return grad, mapped

    with jax.disable_jit():
        theirs = case(jax)
    assert_matches(case(meshax), theirs, rtol=1e-5, atol=1e-6)
