"""meshax.numpy's set operations, sorting helpers, histograms and interp against real JAX: eagerly, under jit
(with size= where the length depends on the data), and under grad and vmap where JAX defines them."""
from __future__ import annotations

import jax
import numpy as np
import pytest

import meshax
from differential import check_case, check_modes

RNG = np.random.default_rng(12)
A = np.array([5, 3, 3, 7, -2, 0], np.int32)
B = np.array([[7, 9], [3, 4]], np.int32)
F = np.array([1.5, -0.5, 2.0, 1.5, np.pi], np.float32)
G = np.array([2.0, 0.25, 1.5], np.float32)
SETS = ("union1d", "setdiff1d", "setxor1d", "intersect1d")
PAIRS = [(A, B), (F, G), (A, G), (B, A), (A, np.zeros(0, np.int32)), (F, F)]
SIZED = [{"size": 1}, {"size": 4}, {"size": 9}, {"size": 9, "fill_value": -1}]


@pytest.mark.parametrize("name", SETS)
@pytest.mark.parametrize("pair", range(len(PAIRS)))
def test_set_ops_eager(name: str, pair: int) -> None:
    check_case(lambda L, a, b: getattr(L.numpy, name)(a, b), PAIRS[pair], "eager")


@pytest.mark.parametrize("name", SETS)
@pytest.mark.parametrize("kwargs", SIZED)
def test_set_ops_sized(name: str, kwargs: dict) -> None:
    """Eagerly and under jit, against one run of JAX's (op by op) per pair."""
    for pair in PAIRS[:4]:
        check_modes(lambda L, a, b: getattr(L.numpy, name)(a, b, **kwargs), *pair)


@pytest.mark.parametrize("name", SETS)
def test_set_ops_sized_in_shard_map(name: str) -> None:
    check_case(lambda L, a, b: getattr(L.numpy, name)(a, b, size=5), PAIRS[0], "shard_map")


@pytest.mark.parametrize("name", ["setdiff1d", "setxor1d", "intersect1d"])
@pytest.mark.parametrize("mode", ["eager", "jit"])
def test_set_ops_assume_unique(name: str, mode: str) -> None:
    a, b = np.array([4, 1, 9, 3], np.int32), np.array([3, 8, 4, 0, 2], np.int32)
    check_case(lambda L, a, b: getattr(L.numpy, name)(a, b, assume_unique=True, size=6), (a, b), mode)
    if mode == "eager":
        check_case(lambda L, a, b: getattr(L.numpy, name)(a, b, True), (a, b), mode)


@pytest.mark.parametrize("mode", ["eager", "jit"])
def test_intersect1d_return_indices(mode: str) -> None:
    for a, b in PAIRS[:4]:
        check_case(lambda L, a, b: L.numpy.intersect1d(a, b, return_indices=True, size=5, fill_value=0), (a, b), mode)
    check_case(lambda L, a, b: L.numpy.intersect1d(a, b, return_indices=True), (A, B), "eager")
    check_case(lambda L, a, b: L.numpy.intersect1d(a, b, return_indices=True, size=3), (A, np.array([1, 2])), mode)


@pytest.mark.parametrize("name", SETS)
def test_set_ops_need_size_under_jit(name: str) -> None:
    with pytest.raises(jax.errors.ConcretizationTypeError):
        jax.jit(getattr(jax.numpy, name))(A, A)
    with pytest.raises(meshax.errors.ConcretizationTypeError, match="size"):
        meshax.jit(getattr(meshax.numpy, name))(A, A)


def test_set_ops_vmap_with_size() -> None:
    rows = RNG.integers(0, 6, (3, 5)).astype(np.int32)
    case = lambda L, r: L.vmap(lambda x: L.numpy.setdiff1d(x, np.array([1, 2]), size=5))(r)  # noqa: E731
    check_case(case, (rows,), "eager")
    check_case(case, (rows,), "jit")


