"""The core: traces with parents, closures over outer tracers, nesting of jit/grad/shard_map, vma typing.

Every value is checked against real JAX (the oracle) or NumPy.
"""
import jax
import jax.numpy as jjnp
import numpy as np
import pytest
from jax.sharding import Mesh as JMesh, PartitionSpec as JP

import meshax
import meshax.numpy as jnp
from meshax.sharding import Mesh, PartitionSpec as P


@pytest.fixture(scope="module")
def meshes():
    ours = Mesh(np.array(meshax.devices()).reshape(4, 2), ("i", "j"))
    theirs = JMesh(np.array(jax.devices()[:8]).reshape(4, 2), ("i", "j"))
    return ours, theirs


def both(program):
    """`program(lib, jnp, lax)` run with meshax and with JAX."""
    return program(meshax, jnp, meshax.lax), program(jax, jjnp, jax.lax)


def close(a, b, rtol=1e-5, atol=1e-6):
    for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=rtol, atol=atol)


def test_closure_over_outer_jit_tracer():
    ours, theirs = both(lambda lib, np_, lax: lib.jit(lambda x: lib.jit(lambda y: x + y)(1.))(2.))
    assert float(ours) == float(theirs) == 3.0


def test_closures_at_depth_three_through_every_transformation():
    def program(lib, np_, lax):
        def f(x):
            def g(y):
                return lib.jit(lambda z: np_.sin(x * y * z) + x)(y + 1.)
            return lib.grad(lambda y: lib.jit(g)(y) * x)(x * 2.)
        return f(0.7), lib.grad(f)(0.7), lib.jit(lib.grad(f))(0.7), lib.grad(lib.jit(f))(0.7)
    close(*both(program))


def test_grad_of_jit_and_jit_of_grad_and_second_derivatives():
    def program(lib, np_, lax):
        f = lambda x: np_.sum(np_.tanh(x) ** 3 * np_.cos(x))
        x = np_.linspace(-2., 2., 12).reshape(3, 4)
        return (lib.grad(lib.jit(f))(x), lib.jit(lib.grad(f))(x), lib.grad(lib.grad(lambda s: f(x * s)))(1.5),
                lib.jvp(f, (x,), (np_.ones_like(x),)), lib.vjp(f, x)[1](np_.float32(2.)))
    close(*both(program), rtol=2e-5, atol=2e-5)  # one vjp entry is ~0 (float32 cancellation)


def test_python_control_flow_on_concrete_values_under_grad():
    def program(lib, np_, lax):
        def f(x):
            return np_.sin(x) if x > 0 else np_.cos(x) * 2
        return lib.grad(f)(0.5), lib.grad(f)(-0.5)
    close(*both(program))


def test_jit_refuses_python_control_flow_on_traced_values():
    with pytest.raises(TypeError, match="concrete value"):
        meshax.jit(lambda x: x if x > 0 else -x)(1.)


def test_escaped_tracer_is_an_error():
    saved = []
    meshax.jit(lambda x: saved.append(x) or x)(1.)
    with pytest.raises(Exception, match="unexpected tracer"):
        jnp.sin(saved[0])


def test_make_jaxpr_prints_like_jax():
    text = str(meshax.make_jaxpr(lambda x: jnp.sin(x) * 2. + x.sum())(jnp.ones(3)))
    assert text.splitlines()[0] == "{ lambda ; a:f32[3]. let"
    assert "b:f32[3] = sin a" in text and "c:f32[3] = mul b 2.0:f32[]" in text and "in (e,) }" in text


def test_captured_arrays_become_constvars():
    table = jnp.arange(3.)
    text = str(meshax.make_jaxpr(lambda x: x + table)(jnp.ones(3)))
    assert text.startswith("{ lambda a:f32[3]; b:f32[3]. let")


