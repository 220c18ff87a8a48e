"""vmap against JAX: in_axes/out_axes (ints, None, pytrees), every kind of primitive, nesting, composition with
grad, jit, control flow and shard_map both ways, and collectives over a vmapped axis_name; eagerly and under jit."""
import jax
import jax.numpy as jjnp
import numpy as np
import pytest
from jax.sharding import Mesh as JMesh, PartitionSpec as JP

import meshax
import meshax.numpy as jnp
from oracle import assert_same_tree, check_against_jax
from meshax.sharding import Mesh, PartitionSpec as P

_rng = np.random.default_rng(0)
X = _rng.normal(size=(5, 3, 4)).astype(np.float32)
W = _rng.normal(size=(4, 2)).astype(np.float32)
V = _rng.normal(size=(4,)).astype(np.float32)
ROWS = np.arange(16., dtype=np.float32).reshape(2, 8)

CASES = {
    "elementwise": lambda L, np_: L.vmap(lambda x: np_.sin(x) * 2 + V)(X),
    "matmul": lambda L, np_: L.vmap(lambda x: x @ W)(X),
    "matmul_both_batched": lambda L, np_: L.vmap(lambda x, w: x @ w)(X, np.stack([W] * 5)),
    "matmul_rhs_batched": lambda L, np_: L.vmap(lambda w: X[0] @ w)(np.stack([W] * 5)),
    "in_axes_1": lambda L, np_: L.vmap(lambda x: np_.sum(x, axis=0), in_axes=1)(X),
    "out_axes_2": lambda L, np_: L.vmap(lambda x: x.T, out_axes=2)(X),
    "in_axes_none": lambda L, np_: L.vmap(lambda x, w: np_.tanh(x @ w), in_axes=(0, None))(X, W),
    "out_axes_none": lambda L, np_: L.vmap(lambda x: (x * 2, np_.ones(3)), out_axes=(0, None))(X),
    "reductions": lambda L, np_: L.vmap(lambda x: (np_.max(x, axis=1), np_.argmin(x, axis=0), np_.cumsum(x, axis=1),
                                                   np_.mean(x)))(X),
    "shape_ops": lambda L, np_: L.vmap(lambda x: (x.reshape(12), np_.transpose(x), x[1:, ::2],
                                                  np_.concatenate([x, x * 2], axis=1), np_.broadcast_to(x[0], (2, 4)),
                                                  np_.pad(x, ((1, 0), (0, 2)))))(X),
    "indexing": lambda L, np_: L.vmap(lambda x: (x[np_.asarray([2, 0])], x[:, np_.asarray([1, 3])],
                                                 np_.sort(x, axis=1)))(X),
    "batched_index": lambda L, np_: L.vmap(lambda x, i: x[i])(X, np.array([0, 1, 2, 0, 1])),
    "at_set": lambda L, np_: L.vmap(lambda x: x.at[0, 1].set(5.))(X),
    "grad_inside": lambda L, np_: L.vmap(L.grad(lambda x: np_.sum(np_.tanh(x @ W) ** 2)))(X),
    "per_example_grads": lambda L, np_: L.vmap(L.grad(lambda w, x: np_.sum(np_.tanh(x @ w) ** 2)),
                                               in_axes=(None, 0))(W, X),
    "grad_of_vmap": lambda L, np_: L.grad(lambda w: np_.sum(L.vmap(lambda x: np_.tanh(x @ w))(X) ** 2))(W),
    "nested": lambda L, np_: L.vmap(L.vmap(lambda a: a * np_.arange(4.)))(X),
    "scan_inside": lambda L, np_: L.vmap(lambda xs: L.lax.scan(lambda c, x: (c + x, c * 2), np_.zeros(4), xs))(X),
    "cond_inside": lambda L, np_: L.vmap(lambda x: L.lax.cond(np_.sum(x) > 0, lambda x: x * 2, lambda x: -x, x))(X),
    "while_inside": lambda L, np_: L.vmap(lambda x: L.lax.while_loop(lambda c: np_.sum(c) < 10., lambda c: c + 1.,
                                                                     x))(X[:, 0]),
    "random_keys": lambda L, np_: L.vmap(lambda k: L.random.normal(k, (3,)))(L.random.split(L.random.PRNGKey(0), 4)),
    "pytree_in_axes": lambda L, np_: L.vmap(lambda d: {"s": d["a"] + d["b"][0]}, in_axes=({"a": 0, "b": None},))(
        {"a": X, "b": V[None]}),
    "psum_named": lambda L, np_: L.vmap(lambda x: x - L.lax.psum(x, "b"), axis_name="b")(X),
    "pmean_pmax_named": lambda L, np_: L.vmap(lambda x: (L.lax.pmean(x, "b"), L.lax.pmax(x, "b")), axis_name="b")(X),
    "axis_index_named": lambda L, np_: L.vmap(lambda x: x * L.lax.axis_index("b"), axis_name="b")(X),
    "all_gather_named": lambda L, np_: L.vmap(lambda x: L.lax.all_gather(x, "b", axis=1) * 1., axis_name="b")(X[:, 0]),
    "all_gather_tiled_named": lambda L, np_: L.vmap(lambda x: L.lax.all_gather(x, "b", tiled=True),
                                                    axis_name="b")(X[:, 0]),
    "ppermute_named": lambda L, np_: L.vmap(lambda x: L.lax.ppermute(x, "b", [(0, 1), (1, 2), (2, 3), (3, 4), (4, 0)]),
                                            axis_name="b")(X),
    "psum_scatter_named": lambda L, np_: L.vmap(lambda x: L.lax.psum_scatter(x, "b", scatter_dimension=0, tiled=True),
                                                axis_name="b")(np.ones((5, 10), np.float32)),
}




