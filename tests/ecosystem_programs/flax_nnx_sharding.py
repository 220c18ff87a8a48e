"""flax NNX sharding annotations on a ('data', 'model') mesh of 8 devices whose axes are all Auto or all Explicit
(argv[1]): nnx.with_partitioning and Param(sharding=...), nnx.get_partition_spec, nnx.get_named_sharding, model
creation under nnx.jit, eager creation (flax shards annotated Variables as they are made), an nnx.Optimizer and
nnx.jit train step keeping the layouts."""
import sys

import jax
import jax.numpy as jnp
import optax
from flax import nnx
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P

KIND = getattr(AxisType, sys.argv[1])
mesh = jax.make_mesh((2, 4), ("data", "model"), axis_types=(KIND, KIND))


class DotReluDot(nnx.Module):
    def __init__(self, depth: int, rngs: nnx.Rngs):
        init = nnx.initializers.lecun_normal()
        self.dot1 = nnx.Linear(depth, depth, kernel_init=nnx.with_partitioning(init, (None, "model")),
                               use_bias=False, rngs=rngs)
        self.w2 = nnx.Param(init(rngs.params(), (depth, depth)), sharding=("model", None))

    def __call__(self, x):
        y = jax.lax.with_sharding_constraint(nnx.relu(self.dot1(x)), P("data", "model"))
        if KIND == AxisType.Explicit:  # the contraction over 'model' needs its output's layout named
            return jnp.dot(y, self.w2[...], out_sharding=P("data", None))
        return jnp.dot(y, self.w2[...])


def specs(tree):
    return [tuple(s) for s in jax.tree.leaves(tree, is_leaf=lambda x: isinstance(x, P))]


@nnx.jit
def create():
    model = DotReluDot(16, nnx.Rngs(0))
    state = nnx.state(model)
    nnx.update(model, jax.lax.with_sharding_constraint(state, nnx.get_partition_spec(state)))
    return model


with jax.set_mesh(mesh):
    model = create()
    print("jit-made", tuple(model.dot1.kernel[...].sharding.spec), tuple(model.w2[...].sharding.spec))
    state = nnx.state(model)
    print("partition specs", specs(nnx.get_partition_spec(state)))
    named = nnx.get_named_sharding(state, mesh)
    print("named", [tuple(s.spec) for s in jax.tree.leaves(named, is_leaf=lambda x: isinstance(x, NamedSharding))])
    eager = DotReluDot(16, nnx.Rngs(1))
    print("eager-made", tuple(eager.dot1.kernel[...].sharding.spec), tuple(eager.w2[...].sharding.spec))

    x = jax.device_put(jnp.linspace(-1, 1, 8 * 16).reshape(8, 16), NamedSharding(mesh, P("data", None)))
    optimizer = nnx.Optimizer(model, optax.adam(1e-2), wrt=nnx.Param)

    @nnx.jit
    def train_step(model, optimizer, x):
        loss, grads = nnx.value_and_grad(lambda m: jnp.mean((m(x) - 0.5) ** 2))(model)
        optimizer.update(model, grads)
        return loss

    for i in range(3):
        print("step", i, "loss", f"{float(train_step(model, optimizer, x)):.6f}")
    print("trained", tuple(model.dot1.kernel[...].sharding.spec), tuple(model.w2[...].sharding.spec))
    moments = jax.tree.leaves(nnx.state(optimizer, nnx.OptState))
    print("moments", sorted({tuple(m.sharding.spec) for m in moments if m.ndim == 2}, key=str))
