"""Derivatives and batching of meshax.scipy.stats' continuous distributions against JAX 0.12's: grad of logpdf and
cdf with respect to every argument at an interior point, vmap over x for each module; and every module's functions
and signatures as JAX's."""
from __future__ import annotations

from typing import Any

import jax
import numpy as np
import pytest

import meshax
from differential import assert_matches
from test_scipy_stats_continuous import CASES, SPECS, TOLERANCES, stats_function

# masked-out branches (log of a negative number where the result is replaced) warn in NumPy
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

# logpdf and cdf: gradient with respect to every argument at interior points, and vmap over x
INTERIOR = {"x": 0.6, "q": 0.3, "loc": 0.1, "scale": 1.3, "shape": 2.2, "c": 0.4, "lower": -0.5, "upper": 1.5}
GRAD_CASES = [case for case in CASES if case[1] in ("logpdf", "cdf")]


# derivatives meshax.lax does not have (JAX's use series for d/da of betainc and igamma): these raise
NO_DERIVATIVE = {("beta", "cdf"): (1, 2), ("gamma", "cdf"): (1,), ("chi2", "cdf"): (1,), ("gennorm", "cdf"): (1,)}


def gradient(library: Any, module: str, function: str, args: tuple, argnum: int) -> Any:
    f = stats_function(library, module, function)
    return library.grad(lambda *a: library.numpy.sum(f(*a)), argnums=argnum)(*(library.numpy.asarray(a)
                                                                                for a in args))


def jax_gradient(module: str, function: str, args: tuple, argnum: int) -> Any:
    """JAX's derivative, op by op (as the values are compared: no whole-function compilation per case)."""
    with jax.disable_jit():
        return gradient(jax, module, function, args, argnum)


@pytest.mark.parametrize("module,function,first,roles", GRAD_CASES, ids=[f"{m}.{f}" for m, f, _, _ in GRAD_CASES])
def test_grad(module: str, function: str, first: str, roles: str) -> None:
    """d/d(each argument) at an interior point; where JAX's own derivative fails (gumbel's xlogy(-1, scale) has a
    float0 tangent) meshax's must at least be finite."""
    args = tuple(np.float32(INTERIOR[r]) for r in [first] + roles.split())
    for argnum in range(len(args)):
        if argnum in NO_DERIVATIVE.get((module, function), ()):
            with pytest.raises(NotImplementedError):
                gradient(meshax, module, function, args, argnum)
            continue
        ours = gradient(meshax, module, function, args, argnum)
        try:
            theirs = jax_gradient(module, function, args, argnum)
        except TypeError as error:
            assert "float0" in str(error)
            assert np.isfinite(np.asarray(ours))
            continue
        assert_matches(ours, theirs, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("module", list(SPECS))
def test_vmap(module: str) -> None:
    function = "logpdf" if "logpdf" in SPECS[module][0].split() else "cdf"
    roles = SPECS[module][2].split()
    xs = np.linspace(0.05, 0.95, 6).astype(np.float32)
    params = tuple(np.float32(INTERIOR[r]) for r in roles)

    def mapped(library: Any) -> Any:
        f = stats_function(library, module, function)
        return library.vmap(lambda x: f(x, *params))(library.numpy.asarray(xs))

    with jax.disable_jit():
        theirs = mapped(jax)
    assert_matches(mapped(meshax), theirs, **TOLERANCES)


def test_every_module_has_jaxs_functions_and_signatures() -> None:
    import inspect
    import types

    import jax.scipy.stats as theirs

    import meshax.scipy.stats as ours
    for name in [n for n in dir(theirs) if not n.startswith("_")]:
        their_module, our_module = getattr(theirs, name), getattr(ours, name)
        pairs = ([(getattr(their_module, f), getattr(our_module, f)) for f in dir(their_module)
                  if not f.startswith("_") and callable(getattr(their_module, f))]
                 if isinstance(their_module, types.ModuleType) else [(their_module, our_module)])
        for their_function, our_function in pairs:
            signature = [(p.name, p.kind, p.default) for p in inspect.signature(their_function).parameters.values()]
            assert signature == [(p.name, p.kind, p.default)
                                 for p in inspect.signature(our_function).parameters.values()], (name, their_function)