@pytest.mark.parametrize("jitted", [False, True], ids=["eager", "jit"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_against_jax(name, jitted):
    check_against_jax(CASES[name], jitted, atol=1e-5)


@pytest.mark.parametrize("jitted", [False, True], ids=["eager", "jit"])
def test_with_shard_map_both_ways(jitted):
    def program(L, np_, mesh, spec):
        inside = L.shard_map(lambda x: L.vmap(lambda r: L.lax.psum(np_.sin(r), "d"))(x), mesh=mesh,
                             in_specs=spec(None, "d"), out_specs=spec())(ROWS)
        outside = L.vmap(lambda x: L.shard_map(lambda r: L.lax.psum(r * 2, "d"), mesh=mesh, in_specs=spec("d"),
                                               out_specs=spec())(x))(np.arange(32., dtype=np.float32).reshape(2, 16))
        return inside, outside

    ours_mesh = Mesh(np.array(meshax.devices()), ("d",))
    theirs_mesh = JMesh(np.array(jax.devices()[:8]), ("d",))
    wrap = (lambda L, f: L.jit(f)) if jitted else (lambda L, f: f)
    assert_same_tree(wrap(meshax, lambda: program(meshax, jnp, ours_mesh, P))(),
                     wrap(jax, lambda: program(jax, jjnp, theirs_mesh, JP))(), atol=1e-5)


def test_errors_as_jax():
    with pytest.raises(ValueError, match="inconsistent sizes"):
        meshax.vmap(lambda a, b: a + b)(np.ones(3), np.ones(4))
    with pytest.raises(ValueError, match="len\\(in_axes\\)=1, len\\(args\\)=2"):
        meshax.vmap(lambda a, b: a + b, in_axes=(0,))(np.ones(3), np.ones(3))
    with pytest.raises(ValueError, match="at least one non-None value in in_axes"):
        meshax.vmap(lambda a: a, in_axes=None)(np.ones(3))


# ---- spmd_axis_name ---------------------------------------------------------------------------------------------

def _spmd_program(lib, explicit, jitted, constrain):
    types = lib.sharding.AxisType
    mesh = lib.make_mesh((4, 2), ("X", "Y"), axis_types=(types.Explicit if explicit else types.Auto,) * 2)
    with lib.set_mesh(mesh):
        x = lib.device_put(np.arange(32., dtype=np.float32).reshape(8, 4), lib.P())
        seen = []

        def row(r):
            seen.append(str(lib.typeof(r)))
            return constrain(lib, r * 2)

        fn = lib.vmap(row, spmd_axis_name="X")
        out = (lib.jit(fn) if jitted else fn)(x)
        spec = tuple(out.sharding.spec) + (None,) * (out.ndim - len(out.sharding.spec))
        return seen, spec, str(lib.typeof(out)), np.asarray(out)


CONSTRAINTS = {
    "with_sharding_constraint": lambda lib, r: lib.lax.with_sharding_constraint(r, lib.P("Y")),
    "none": lambda lib, r: r,
    "reshard": lambda lib, r: lib.sharding.reshard(r, lib.P("Y")),
}


@pytest.mark.parametrize("jitted", [False, True], ids=["eager", "jit"])
@pytest.mark.parametrize("explicit,constraint", [(False, "with_sharding_constraint"), (False, "none"),
                                                 (True, "none"), (True, "reshard")])
def test_spmd_axis_name_splits_constrained_batch_dimensions_as_jax(explicit, constraint, jitted):
    ours = _spmd_program(meshax, explicit, jitted, CONSTRAINTS[constraint])
    theirs = _spmd_program(jax, explicit, jitted, CONSTRAINTS[constraint])
    assert ours[:3] == theirs[:3]
    np.testing.assert_array_equal(ours[3], theirs[3])


@pytest.mark.parametrize("jitted", [False, True], ids=["eager", "jit"])
def test_spmd_axis_name_other_than_the_explicit_split_of_the_batch_is_refused_as_jax(jitted):
    def program(lib):
        types = lib.sharding.AxisType
        with lib.set_mesh(lib.make_mesh((4, 2), ("X", "Y"), axis_types=(types.Explicit,) * 2)):
            x = lib.device_put(np.ones((8, 4), np.float32), lib.P("X"))
            fn = lib.vmap(lambda r: r * 2, spmd_axis_name="Y")
            with pytest.raises(ValueError) as error:
                (lib.jit(fn) if jitted else fn)(x)
            return str(error.value)

    assert program(meshax) == program(jax)
