"""jax.custom_batching against real JAX 0.12: custom_vmap's rule under vmap (eager, jit inside and outside, nested),
forward-mode derivatives through it, reverse mode refused as JAX refuses it, and sequential_vmap."""
from __future__ import annotations

import jax
import numpy as np
import pytest

import meshax
import meshax.custom_batching  # noqa: F401

from differential import assert_matches


def _library(L):
    """A custom_vmap function of two arguments in library `L` whose rule records its calls and computes a
    different function (so a test can tell whether the rule ran)."""
    calls = []
    cb = L.custom_batching

    @cb.custom_vmap
    def f(x, y):
        return L.numpy.sin(x) * y

    @f.def_vmap
    def rule(axis_size, in_batched, x, y):
        calls.append((axis_size, [bool(b) for b in in_batched]))
        return L.numpy.cos(x) * y, in_batched[0] or in_batched[1]

    return f, calls


def _both(run, *args, same_calls=True):
    f, calls = _library(meshax)
    g, jcalls = _library(jax)
    ours = run(meshax, f, *[meshax.numpy.asarray(a) for a in args])
    theirs = run(jax, g, *[jax.numpy.asarray(a) for a in args])
    assert_matches(ours, theirs)
    if same_calls:
        assert calls == jcalls
    return calls


X = np.arange(3.0, dtype=np.float32)
Y = np.float32(2.0)
PROGRAMS = {
    "call": lambda L, f, x, y: f(x[0], y),
    "vmap_x": lambda L, f, x, y: L.vmap(f, in_axes=(0, None))(x, y),
    "vmap_y": lambda L, f, x, y: L.vmap(f, in_axes=(None, 0))(y, x),
    "vmap_both": lambda L, f, x, y: L.vmap(f)(x, x + y),
    "jit_of_vmap": lambda L, f, x, y: L.jit(L.vmap(f, in_axes=(0, None)))(x, y),
    "vmap_of_jit": lambda L, f, x, y: L.vmap(L.jit(f), in_axes=(0, None))(x, y),
    "nested_vmap": lambda L, f, x, y: L.vmap(L.vmap(f, in_axes=(0, None)), in_axes=(None, 0))(x, x),
    "keywords": lambda L, f, x, y: L.vmap(lambda a: f(a, y=y))(x),
    "jvp": lambda L, f, x, y: L.jvp(f, (x[1], y), (np.float32(1.0), np.float32(0.0))),
    "vmap_of_jvp": lambda L, f, x, y: L.vmap(lambda a: L.jvp(f, (a, y), (np.float32(1.0), np.float32(0.0))))(x),
    "jvp_of_vmap": lambda L, f, x, y: L.jvp(L.vmap(f, in_axes=(0, None)), (x, y), (x * 0 + 1, np.float32(0.0))),
    "grad_of_vmap": lambda L, f, x, y: L.grad(lambda a: L.vmap(f, in_axes=(0, None))(a, y).sum())(x),
    "out_axes_1": lambda L, f, x, y: L.vmap(lambda a: L.numpy.stack([f(a, y)] * 2), out_axes=1)(x),
}


@pytest.mark.parametrize("program", sorted(PROGRAMS))
def test_custom_vmap_matches_jax(program):
    # vmap of jvp: JAX hands the rule the tangents' flags ([False, False]) although x is batched; meshax hands it
    # the primals' ([True, False]). The values agree.
    calls = _both(PROGRAMS[program], X, Y, same_calls=program != "vmap_of_jvp")
    if program == "vmap_of_jvp":
        assert calls == [(3, [True, False])]


@pytest.mark.parametrize("size", [1, 2, 5])
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_rule_sees_axis_size_and_flags(size, dtype):
    x = np.arange(size, dtype=dtype)
    calls = _both(lambda L, f, a, b: L.vmap(f, in_axes=(0, None))(a, b), x, np.asarray(3, dtype))
    assert calls == [(size, [True, False])]


