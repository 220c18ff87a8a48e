"""Keywords of meshax's public functions against JAX's: every keyword JAX's signature names exists in meshax's,
and the behaviour-changing keywords (mode, order, initial, where, size, fill_value, method) given non-default
values change meshax's results as they change JAX's (a keyword accepted and silently ignored fails)."""
from __future__ import annotations

import inspect
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import meshax
import meshax.numpy as mnp
from differential import assert_matches

MODULES = {  # label: (JAX's module, meshax's)
    "numpy": (jnp, mnp),
    "numpy.linalg": (jnp.linalg, mnp.linalg),
    "numpy.fft": (jnp.fft, mnp.fft),
    "lax": (jax.lax, meshax.lax),
    "nn": (jax.nn, meshax.nn),
}

# Functions (label.name) whose signatures lack some of JAX's keywords (empty: add one here only with a reason).
KNOWN_FAILING: set[str] = set()


def _public_pairs() -> list[tuple[str, Callable, Callable]]:
    """(label.name, JAX's function, meshax's) for every public function both modules have."""
    pairs = []
    for label, (theirs, ours) in MODULES.items():
        for name in sorted(dir(theirs)):
            jax_fn = getattr(theirs, name)
            if name.startswith("_") or not callable(jax_fn) or isinstance(jax_fn, type):
                continue
            try:
                meshax_fn = getattr(ours, name)
            except (AttributeError, NotImplementedError):
                continue
            pairs.append((f"{label}.{name}", jax_fn, meshax_fn))
    return pairs


def _missing_keywords(jax_fn: Callable, meshax_fn: Callable) -> list[str] | None:
    """JAX's keyword-passable parameters that meshax's signature lacks (None when a signature is unreadable); a
    meshax function taking **kwargs is taken to handle (or refuse) the rest."""
    try:
        theirs = inspect.signature(jax_fn)
    except (TypeError, ValueError):
        return None
    ours = inspect.signature(meshax_fn)
    if any(p.kind == p.VAR_KEYWORD for p in ours.parameters.values()):
        return []
    wanted = [p.name for p in theirs.parameters.values()
              if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and not p.name.startswith("_")]
    return [k for k in wanted if k not in ours.parameters]


def _failing() -> dict[str, list[str]]:
    return {name: missing for name, j, m in _public_pairs() if (missing := _missing_keywords(j, m))}


def test_every_jax_keyword_exists():
    failing = _failing()
    unexpected = {name: missing for name, missing in failing.items() if name not in KNOWN_FAILING}
    assert not unexpected, f"meshax functions lacking JAX's keywords: {unexpected}"


def test_known_failing_still_fail():
    """Entries of KNOWN_FAILING that pass now must leave the set."""
    fixed = KNOWN_FAILING - set(_failing())
    assert not fixed, f"these pass now; remove them from KNOWN_FAILING: {sorted(fixed)}"


X = np.array([[1.0, np.nan, 3.0], [4.0, 5.0, -2.0]], np.float32)
MASK = np.array([[True, False, True], [False, False, True]])
I = np.array([[3, 1, 2], [0, 5, 4]], np.int32)