def test_grad_through_shard_map_every_collective(meshes):
    ours_mesh, their_mesh = meshes
    x0 = np.linspace(-1, 1, 32, dtype=np.float32).reshape(8, 4)
    w0 = np.linspace(0.5, 1.5, 4, dtype=np.float32)

    def program(lib, np_, lax, mesh, S):
        def sm(f, ins, out, **kw):
            return lib.shard_map(f, mesh=mesh, in_specs=ins, out_specs=out, **kw)
        cases = [
            lambda w, x: sm(lambda w, x: lax.psum(np_.sum(np_.sin(w[:2] * x)), ("i", "j")), (S(), S("i", "j")), S())(w, x),
            lambda w, x: sm(lambda w, x: lax.psum(np_.sum(np_.sin(w[:2] * x)), ("i", "j")), (S(), S("i", "j")), S(),
                            check_vma=False)(w, x),
            lambda w, x: np_.sum(sm(lambda w, x: lax.pmean(np_.sin(w * x) ** 2, "i"), (S(), S("i")), S())(w, x)),
            lambda w, x: np_.sum(sm(lambda w, x: lax.all_gather(x * w[:2], "j", axis=1, tiled=True) ** 2,
                                    (S("j"), S("i", "j")), S("i", "j"))(w, x)),
            lambda w, x: np_.sum(sm(lambda w, x: lax.psum_scatter(np_.tanh(x) * w, "i", scatter_dimension=0,
                                                                  tiled=True) ** 3, (S(), S(None)), S("i"))(w, x)),
            lambda w, x: np_.sum(sm(lambda w, x: lax.ppermute(np_.exp(x) * w, "i", [(0, 1), (1, 2), (2, 3), (3, 0)]) * x,
                                    (S(), S("i")), S("i"))(w, x)),
            lambda w, x: np_.sum(sm(lambda w, x: x * w * lax.axis_index("i"), (S(), S("i")), S("i"))(w, x)),
            lambda w, x: np_.sum(sm(lambda w, x: lax.all_to_all(x * w, "i", 1, 0, tiled=True) ** 2
                                    * np_.arange(8.)[:, None], (S(), S("i")), S("i"))(w, x)),
        ]
        out = []
        for f in cases:
            out.append(lib.grad(f, argnums=(0, 1))(w0, x0))
            out.append(lib.jit(lib.grad(f, argnums=(0, 1)))(w0, x0))
        return out

    close(program(meshax, jnp, meshax.lax, ours_mesh, P), program(jax, jjnp, jax.lax, their_mesh, JP), rtol=2e-5)


def test_grad_of_replicated_parameter_inside_shard_map_is_summed_as_jax(meshes):
    ours_mesh, their_mesh = meshes
    x0 = np.arange(8., dtype=np.float32)

    def inner(lib, np_, mesh, spec):
        return lib.shard_map(lambda x: lib.grad(lambda w: np_.sum(w * x))(np_.ones(2)), mesh=mesh,
                             in_specs=(spec("i"),), out_specs=spec())(x0)

    close(inner(meshax, jnp, ours_mesh, P), inner(jax, jjnp, their_mesh, JP))


def test_nested_shard_map_inside_jit_and_grad(meshes):
    ours_mesh, their_mesh = meshes
    x0 = np.linspace(0, 1, 16, dtype=np.float32).reshape(4, 4)

    def program(lib, np_, lax, mesh, spec):
        inner = lib.shard_map(lambda x: lax.psum(x * 2., "j"), mesh=mesh, in_specs=spec("i", "j"),
                              out_specs=spec("i"))
        f = lambda x: np_.sum(lib.jit(inner)(np_.sin(x)) ** 2)
        return lib.grad(f)(x0), lib.jit(lib.grad(f))(x0)

    close(program(meshax, jnp, meshax.lax, ours_mesh, P), program(jax, jjnp, jax.lax, their_mesh, JP))


def test_out_specs_replicated_on_a_varying_value_names_the_axis():
    mesh = meshax.make_mesh((8,), ("x",))
    with pytest.raises(ValueError, match="replicated across mesh axis 'x'"):
        meshax.shard_map(lambda v: v * 2, mesh=mesh, in_specs=P("x"), out_specs=P())(np.ones(8, np.float32))
    # with check_vma=False, JAX returns the first device's block
    out = meshax.shard_map(lambda v: v * 2, mesh=mesh, in_specs=P("x"), out_specs=P(), check_vma=False)(
        np.arange(8, dtype=np.float32))
    np.testing.assert_array_equal(np.asarray(out), [0.])


def test_pvary_and_vma_in_jaxpr():
    mesh = meshax.make_mesh((8,), ("x",))
    f = meshax.shard_map(lambda x, w: jnp.sin(x) * w, mesh=mesh, in_specs=(P("x"), P()), out_specs=P("x"))
    text = str(meshax.make_jaxpr(f)(np.ones(8, np.float32), np.ones(1, np.float32)))
    assert "f32[1]{V:x} = pvary[axes=('x',)]" in text


def test_integer_inputs_need_allow_int_and_get_float0():
    with pytest.raises(TypeError, match="allow_int"):
        meshax.grad(lambda x: x * 2.)(3)
    g = meshax.grad(lambda x, n: x * n, argnums=(0, 1), allow_int=True)(2., 3)
    assert float(g[0]) == 3.0 and g[1].dtype == jax.dtypes.float0


def test_grad_needs_scalar_output():
    with pytest.raises(TypeError, match="scalar-output"):
        meshax.grad(lambda x: x * 2.)(jnp.ones(3))