@pytest.mark.parametrize("mode", ["eager", "jit", "shard_map"])
def test_lexsort(mode: str) -> None:
    k1, k2 = RNG.integers(0, 3, (2, 4, 7)).astype(np.int32)
    check_case(lambda L, a, b: L.numpy.lexsort([a, b]), (k1, k2), mode)
    check_case(lambda L, a, b: L.numpy.lexsort((a, b), axis=0), (k1, k2.astype(np.float32)), mode)
    check_case(lambda L, a: L.numpy.lexsort(a), (np.stack([k1, k2]),), mode)
    check_case(lambda L, a, b: L.vmap(lambda x, y: L.numpy.lexsort([x, y]))(a, b), (k1, k2), mode)


@pytest.mark.parametrize("name", ["partition", "argpartition"])
@pytest.mark.parametrize("mode", ["eager", "jit"])
def test_partition(name: str, mode: str) -> None:
    x = RNG.permutation(24).reshape(4, 6).astype(np.float32)
    for kth, axis in [(0, -1), (2, -1), (5, 1), (-1, -1), (1, 0), (3, 0)]:
        check_case(lambda L, a: getattr(L.numpy, name)(a, kth, axis=axis), (x,), mode)
    check_case(lambda L, a: L.vmap(lambda r: getattr(L.numpy, name)(r, 2))(a), (x.astype(np.int32),), mode)


def test_partition_grad_and_errors() -> None:
    x = RNG.permutation(6).astype(np.float32)
    check_case(lambda L, a: L.grad(lambda v: (L.numpy.partition(v, 2) * np.arange(6.0)).sum())(a), (x,), "eager")
    with pytest.raises(ValueError):
        meshax.numpy.partition(x, 6)


@pytest.mark.parametrize("mode", ["eager", "jit", "shard_map"])
def test_sort_complex(mode: str) -> None:
    c = (RNG.normal(size=(3, 4)) + 1j * RNG.integers(0, 2, (3, 4))).astype(np.complex64)
    for x in (c, A, F, np.array([3, 1, 2], np.int8)):
        check_case(lambda L, a: L.numpy.sort_complex(a), (x,), mode)


@pytest.mark.parametrize("mode", ["eager", "jit", "shard_map"])
def test_digitize(mode: str) -> None:
    x = np.array([-1.0, 0.0, 0.5, 1.0, 2.5, 4.0, 9.0], np.float32)
    for bins in (np.array([0.0, 1.0, 2.5, 4.0], np.float32), np.array([4.0, 2.5, 1.0, 0.0], np.float32),
                 np.array([0, 1, 1, 4], np.int32)):
        for right in (False, True):
            check_case(lambda L, a, b: L.numpy.digitize(a, b, right), (x, bins), mode)
            check_case(lambda L, a, b: L.numpy.digitize(a, b, right=right, method="compare_all"), (x, bins), mode)
    check_case(lambda L, a, b: L.numpy.digitize(a, b), (A, np.array([0, 4], np.int32)), mode)
    falling = np.sort(G)[::-1].copy()
    check_case(lambda L, a, b: L.vmap(L.numpy.digitize, (0, None))(a, b), (x.reshape(7, 1), falling), mode)


HIST = [{}, {"bins": 4}, {"bins": 3, "range": (0.0, 2.0)}, {"bins": np.array([-1.0, 0.0, 2.0, 5.0])},
        {"density": True}, {"bins": 5, "density": True}]


@pytest.mark.parametrize("kwargs", HIST)
@pytest.mark.parametrize("mode", ["eager", "jit", "shard_map"])
def test_histogram(kwargs: dict, mode: str) -> None:
    data = RNG.normal(size=40).astype(np.float32)
    w = RNG.uniform(size=40).astype(np.float32)
    check_case(lambda L, a: L.numpy.histogram(a, **kwargs), (data,), mode, rtol=1e-5)
    check_case(lambda L, a, w: L.numpy.histogram(a, weights=w, **kwargs), (data, w), mode, rtol=1e-5)
    check_case(lambda L, a: L.numpy.histogram_bin_edges(a, **{k: v for k, v in kwargs.items() if k != "density"}),
               (data,), mode, rtol=1e-5)