# (module label, case name, case(L, n)) with n the module of the label in that library: each gives a keyword of
# the list a non-default value
CASES: list[tuple[str, str, Callable[[Any, Any], Any]]] = [
    *[("numpy", f"{f} initial where", lambda L, n, f=f: getattr(n, f)(n.asarray(X), axis=0, initial=-3.0,
                                                                          where=n.asarray(MASK)))
      for f in ("max", "min", "amax", "amin", "nanmax", "nanmin", "sum", "prod", "nansum", "nanprod")],
    *[("numpy", f"{f} initial", lambda L, n, f=f: getattr(n, f)(n.asarray(I), axis=1, initial=4))
      for f in ("max", "min", "sum", "prod", "nansum", "nanprod", "nanmax", "nanmin")],
    *[("numpy", f"{f} where", lambda L, n, f=f: getattr(n, f)(n.asarray(X), axis=1, where=n.asarray(MASK)))
      for f in ("mean", "var", "std", "nanmean", "nanvar", "nanstd", "all", "any")],
    *[("numpy", f"{f} where", lambda L, n, f=f: getattr(n, f)(n.asarray(I), 2, where=None))
      for f in ("add", "subtract", "multiply", "maximum", "minimum", "bitwise_and", "bitwise_or", "bitwise_xor",
                "logical_and", "logical_or", "logical_xor")],
    *[("numpy", f"{f} where=True", lambda L, n, f=f: getattr(n, f)(n.asarray(I), 2, where=True))
      for f in ("add", "subtract", "multiply", "maximum", "minimum", "logaddexp", "logaddexp2")],
    ("numpy", "negative where=True", lambda L, n: n.negative(n.asarray(I), where=True)),
    *[("numpy", f"{f} method={m}", lambda L, n, f=f, m=m: getattr(n, f)(
        n.asarray(X[1]), n.asarray([0.1, 0.5, 0.9]) * (100 if "percentile" in f else 1), method=m))
      for f in ("quantile", "percentile", "nanquantile", "nanpercentile")
      for m in ("lower", "higher", "midpoint", "nearest", "inverted_cdf")],
    ("numpy", "searchsorted method=sort", lambda L, n: n.searchsorted(n.asarray([1, 3, 5]), n.asarray([2, 5]),
                                                                        method="sort")),
    ("numpy", "searchsorted method=compare_all", lambda L, n: n.searchsorted(n.asarray([1, 3, 5]),
                                                                               n.asarray([2, 5]),
                                                                               method="compare_all")),
    ("numpy", "isin method=sort", lambda L, n: n.isin(n.asarray(I), n.asarray([1, 5]), method="sort")),
    ("numpy", "pad mode=reflect", lambda L, n: n.pad(n.asarray(I), 1, mode="reflect")),
    ("numpy", "pad mode=edge", lambda L, n: n.pad(n.asarray(I), 1, mode="edge")),
    ("numpy", "pad mode=wrap", lambda L, n: n.pad(n.asarray(I), 1, mode="wrap")),
    ("numpy", "take mode=wrap", lambda L, n: n.take(n.asarray(I), n.asarray([0, 7, -9]), mode="wrap")),
    ("numpy", "take mode=clip", lambda L, n: n.take(n.asarray(I), n.asarray([0, 7, -9]), mode="clip")),
    ("numpy", "take fill_value", lambda L, n: n.take(n.asarray(I), n.asarray([0, 7]), mode="fill", fill_value=-1)),
    ("numpy", "take_along_axis mode=clip", lambda L, n: n.take_along_axis(n.asarray(I), n.asarray([[0, 9]]),
                                                                            axis=1, mode="clip")),
    ("numpy", "take_along_axis fill_value", lambda L, n: n.take_along_axis(n.asarray(I), n.asarray([[0, 9]]),
                                                                             axis=1, fill_value=-7)),
    ("numpy", "reshape order=F", lambda L, n: n.reshape(n.asarray(I), (3, 2), order="F")),
    ("numpy", "ravel order=F", lambda L, n: n.ravel(n.asarray(I), order="F")),
    ("numpy", "copy order=F", lambda L, n: n.copy(n.asarray(I), order="F")),
    ("numpy", "array order=F", lambda L, n: n.array(I, order="F")),
    ("numpy", "asarray order=C", lambda L, n: n.asarray(I, order="C")),
    ("numpy", "full fill_value", lambda L, n: n.full((2, 2), fill_value=7)),
    ("numpy", "full_like fill_value", lambda L, n: n.full_like(n.asarray(I), fill_value=2.5)),
    *[("numpy", f"{f} size fill_value", lambda L, n, f=f: getattr(n, f)(n.asarray([0, 3, 0, 4]), size=4,
                                                                           fill_value=-1))
      for f in ("argwhere", "flatnonzero", "nonzero", "unique")],
    ("numpy", "where size fill_value", lambda L, n: n.where(n.asarray([0, 3, 0, 4]), size=3, fill_value=9)),
    ("numpy", "extract size fill_value", lambda L, n: n.extract(n.asarray([True, False, True]),
                                                                  n.asarray([1, 2, 3]), size=3, fill_value=9)),
    ("numpy", "compress size fill_value", lambda L, n: n.compress(n.asarray([True, False, True]),
                                                                    n.asarray([1, 2, 3]), size=3, fill_value=9)),
    ("numpy", "argsort order", lambda L, n: n.argsort(n.asarray([3, 1, 2]), order=None)),
    ("numpy", "sort order", lambda L, n: n.sort(n.asarray([3, 1, 2]), order=None)),
    ("numpy", "sort order=name", lambda L, n: n.sort(n.asarray([3, 1, 2]), order="name")),
    ("numpy.linalg", "qr mode=r", lambda L, n: n.qr(n.asarray(X[:, [0, 2]]), mode="r")),
    ("numpy.linalg", "qr mode=complete", lambda L, n: n.qr(n.asarray(X[:, [0, 2]]), mode="complete")[0].shape),
    ("numpy.linalg", "slogdet method=qr", lambda L, n: n.slogdet(n.asarray([[2.0, 1.0], [1.0, 3.0]]), method="qr")),
    ("lax", "full fill_value", lambda L, n: n.full((2,), fill_value=3.0)),
    ("lax", "full_like fill_value", lambda L, n: n.full_like(n.iota(np.int32, 3), fill_value=5)),
    ("lax", "iota size", lambda L, n: n.iota(np.float32, size=4)),
    *[("nn", f"{f} where", lambda L, n, f=f: getattr(n, f)(L.numpy.asarray(np.nan_to_num(X)),
                                                            where=L.numpy.asarray(MASK)))
      for f in ("softmax", "log_softmax", "logsumexp", "standardize")],
]

# Cases failing today (empty: add one here only with a reason).
KNOWN_FAILING_CASES: set[str] = set()


def _run(case: Callable, library: Any, module: Any) -> tuple[str, Any]:
    try:
        return "value", case(library, module)
    except Exception as error:  # noqa: BLE001  (the exception class is what is compared)
        return "error", type(error).__name__


def _module(library: Any, label: str) -> Any:
    module = library
    for part in label.split("."):
        module = getattr(module, part)
    return module


@pytest.mark.parametrize("label,name,case", CASES, ids=[f"{label}.{name}" for label, name, _ in CASES])
def test_keyword_changes_results_as_in_jax(label: str, name: str, case: Callable) -> None:
    known = f"{label}.{name}" in KNOWN_FAILING_CASES
    try:
        _compare(label, name, case)
    except AssertionError:
        if known:
            pytest.xfail("known failing; see KNOWN_FAILING_CASES")
        raise
    assert not known, f"{label}.{name} passes now; remove it from KNOWN_FAILING_CASES"


def _compare(label: str, name: str, case: Callable) -> None:
    theirs = _run(case, jax, _module(jax, label))
    ours = _run(case, meshax, _module(meshax, label))
    if theirs[0] == "error" or ours[0] == "error":
        assert ours == theirs, f"{label}.{name}: JAX {theirs}, meshax {ours}"
        return
    assert_matches(ours[1], theirs[1], rtol=1e-5, atol=1e-5)
