"""Helpers of the fused-execution tests (test_fusion.py, test_numba_executor.py): a program's values with its
clusters fused and with every cluster as separate NumPy calls, and their comparison bit for bit."""
from __future__ import annotations

import numpy as np

import meshax
from meshax._src.interpreters import fusion, numpy_eval
from meshax._src.interpreters.fusion import executable, fused_p


def fused_and_reference(function, *args):
    """(fused results, the same program's results with every cluster run as separate NumPy calls, number of
    fused equations) of `function` traced on `args`."""
    jaxpr = meshax.make_jaxpr(function)(*args).jaxpr
    assert not jaxpr.constvars
    executor = fusion.EXECUTORS["cpu"]
    with np.errstate(all="ignore"):
        fused = numpy_eval.run(jaxpr, [], list(args))
        threshold, executor.min_elements = executor.min_elements, float("inf")
        try:
            expected = numpy_eval.run(jaxpr, [], list(args))
        finally:
            executor.min_elements = threshold
    count = sum(eq.primitive is fused_p for eq in executable(jaxpr).equations)
    return fused, expected, count


def assert_bitwise_equal(ours, theirs):
    """Equal bit for bit (signed zeros included), except that any two NaNs are equal: which NaN a sum or product
    of two NaNs returns is the compiler's choice of operand order, in NumPy's kernels as in numba's and numexpr's."""
    for a, b in zip(ours, theirs):
        a, b = np.asarray(a), np.asarray(b)
        assert a.dtype == b.dtype and a.shape == b.shape
        same = (a.view(np.uint8).reshape(a.size, -1) == b.view(np.uint8).reshape(b.size, -1)).all(axis=1)
        if a.dtype.kind == "f":
            same |= np.isnan(a).ravel() & np.isnan(b).ravel()
        first = np.flatnonzero(~same)
        assert not first.size, f"first difference at {first[0]}: fused {a.flat[first[0]]!r}, NumPy {b.flat[first[0]]!r}"
