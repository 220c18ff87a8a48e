"""jit's stages (trace/lower/compile), its cache shared per function, array refs and vjp's pytree, against JAX."""
import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import meshax
import meshax.numpy as mnp
from meshax.sharding import NamedSharding, PartitionSpec as P


def program(np_):
    def f(x, y):
        return {"a": 2 * x + y, "b": np_.sin(x).sum()}

    return f


def test_trace_gives_jaxs_types_and_a_runnable_jaxpr():
    ours = meshax.jit(program(mnp)).trace(mnp.ones(3), 1.0)
    theirs = jax.jit(program(jjnp)).trace(jjnp.ones(3), 1.0)
    assert repr(ours.out_info) == repr(theirs.out_info)
    assert str(ours.in_avals) == str(theirs.in_avals)
    assert str(ours.out_avals) == str(theirs.out_avals)
    assert str(ours.out_tree) == str(theirs.out_tree) and str(ours.in_tree) == str(theirs.in_tree)
    assert ours.fun_name == theirs.fun_name == "f"
    assert [e.primitive.name for e in ours.jaxpr.eqns][:1] == ["mul"]
    assert repr(ours.args_info[0][0]).startswith("ArgInfo(_aval=ShapedArray(float32[3])")
    from meshax._src.core.jaxpr import eval_jaxpr  # the traced jaxpr evaluates like the function

    jaxpr = ours.jaxpr
    out = eval_jaxpr(jaxpr.jaxpr, jaxpr.consts, [mnp.arange(3.0), 2.0])
    np.testing.assert_allclose(np.asarray(out[0]), np.arange(3.0) * 2 + 2)


@pytest.mark.parametrize("via_trace", [True, False])
def test_lower_compile_and_call(via_trace):
    def stages(lib, np_):
        jitted = lib.jit(program(np_))
        lowered = jitted.trace(np_.ones(3), 1.0).lower() if via_trace else jitted.lower(np_.ones(3), 1.0)
        return lowered, lowered.compile()

    (lowered, compiled), (_, theirs) = stages(meshax, mnp), stages(jax, jjnp)
    ours_out, theirs_out = compiled(mnp.arange(3.0), 2.0), theirs(jjnp.arange(3.0), 2.0)
    for key in ("a", "b"):
        np.testing.assert_allclose(np.asarray(ours_out[key]), np.asarray(theirs_out[key]), rtol=1e-6)
    assert str(compiled.in_tree) == str(theirs.in_tree) and str(compiled.out_tree) == str(theirs.out_tree)
    assert "sin" in lowered.as_text() and "sin" in str(lowered.compiler_ir())
    assert isinstance(lowered, meshax.stages.Lowered) and isinstance(compiled, meshax.stages.Compiled)
    with pytest.raises(TypeError, match="Argument types differ"):
        compiled(mnp.ones(4), 2.0)
    with pytest.raises(TypeError):
        theirs(jjnp.ones(4), 2.0)


def test_compiled_input_shardings_are_the_arguments():
    mesh = meshax.make_mesh((8,), ("i",))
    x = meshax.device_put(mnp.arange(8.0), NamedSharding(mesh, P("i")))
    compiled = meshax.jit(lambda v: v * 2).lower(x).compile()
    assert compiled.input_shardings == ((x.sharding,), {})
    np.testing.assert_array_equal(np.asarray(compiled(x)), np.arange(8.0) * 2)


def test_a_fresh_jit_of_the_same_function_reuses_its_trace():
    def run(lib, np_):
        state = {"g": 0.0}

        def impure(x):
            return x + state["g"]

        first = lib.jit(impure)(4.0)
        state["g"] = 10.0
        second = lib.jit(impure)(5.0)  # a new wrapper, the same function: the cached trace (g = 0)
        third = lib.jit(impure)(np_.array([4.0]))  # a new signature: traced again (g = 10)
        return float(first), float(second), np.asarray(third).tolist()

    assert run(meshax, mnp) == run(jax, jjnp) == (4.0, 5.0, [14.0])


def test_jit_options_keep_separate_caches():
    traces = []

    def f(x, n):
        traces.append(n)
        return x * n

    assert float(meshax.jit(f, static_argnums=1)(2.0, 3)) == 6.0
    assert float(meshax.jit(f, static_argnums=1)(2.0, 3)) == 6.0
    assert len(traces) == 1
    assert float(meshax.jit(f, static_argnames="n")(2.0, n=3)) == 6.0  # passed by name: a new signature (as JAX)
    assert float(meshax.jit(f, static_argnames="n")(2.0, 3)) == 6.0  # argnames 'n' is argnums 1: cached
    assert len(traces) == 2
    meshax.jit(f, donate_argnums=0)(2.0, 4)  # other options: another cache
    assert len(traces) == 3
    meshax.clear_caches()
    meshax.jit(f, static_argnums=1)(2.0, 3)
    assert len(traces) == 4


def test_refs_read_write_and_jit():
    def run(lib, np_):
        ref = lib.new_ref(np_.zeros(3))
        ref[...] = np_.arange(3.0)
        ref[1] += 5

        @lib.jit
        def bump(r, v):
            r[...] += v
            return r[...] * 2

        first = bump(ref, 1.0)
        second = bump(ref, 1.0)

        @lib.jit
        def accumulate(x):
            acc = lib.new_ref(np_.zeros_like(x))
            for _ in range(3):
                acc[...] += x
            return lib.freeze(acc)

        return [np.asarray(v).tolist() for v in (first, second, ref[...], accumulate(np_.ones(2)), ref[0])]

    assert run(meshax, mnp) == run(jax, jjnp)
    ref = meshax.new_ref(mnp.zeros(2))
    assert repr(ref) == repr(jax.new_ref(jjnp.zeros(2)))
    printed = []
    meshax.jit(lambda r: printed.append(repr(r)))(ref)
    assert printed == ["JitTracer(Ref{float32[2]})"]


def test_vjp_returns_a_pytree_of_residuals():
    def run(lib, np_):
        _, f_vjp = lib.vjp(lambda x, y: np_.sin(x) * y, np_.ones(3), 2.0)
        leaves = lib.tree.leaves(f_vjp)
        back = lib.jit(lambda x: lib.vjp(lambda v: np_.sin(v) * 2.0, x)[1])(np_.ones(3))
        scaled = lib.tree.map(lambda r: r, f_vjp)
        return (len(leaves), sorted(np.shape(v) for v in leaves), repr(f_vjp.args_res),
                [np.asarray(v).tolist() for v in f_vjp(np_.ones(3))], np.asarray(back(np_.ones(3))[0]).tolist(),
                [np.asarray(v).tolist() for v in scaled(np_.ones(3))])

    ours, theirs = run(meshax, mnp), run(jax, jjnp)
    assert ours[:3] == theirs[:3]
    for a, b in zip(ours[3:], theirs[3:]):
        for x, y in zip(a, b):
            np.testing.assert_allclose(np.asarray(x, dtype=float), np.asarray(y, dtype=float), rtol=1e-6)