@pytest.mark.parametrize("mode", ["eager", "jit"])
def test_histogram_dtypes_and_points(mode: str) -> None:
    check_case(lambda L, a: L.numpy.histogram(a), (np.arange(5, dtype=np.int32),), mode, rtol=1e-5)
    check_case(lambda L, a: L.numpy.histogram(a, 3), (np.ones(4, np.float32),), mode)
    check_case(lambda L, a, w: L.numpy.histogram(a, weights=w), (np.arange(5, dtype=np.float16),
                                                                  np.arange(5, dtype=np.int32)), mode, rtol=1e-3)


def test_histogram_grad_and_vmap() -> None:
    data = RNG.normal(size=20).astype(np.float32)
    w = RNG.uniform(size=20).astype(np.float32)
    case = lambda L, a, w: L.grad(lambda v: (L.numpy.histogram(a, 4, weights=v)[0] ** 2).sum())(w)  # noqa: E731
    check_case(case, (data, w), "eager", rtol=1e-5)
    check_case(lambda L, a: L.vmap(lambda r: L.numpy.histogram(r, 3)[0])(a), (data.reshape(4, 5),), "eager",
               rtol=1e-5)


HIST2 = [{}, {"bins": 3}, {"bins": [2, 4]}, {"bins": np.array([2, 3])}, {"bins": [np.array([-1.0, 0.5, 2.0]), 3]},
         {"bins": np.array([-1.0, 0.0, 1.0])},
         {"bins": 3, "range": [(-1, 1), (0, 2)]}, {"bins": [2, 3], "density": True}]


@pytest.mark.parametrize("kwargs", HIST2)
@pytest.mark.parametrize("mode", ["eager", "jit"])
def test_histogram2d_and_dd(kwargs: dict, mode: str) -> None:
    x, y, z = RNG.normal(size=(3, 30)).astype(np.float32)
    w = RNG.uniform(size=30).astype(np.float32)
    check_case(lambda L, a, b: L.numpy.histogram2d(a, b, **kwargs), (x, y), mode, rtol=1e-5)
    check_case(lambda L, a, b, w: L.numpy.histogram2d(a, b, weights=w, **kwargs), (x, y, w), mode, rtol=1e-5)
    if isinstance(kwargs.get("bins"), np.ndarray) and len(kwargs["bins"]) != 2:
        with pytest.raises(ValueError, match="bin for each dimension"):
            meshax.numpy.histogramdd(np.stack([x, y], 1), **kwargs)
    else:
        check_case(lambda L, s: L.numpy.histogramdd(s, **kwargs), (np.stack([x, y], 1),), mode, rtol=1e-5)
    check_case(lambda L, s: L.numpy.histogramdd(s, bins=[2, 3, 2], density=True), (np.stack([x, y, z], 1),), mode,
               rtol=1e-5)


INTERP = [{}, {"left": -1.0, "right": 7.0}, {"left": "extrapolate", "right": "extrapolate"},
          {"left": "extrapolate"}, {"period": 3.0}]


@pytest.mark.parametrize("kwargs", INTERP)
@pytest.mark.parametrize("mode", ["eager", "jit", "shard_map"])
def test_interp(kwargs: dict, mode: str) -> None:
    x = np.linspace(-2, 5, 23).astype(np.float32).reshape(23)
    xp = np.array([0.0, 0.5, 1.0, 2.5], np.float32)
    fp = np.array([1.0, -1.0, 2.0, 4.0], np.float32)
    check_case(lambda L, a, b, c: L.numpy.interp(a, b, c, **kwargs), (x, xp, fp), mode, rtol=1e-5, atol=1e-5)
    check_case(lambda L, a, b, c: L.numpy.interp(a, b, c, **kwargs), (x.reshape(23, 1), xp[::-1].copy() if
               "period" in kwargs else xp, (fp + 1j * fp[::-1]).astype(np.complex64)), mode, rtol=1e-5, atol=1e-5)
    check_case(lambda L, a, b, c: L.numpy.interp(a, b, c), (np.arange(-1, 5, dtype=np.int32),
               np.array([0, 1, 3], np.int32), np.array([1, 0, 3], np.int32)), mode, rtol=1e-5)


