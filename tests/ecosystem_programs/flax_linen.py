"""flax.linen + optax: a small CNN with BatchNorm and Dropout, trained a few jitted steps; lazy_init."""
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax


class CNN(nn.Module):
    @nn.compact
    def __call__(self, x, train: bool):
        x = nn.Conv(8, (3, 3), use_bias=False)(x)  # a bias before BatchNorm has ~0 gradients (noise under adam)
        x = nn.BatchNorm(use_running_average=not train, momentum=0.9)(x)
        x = nn.relu(x)
        x = nn.avg_pool(x, (2, 2), strides=(2, 2))
        x = x.reshape((x.shape[0], -1))
        x = nn.Dense(32)(x)
        x = nn.Dropout(0.25, deterministic=not train)(x)
        x = nn.gelu(x)
        return nn.Dense(4)(x)


rng = np.random.default_rng(0)
images = jnp.asarray(rng.standard_normal((16, 8, 8, 1)).astype(np.float32))
labels = jnp.asarray(rng.integers(0, 4, 16))
model = CNN()
variables = model.init(jax.random.PRNGKey(0), images, train=False)
params, batch_stats = variables["params"], variables["batch_stats"]
tx = optax.chain(optax.clip_by_global_norm(1.0), optax.adamw(1e-2, weight_decay=1e-3))
opt_state = tx.init(params)


@jax.jit
def step(params, batch_stats, opt_state, key):
    def loss_fn(p):
        logits, updates = model.apply({"params": p, "batch_stats": batch_stats}, images, train=True,
                                      rngs={"dropout": key}, mutable=["batch_stats"])
        loss = optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()
        return loss, updates["batch_stats"]

    (loss, batch_stats), grads = jax.value_and_grad(loss_fn, has_aux=True)(params)
    updates, opt_state = tx.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), batch_stats, opt_state, loss


for i in range(4):
    params, batch_stats, opt_state, loss = step(params, batch_stats, opt_state, jax.random.PRNGKey(i))
    print("loss", f"{float(loss):.6f}")
logits = model.apply({"params": params, "batch_stats": batch_stats}, images, train=False)
print("eval", f"{float(jnp.abs(logits).sum()):.5f}")
print("params", sum(x.size for x in jax.tree_util.tree_leaves(params)))

shapes = model.lazy_init(jax.random.PRNGKey(1), jax.ShapeDtypeStruct((2, 8, 8, 1), jnp.float32), train=False)
print("lazy", sorted(jax.tree_util.tree_map(lambda a: a.shape, shapes)["params"]["Dense_0"]["kernel"]))
