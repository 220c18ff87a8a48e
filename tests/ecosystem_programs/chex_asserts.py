"""chex: assertions (shapes, trees, ranks, numerics), dataclasses, chexify and variants-style jit/vmap use."""
import chex
import jax
import jax.numpy as jnp


@chex.dataclass
class State:
    step: chex.Array
    value: chex.Array


state = State(step=jnp.array(1), value=jnp.ones((2, 3)))
chex.assert_shape(state.value, (2, 3))
chex.assert_rank([state.value, state.step], [2, 0])
chex.assert_type(state.value, float)
chex.assert_trees_all_close(state, State(step=jnp.array(1), value=jnp.ones((2, 3)) + 1e-7))
chex.assert_tree_all_finite(state)
chex.assert_equal_shape([state.value, jnp.zeros((2, 3))])
print("dataclass", jax.tree_util.tree_structure(state).num_leaves, state.replace(step=jnp.array(5)).step)

try:
    chex.assert_shape(state.value, (3, 2))
    print("assert_shape_raised", False)
except AssertionError:
    print("assert_shape_raised", True)


@jax.jit
def f(x):
    chex.assert_rank(x, 1)
    return jnp.cumsum(x)


print("jit", [float(v) for v in f(jnp.arange(4.0))])


@chex.chexify
@jax.jit
def positive_log(x):
    chex.assert_tree_all_finite(x)
    return jnp.log(x)


print("chexify_ok", f"{float(positive_log(jnp.array(2.0))):.6f}")
try:
    positive_log(jnp.array(jnp.inf))
    chex.block_until_chexify_assertions_complete()  # chexify reports asynchronously
    print("chexify_raised", False)
except AssertionError as e:
    print("chexify_raised", "Tree contains non-finite value" in str(e))
vm = jax.vmap(lambda s: s.value.sum() * s.step)(State(step=jnp.arange(3), value=jnp.ones((3, 2))))
print("vmap", [float(v) for v in vm])
