"""meshax.scipy.stats' mode, rankdata, sem and gaussian_kde against JAX 0.12's: dtypes x shapes x axes x keywords
(ties and NaNs included), eagerly and under jit, the errors JAX raises, and the kde's methods, pytree, grad and
vmap."""
from __future__ import annotations

from typing import Any

import jax
import numpy as np
import pytest

import meshax
from differential import assert_matches

RNG = np.random.default_rng(0)
TIES = RNG.integers(0, 4, (5, 6))
WITH_NAN = TIES.astype(np.float32)
WITH_NAN[1, 2] = np.nan
ARRAYS = {"int32": TIES.astype(np.int32), "float32": TIES.astype(np.float32) * 0.5, "nan": WITH_NAN,
          "vector": RNG.integers(0, 3, 7).astype(np.float32), "scalar": np.float32(2.5)}


def as_library(library: Any, value: Any) -> Any:
    return library.numpy.asarray(value) if isinstance(value, (np.ndarray, np.generic)) else value


def compare(name: str, value: Any, jit: bool = True, **keywords: Any) -> None:
    """stats.name(value, **keywords) in meshax (eagerly and jitted) equals JAX's; where JAX raises, the same class."""
    def run(library: Any, jitted: bool) -> Any:
        function = getattr(library.scipy.stats, name)
        call = library.jit(lambda v: function(v, **keywords)) if jitted else lambda v: function(v, **keywords)
        out = call(as_library(library, value))
        return tuple(out) if name == "mode" else out

    try:
        theirs = run(jax, False)
    except Exception as error:  # noqa: BLE001 - the class is what is compared
        with pytest.raises(type(error)):
            run(meshax, False)
        return
    for jitted in (False, True) if jit else (False,):
        assert_matches(run(meshax, jitted), theirs, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("array", list(ARRAYS))
@pytest.mark.parametrize("axis,keepdims", [(0, False), (1, False), (-1, True), (None, False), (None, True)])
def test_mode(array: str, axis: Any, keepdims: bool) -> None:
    value = ARRAYS[array]
    if axis is not None and (np.ndim(value) <= 1 and axis in (1,)):
        axis = 0
    compare("mode", value, axis=axis, keepdims=keepdims)


@pytest.mark.parametrize("value", [np.zeros((0, 3), np.float32), np.array([1.0, np.nan, np.nan], np.float32), 4],
                         ids=["empty", "nan_most_common", "python_int"])
def test_mode_edges(value: Any) -> None:
    compare("mode", value, jit=False)


def test_mode_result_fields() -> None:
    result = meshax.scipy.stats.mode(meshax.numpy.asarray(ARRAYS["int32"]))
    assert type(result).__name__ == "ModeResult" and result._fields == ("mode", "count")


@pytest.mark.parametrize("array", ["int32", "float32", "nan", "vector"])
@pytest.mark.parametrize("method", ["average", "min", "max", "dense", "ordinal"])
@pytest.mark.parametrize("axis", [None, 0, -1])
def test_rankdata(array: str, method: str, axis: Any) -> None:
    compare("rankdata", ARRAYS[array], jit=False, method=method, axis=axis)


@pytest.mark.parametrize("method", ["average", "dense"])
def test_rankdata_jit(method: str) -> None:
    value = ARRAYS["float32"]
    theirs = jax.scipy.stats.rankdata(jax.numpy.asarray(value), method, axis=1)
    ours = meshax.jit(lambda v: meshax.scipy.stats.rankdata(v, method, axis=1))(meshax.numpy.asarray(value))
    assert_matches(ours, theirs)


@pytest.mark.parametrize("array", ["int32", "float32", "nan", "vector"])
@pytest.mark.parametrize("axis,ddof,keepdims", [(0, 1, False), (-1, 0, True), (None, 1, False), (None, 2, True)])
@pytest.mark.parametrize("nan_policy", ["propagate", "omit"])
def test_sem(array: str, axis: Any, ddof: int, keepdims: bool, nan_policy: str) -> None:
    compare("sem", ARRAYS[array], axis=axis, ddof=ddof, keepdims=keepdims, nan_policy=nan_policy)


@pytest.mark.parametrize("name,keywords", [
    ("mode", {"nan_policy": "omit"}), ("mode", {"nan_policy": "raise"}), ("mode", {"nan_policy": "bad"}),
    ("rankdata", {"nan_policy": "omit"}), ("rankdata", {"nan_policy": "bad"}), ("rankdata", {"method": "bad"}),
    ("sem", {"nan_policy": "raise"}),
], ids=lambda v: str(v))
def test_errors(name: str, keywords: dict) -> None:
    compare(name, ARRAYS["float32"], jit=False, **keywords)


def test_grad_and_vmap_of_sem() -> None:
    def case(library: Any) -> Any:
        x = library.numpy.asarray(ARRAYS["float32"])
        return (library.grad(lambda v: library.scipy.stats.sem(v, axis=None))(x),
                library.vmap(lambda v: library.scipy.stats.sem(v))(x))

    assert_matches(case(meshax), case(jax), rtol=1e-5, atol=1e-6)


# gaussian_kde
DATA_2D = RNG.normal(size=(2, 7)).astype(np.float32)
DATA_1D = RNG.normal(size=9).astype(np.float32)
WEIGHTS = RNG.uniform(0.5, 2, 7).astype(np.float32)
POINTS = RNG.normal(size=(2, 4)).astype(np.float32)
BANDWIDTHS = {"default": None, "scott": "scott", "silverman": "silverman", "scalar": 0.4,
              "callable": lambda kde: kde.neff ** -0.3}


def kde_case(library: Any, bandwidth: str, weighted: bool) -> dict:
    stats, array = library.scipy.stats, library.numpy.asarray
    kde = stats.gaussian_kde(array(DATA_2D), bw_method=BANDWIDTHS[bandwidth],
                             weights=array(WEIGHTS) if weighted else None)
    line = stats.gaussian_kde(array(DATA_1D), bw_method=BANDWIDTHS[bandwidth])
    other = stats.gaussian_kde(array(DATA_2D[:, :5] + 0.3))
    mean, cov = array(np.array([0.1, 0.2], np.float32)), array(np.eye(2, dtype=np.float32))
    return {"fields": [kde.neff, kde.dataset, kde.weights, kde.covariance, kde.inv_cov], "sizes": (kde.d, kde.n),
            "evaluate": kde.evaluate(array(POINTS)), "call": kde(array(POINTS)), "pdf": line.pdf(array(DATA_1D[:4])),
            "logpdf": kde.logpdf(array(POINTS)), "one_point": kde.evaluate(array(POINTS[:, 0])),
            "gaussian": kde.integrate_gaussian(mean, cov), "box": line.integrate_box_1d(-0.5, 1.0),
            "kde": kde.integrate_kde(other), "kde_swapped": other.integrate_kde(kde),
            "resample": kde.resample(library.random.key(3), (5,)), "resample_1d": line.resample(library.random.key(4))}


@pytest.mark.parametrize("bandwidth", list(BANDWIDTHS))
@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
def test_gaussian_kde(bandwidth: str, weighted: bool) -> None:
    with jax.disable_jit():
        theirs = kde_case(jax, bandwidth, weighted)
    assert_matches(kde_case(meshax, bandwidth, weighted), theirs, rtol=2e-5, atol=2e-6)


def test_gaussian_kde_is_a_pytree_under_jit_grad_and_vmap() -> None:
    def case(library: Any) -> Any:
        array = library.numpy.asarray
        kde = library.scipy.stats.gaussian_kde(array(DATA_2D))
        leaves = library.tree_util.tree_leaves(kde)
        evaluated = library.jit(lambda k, x: k.logpdf(x))(kde, array(POINTS))
        by_point = library.grad(lambda x: library.numpy.sum(kde.logpdf(x)))(array(POINTS))
        by_data = library.grad(lambda d: library.scipy.stats.gaussian_kde(d).evaluate(array(POINTS))[0])(array(DATA_2D))
        mapped = library.vmap(lambda x: kde.pdf(x[:, None]), in_axes=1)(array(POINTS))
        return leaves, evaluated, by_point, by_data, mapped

    with jax.disable_jit():
        theirs = case(jax)
    assert_matches(case(meshax), theirs, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("build", [
    lambda L: L.scipy.stats.gaussian_kde(L.numpy.asarray(DATA_2D.astype(np.complex64))),
    lambda L: L.scipy.stats.gaussian_kde(L.numpy.asarray(np.ones(1, np.float32))),
    lambda L: L.scipy.stats.gaussian_kde(L.numpy.asarray(DATA_2D), weights=L.numpy.asarray(WEIGHTS[:3])),
    lambda L: L.scipy.stats.gaussian_kde(L.numpy.asarray(DATA_2D), weights=L.numpy.asarray(np.ones((7, 1)))),
    lambda L: L.scipy.stats.gaussian_kde(L.numpy.asarray(DATA_2D), bw_method="bad"),
    lambda L: L.scipy.stats.gaussian_kde(DATA_2D.tolist()),
    lambda L: L.scipy.stats.gaussian_kde(L.numpy.asarray(DATA_2D)).evaluate(L.numpy.asarray(np.ones((3, 2)))),
    lambda L: L.scipy.stats.gaussian_kde(L.numpy.asarray(DATA_2D)).integrate_box_1d(0.0, 1.0),
    lambda L: L.scipy.stats.gaussian_kde(L.numpy.asarray(DATA_1D)).integrate_box_1d(L.numpy.zeros(2), 1.0),
    lambda L: L.scipy.stats.gaussian_kde(L.numpy.asarray(DATA_2D)).integrate_gaussian(L.numpy.zeros(3), L.numpy.eye(2)),
    lambda L: L.scipy.stats.gaussian_kde(L.numpy.asarray(DATA_2D)).integrate_gaussian(L.numpy.zeros(2), L.numpy.eye(3)),
    lambda L: L.scipy.stats.gaussian_kde(L.numpy.asarray(DATA_2D)).integrate_kde(
        L.scipy.stats.gaussian_kde(L.numpy.asarray(DATA_1D))),
    lambda L: L.scipy.stats.gaussian_kde(L.numpy.asarray(DATA_2D)).integrate_box(0.0, 1.0),
    lambda L: L.scipy.stats.gaussian_kde(L.numpy.asarray(DATA_2D)).set_bandwidth("scott"),
    lambda L: L.scipy.stats.gaussian_kde(L.numpy.asarray(DATA_2D)).evaluate(DATA_2D.tolist()),
], ids=["complex", "one_element", "short_weights", "2d_weights", "bad_bandwidth", "list", "wrong_dimension",
        "box_2d", "box_array_limit", "gaussian_mean", "gaussian_cov", "kde_dimension", "integrate_box", "set_bandwidth",
        "list_points"])
def test_gaussian_kde_errors(build: Any) -> None:
    with pytest.raises(Exception) as theirs:
        build(jax)
    with pytest.raises(theirs.type):
        build(meshax)
