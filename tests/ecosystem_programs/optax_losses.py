"""optax: several optimizers, schedules and losses on a least-squares problem (eager updates and jitted)."""
import jax
import jax.numpy as jnp
import numpy as np
import optax

rng = np.random.default_rng(0)
a = jnp.asarray(rng.standard_normal((20, 5)).astype(np.float32))
b = jnp.asarray(rng.standard_normal(20).astype(np.float32))


def loss(w):
    return jnp.mean((a @ w["w"] + w["b"] - b) ** 2)


schedule = optax.warmup_cosine_decay_schedule(0.0, 0.1, 3, 20)
for name, tx in [("adam", optax.adam(schedule)), ("lamb", optax.lamb(0.05)), ("lion", optax.lion(0.01)),
                 ("sgd_nesterov", optax.sgd(0.05, momentum=0.9, nesterov=True)),
                 ("adafactor", optax.adafactor(0.05)), ("noisy", optax.noisy_sgd(0.05, seed=3)),
                 ("multi", optax.multi_transform({"w": optax.adam(0.05), "b": optax.sgd(0.1)},
                                                 {"w": "w", "b": "b"}))]:
    params = {"w": jnp.zeros(5), "b": jnp.zeros(())}
    state = tx.init(params)
    update = jax.jit(tx.update)
    for _ in range(20):
        grads = jax.grad(loss)(params)
        updates, state = update(grads, state, params)
        params = optax.apply_updates(params, updates)
    print(name, f"{float(loss(params)):.6f}")

logits = jnp.asarray(rng.standard_normal((6, 4)).astype(np.float32))
labels = jnp.asarray(rng.integers(0, 4, 6))
onehot = jax.nn.one_hot(labels, 4)
print("xent", f"{float(optax.softmax_cross_entropy(logits, onehot).mean()):.6f}")
print("sigmoid_bce", f"{float(optax.sigmoid_binary_cross_entropy(logits, onehot).mean()):.6f}")
print("huber", f"{float(optax.huber_loss(logits, onehot).mean()):.6f}")
print("kl", f"{float(optax.kl_divergence(jax.nn.log_softmax(logits), jax.nn.softmax(logits[::-1])).mean()):.6f}")
print("focal", f"{float(optax.sigmoid_focal_loss(logits, onehot).mean()):.6f}")
print("global_norm", f"{float(optax.global_norm({'a': logits, 'b': b})):.6f}")