def test_nested_shard_map_over_different_axes(meshes):
    """An inner shard_map over 'j' inside an outer one over 'i' (axis_names): forward values equal JAX's;
    gradients (which JAX 0.10.2 itself fails to compute for this nesting) equal JAX's on the same math written
    without shard_map."""
    ours_mesh, their_mesh = meshes
    x0 = np.arange(32, dtype=np.float32).reshape(8, 4) / 10

    def nested(lib, np_, lax, mesh, spec):
        def inner(x):
            return lax.psum(np_.sin(x), "j") * (lax.axis_index("i") + 1.)

        def outer(x):
            y = lib.shard_map(inner, in_specs=spec(None, "j"), out_specs=spec(), axis_names={"j"})(x * 2.)
            return y + lax.psum(x, "i")[:, :2]

        return lib.shard_map(outer, mesh=mesh, in_specs=spec("i"), out_specs=spec("i"), axis_names={"i"})

    def flat(np_):
        def f(x):
            blocks = x.reshape(4, 2, 4)
            scale = (np_.arange(4.) + 1)[:, None, None]
            y = (np_.sin(2 * blocks[:, :, :2]) + np_.sin(2 * blocks[:, :, 2:])) * scale
            return (y + np_.sum(blocks, axis=0)[None, :, :2]).reshape(8, 2)
        return f

    ours = nested(meshax, jnp, meshax.lax, ours_mesh, P)
    theirs = nested(jax, jjnp, jax.lax, their_mesh, JP)
    close(ours(x0), theirs(x0))
    close(meshax.jit(ours)(x0), theirs(x0))
    close(ours(x0), flat(jjnp)(x0))
    loss = lambda f, np_: (lambda x: np_.sum(f(x) ** 2))
    expected = jax.grad(loss(flat(jjnp), jjnp))(x0)
    close(meshax.grad(loss(ours, jnp))(x0), expected, rtol=1e-4)
    close(meshax.jit(meshax.grad(loss(ours, jnp)))(x0), expected, rtol=1e-4)


def test_print_inside_an_eager_shard_map_shows_each_device_as_jax(capsys, meshes):
    ours_mesh, theirs_mesh = meshes
    x0 = np.arange(16.0, dtype=np.float32).reshape(8, 2)

    def run(lib, mesh, spec):
        def f(a):
            print("inside", a)
            return a * 2
        return lib.shard_map(f, mesh=mesh, in_specs=spec("i", "j"), out_specs=spec("i", "j"))(x0)

    close(run(meshax, ours_mesh, P), x0 * 2)
    ours = capsys.readouterr().out
    run(jax, theirs_mesh, JP)
    theirs = capsys.readouterr().out
    assert ours == theirs


@pytest.mark.parametrize("x64", [False, True])
def test_scalar_avals_follow_their_type_and_x64(x64):
    """A literal's aval (remembered per scalar type and x64 setting) is the one its dtype and weak type give,
    as JAX types `jnp.asarray(x)`, under either setting."""
    from meshax._src.core.core import aval_of
    from meshax._src.core.dtypes import dtype_of

    values = [True, 3, 2.5, 1j, np.float32(1), np.float64(1), np.int8(1), np.int64(1), np.uint32(1), np.bool_(True),
              np.complex128(1)]
    with jax.enable_x64(x64), meshax.enable_x64(x64):
        for value in values:
            aval = aval_of(value)
            assert (aval.shape, aval.dtype, aval.weak_type) == ((), *dtype_of(value)), value
            assert aval.dtype == jjnp.asarray(value).dtype, value


def test_a_shard_map_body_is_typed_afresh_for_new_input_types(meshes):
    """The per-device trace remembers its operations' output types per input types: the same body on float32,
    int32 and weakly typed inputs gives each its own types, as JAX does, and a typing error is raised every call."""
    ours_mesh, their_mesh = meshes
    body = lambda a, b: (a * 2 + b, a < b)

    def run(lib, mesh, spec, a, b):
        return lib.shard_map(body, mesh=mesh, in_specs=(spec("i"), spec()), out_specs=(spec("i"), spec("i")))(a, b)

    for a, b in [(np.ones((8, 2), np.float32), np.float32(3)), (np.ones((8, 2), np.int32), np.int32(3)),
                 (np.ones((8, 2), np.int32), 3.0), (np.ones((8, 2), np.float32), np.float32(3))]:
        ours = run(meshax, ours_mesh, P, a, b)
        theirs = run(jax, their_mesh, JP, a, b)
        for o, t in zip(ours, theirs):
            assert o.dtype == t.dtype and o.weak_type == t.weak_type
        close(ours, theirs)
    for _ in range(2):
        with pytest.raises(TypeError):
            meshax.shard_map(lambda a: meshax.lax.dot_general(a, a, (((0,), (1,)), ((), ()))), mesh=ours_mesh,
                             in_specs=P("i"), out_specs=P("i"))(np.ones((8, 3), np.float32))