@pytest.mark.parametrize("program", ["grad", "vjp", "vmap_of_grad"])
def test_reverse_mode_raises_value_error_as_jax(program):
    runs = {"grad": lambda L, f: L.grad(f)(1.0, 2.0),
            "vjp": lambda L, f: L.vjp(f, 1.0, 2.0),
            "vmap_of_grad": lambda L, f: L.vmap(L.grad(f), in_axes=(0, None))(np.ones(3, np.float32), 2.0)}
    with pytest.raises(ValueError):
        runs[program](jax, _library(jax)[0])
    with pytest.raises(ValueError):
        runs[program](meshax, _library(meshax)[0])


def _tree_rule_case(L):
    cb = L.custom_batching

    @cb.custom_vmap
    def g(d):
        return {"sum": d["a"] + d["b"], "a": d["a"]}

    @g.def_vmap
    def rule(axis_size, in_batched, d):
        flags = in_batched[0]
        return {"sum": d["a"] - d["b"], "a": d["a"]}, {"sum": flags["a"] or flags["b"], "a": flags["a"]}

    return L.vmap(g, in_axes=({"a": 0, "b": None},))({"a": L.numpy.arange(3.0), "b": L.numpy.float32(1.0)})


def test_pytree_arguments_and_outputs():
    assert_matches(_tree_rule_case(meshax), _tree_rule_case(jax))


@pytest.mark.parametrize("library", ["jax", "meshax"])
def test_errors(library):
    L = jax if library == "jax" else meshax

    @L.custom_batching.custom_vmap
    def no_rule(x):
        return x

    with pytest.raises(AttributeError):
        L.vmap(no_rule)(L.numpy.arange(3.0))

    @L.custom_batching.custom_vmap
    def pair(x):
        return x, x

    pair.def_vmap(lambda n, b, x: ((x, x * 2), True))
    with pytest.raises(ValueError):
        L.vmap(pair)(L.numpy.arange(3.0))


def test_unbatched_result_is_broadcast_by_vmap():
    def case(L):
        @L.custom_batching.custom_vmap
        def q(x):
            return x

        q.def_vmap(lambda n, b, x: (x, False))
        return L.vmap(q)(L.numpy.arange(3.0))

    assert_matches(case(meshax), case(jax))


def test_def_vmap_returns_the_rule_and_wraps_name():
    f, _ = _library(meshax)
    assert f.__name__ == _library(jax)[0].__name__ == "f"
    rule = lambda n, b, x: (x, b[0])  # noqa: E731
    assert f.def_vmap(rule) is rule or f.def_vmap(rule) is None


@pytest.mark.parametrize("in_axes", [(0, None), (0, 0), (1, None)])
@pytest.mark.parametrize("mode", ["eager", "jit"])
def test_sequential_vmap(in_axes, mode):
    def case(L):
        s = L.custom_batching.sequential_vmap(lambda a, b: a.sum() * b + a[0])
        a = L.numpy.arange(12.0).reshape(3, 4)
        if in_axes[0] == 1:
            a = a.T
        b = L.numpy.arange(3.0) if in_axes[1] == 0 else L.numpy.float32(2.0)
        run = L.vmap(s, in_axes=in_axes)
        return (L.jit(run) if mode == "jit" else run)(a, b)

    assert_matches(case(meshax), case(jax))
    jaxpr = str(meshax.make_jaxpr(lambda a: meshax.vmap(
        meshax.custom_batching.sequential_vmap(lambda v: v.sum()))(a))(np.ones((3, 4), np.float32)))
    assert "while" in jaxpr or "scan" in jaxpr  # a loop, not a batched sum


def test_custom_vmap_in_make_jaxpr_is_one_call():
    f, _ = _library(meshax)
    text = str(meshax.make_jaxpr(f)(1.0, 2.0))
    assert "custom_vmap_call" in text