def test_interp_grad_and_vmap() -> None:
    x = np.array([0.2, 0.7, 1.7], np.float32)
    xp = np.array([0.0, 0.5, 1.0, 2.5], np.float32)
    fp = np.array([1.0, -1.0, 2.0, 4.0], np.float32)
    check_case(lambda L, a, b, c: L.grad(lambda u, v: L.numpy.interp(u, b, v).sum(), (0, 1))(a, c), (x, xp, fp),
               "eager", rtol=1e-5)
    check_case(lambda L, a, b, c: L.vmap(L.numpy.interp, (0, None, None))(a, b, c), (x.reshape(3, 1), xp, fp),
               "jit", rtol=1e-5)


def test_interp_errors() -> None:
    with pytest.raises(ValueError):
        meshax.numpy.interp(F, G, A)
    with pytest.raises(ValueError):
        meshax.numpy.interp(F, G, G, left="nearest")


def test_names_match_jax_signatures() -> None:
    import inspect
    for name in meshax._src.numpy.set_ops.__all__:
        ours = list(inspect.signature(getattr(meshax.numpy, name)).parameters.values())
        theirs = list(inspect.signature(getattr(jax.numpy, name)).parameters.values())
        assert [(p.name, p.kind, p.default) for p in ours] == [(p.name, p.kind, p.default) for p in theirs], name


NAN_PAIRS = [(np.array([1.0, np.nan, np.nan, 2.0]), np.array([np.nan, 1.0])),
             (np.array([1.0, np.nan, 2.0]), np.array([np.nan, 3.0])), (np.array([np.nan]), np.array([0.5]))]


@pytest.mark.parametrize("name", SETS)
def test_set_ops_nan(name: str) -> None:
    for pair in NAN_PAIRS:
        check_case(lambda L, a, b: getattr(L.numpy, name)(a, b), pair, "eager")
    check_case(lambda L, a, b: L.numpy.setxor1d(a, b, True), NAN_PAIRS[1], "eager")


@pytest.mark.parametrize("name, args", [("union1d", ([1], [2])), ("intersect1d", (A, [2])),
                                        ("interp", ([1.0], [0.0, 2.0], [1, 2])), ("digitize", ([1], [0, 2])),
                                        ("sort_complex", ([1, 2],)), ("partition", ([1, 2], 0)),
                                        ("argpartition", ([1, 2], 0)), ("histogram", ([1.0, 2.0],)),
                                        ("histogram", (F, [0, 1])), ("lexsort", ([[1, 2]],)),
                                        ("histogram2d", (F, [1.0] * 5)), ("histogramdd", ([[1.0]],))])
def test_lists_rejected_as_jax(name: str, args: tuple) -> None:
    with pytest.raises(TypeError) as theirs:
        getattr(jax.numpy, name)(*args)
    with pytest.raises(TypeError) as ours:
        getattr(meshax.numpy, name)(*args)
    assert str(ours.value) == str(theirs.value)


def test_scalars_and_weak_types() -> None:
    check_case(lambda L, a: L.numpy.union1d(a, 2, size=3), (np.array([3, 1], np.int16),), "jit")
    check_case(lambda L, a: L.numpy.interp(2.5, np.array([0.0, 1, 3]), a), (np.array([0.0, 1, 5], np.float32),),
               "jit")
    check_case(lambda L, a: L.numpy.lexsort(a), (np.array([3, 1, 2], np.int32),), "eager")
    check_case(lambda L, a: L.numpy.digitize(a, np.zeros(0)), (np.array([0, 1, 2, 3], np.int8),), "jit")
    check_case(lambda L, a: L.numpy.histogram_bin_edges(a, 3, range=(0, 1)), (np.arange(4, dtype=np.int32),), "jit")
