"""meshax.scipy.stats' continuous distributions against JAX 0.12's: every function of every module, over float32
arrays of edge values broadcast against each other, Python scalars and integer arrays; eagerly and under jit
(values, shapes, dtypes, weak types). Derivatives and vmap: test_scipy_stats_derivatives.py."""
from __future__ import annotations

import importlib
import warnings
from typing import Any

import jax
import numpy as np
import pytest

import meshax
from differential import assert_matches

X = np.array([-np.inf, -3, -1, -0.25, 0, 0.2, 0.5, 0.8, 1, 1.5, 3, 7, np.inf, np.nan], np.float32)
Q = np.array([-0.1, 0, 1e-3, 0.25, 0.5, 0.75, 0.999, 1, 1.2, np.nan], np.float32)
ROLES = {
    "x": X, "q": Q,
    "loc": np.array([0.0, 0.5], np.float32),
    "scale": np.array([0.7, 2.0, 0.0, -1.0], np.float32),
    "shape": np.array([0.5, 1.0, 2.5, 0.0, -1.0], np.float32),
    "c": np.array([0.3, 0.9, 0.0, 1.0, -0.5], np.float32),
    "lower": np.array([-np.inf, -1.0, 0.5, 2.0], np.float32),
    "upper": np.array([np.inf, 1.0, 3.0, -2.0], np.float32),
}
SCALARS = {"x": 0.7, "q": 0.3, "loc": 0.25, "scale": 1.5, "shape": 2.5, "c": 0.4, "lower": -0.5, "upper": 1.5}
INTS = {"x": np.arange(-1, 4, dtype=np.int32), "q": np.array([0, 1], np.int32), "loc": 0, "scale": 2, "shape": 3,
        "c": 0, "lower": -1, "upper": 2}

# module -> (functions taking x, functions taking q, roles of the parameters after x or q)
SPECS: dict[str, tuple[str, str, str]] = {
    "norm": ("cdf logcdf logpdf logsf pdf sf", "isf ppf", "loc scale"),
    "logistic": ("cdf logpdf pdf sf", "isf ppf", "loc scale"),
    "cauchy": ("cdf logcdf logpdf logsf pdf sf", "isf ppf", "loc scale"),
    "expon": ("cdf logcdf logpdf logsf pdf sf", "ppf", "loc scale"),
    "gumbel_l": ("cdf logcdf logpdf logsf pdf sf", "ppf", "loc scale"),
    "gumbel_r": ("cdf logcdf logpdf logsf pdf sf", "ppf", "loc scale"),
    "laplace": ("cdf logpdf pdf", "", "loc scale"),
    "uniform": ("cdf logpdf pdf", "ppf", "loc scale"),
    "pareto": ("cdf logcdf logpdf logsf pdf sf", "ppf", "shape loc scale"),
    "beta": ("cdf logcdf logpdf logsf pdf sf", "", "shape shape loc scale"),
    "chi2": ("cdf logcdf logpdf logsf pdf sf", "", "shape loc scale"),
    "gamma": ("cdf logcdf logpdf logsf pdf sf", "", "shape loc scale"),
    "gennorm": ("cdf logpdf pdf", "", "shape"),
    "t": ("logpdf pdf", "", "shape loc scale"),
    "truncnorm": ("cdf logcdf logpdf logsf pdf sf", "", "lower upper loc scale"),
    "vonmises": ("logpdf pdf", "", "shape"),
    "wrapcauchy": ("logpdf pdf", "", "c"),
}
CASES = [(module, function, "q" if function in q_functions.split() else "x", roles)
         for module, (x_functions, q_functions, roles) in SPECS.items()
         for function in (x_functions + " " + q_functions).split()]
TOLERANCES = {"rtol": 2e-5, "atol": 2e-6}


def stats_function(library: Any, module: str, function: str) -> Any:
    return getattr(importlib.import_module(f"{library.__name__}.scipy.stats.{module}"), function)


def outer(*values: np.ndarray) -> list[np.ndarray]:
    """Each array along its own axis (the first along the last), so that they broadcast to every combination."""
    count = len(values)
    return [np.reshape(v, v.shape + (1,) * i) for i, v in zip(range(count - 1, -1, -1), values)]


def as_library(library: Any, value: Any) -> Any:
    return library.numpy.asarray(value) if isinstance(value, np.ndarray) else value


def compare(module: str, function: str, args: tuple, modes: tuple[str, ...] = ("eager", "jit"),
            **tolerances: Any) -> None:
    """module.function(*args) in meshax (eagerly and under jit) matches JAX's, run op by op (JAX caches each
    operation's compilation, where a jitted call would compile the whole function for each case); where JAX
    raises, meshax raises the same exception class."""
    tolerances = tolerances or TOLERANCES
    ours_fn = stats_function(meshax, module, function)
    ours_args = tuple(as_library(meshax, a) for a in args)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        try:
            with jax.disable_jit():
                theirs = stats_function(jax, module, function)(*(as_library(jax, a) for a in args))
        except Exception as error:  # noqa: BLE001 - the class is what is compared
            with pytest.raises(type(error)):
                ours_fn(*ours_args)
            return
        for mode in modes:
            ours = ours_fn(*ours_args) if mode == "eager" else meshax.jit(ours_fn)(*ours_args)
            assert_matches(ours, theirs, **tolerances)


# meshax.lax.igamma(0, x) is SciPy's 1 where JAX's is NaN (x > 0): the CDFs built on it are tested without shape 0
# here, and test_igamma_at_shape_zero records the difference.
IGAMMA_CDFS = {("gamma", "cdf"), ("gamma", "logcdf"), ("chi2", "cdf"), ("chi2", "logcdf")}


def edge_values(module: str, function: str, role: str) -> np.ndarray:
    values = ROLES[role]
    return values[values != 0] if (module, function) in IGAMMA_CDFS and role == "shape" else values


@pytest.mark.parametrize("module,function,first,roles", CASES, ids=[f"{m}.{f}" for m, f, _, _ in CASES])
def test_edge_value_arrays(module: str, function: str, first: str, roles: str) -> None:
    compare(module, function, tuple(outer(*(edge_values(module, function, r) for r in [first] + roles.split()))))


@pytest.mark.xfail(strict=True, reason="meshax.lax.igamma(0, x) is 1 (SciPy's value) where JAX's is NaN")
def test_igamma_at_shape_zero() -> None:
    compare("gamma", "cdf", (np.float32(0.5), np.float32(0.0)))


@pytest.mark.parametrize("module,function,first,roles", CASES, ids=[f"{m}.{f}" for m, f, _, _ in CASES])
def test_python_scalars(module: str, function: str, first: str, roles: str) -> None:
    compare(module, function, tuple(SCALARS[r] for r in [first] + roles.split()))


@pytest.mark.parametrize("module,function,first,roles", CASES, ids=[f"{m}.{f}" for m, f, _, _ in CASES])
def test_integer_array_with_python_scalars(module: str, function: str, first: str, roles: str) -> None:
    """An integer array promoted with Python floats is a weakly typed float32 array: JAX's constants made from it
    are strong, which decides the weak type of some results."""
    compare(module, function, (INTS[first],) + tuple(SCALARS[r] for r in roles.split()), modes=("eager",))


@pytest.mark.parametrize("module,function,first,roles", CASES, ids=[f"{m}.{f}" for m, f, _, _ in CASES])
def test_integer_arrays(module: str, function: str, first: str, roles: str) -> None:
    compare(module, function, tuple(INTS[r] for r in [first] + roles.split()), modes=("eager",))
