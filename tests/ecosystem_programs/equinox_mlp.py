"""equinox + optax: an MLP and a small conv model trained with filter_jit/filter_value_and_grad; Modules, tree
surgery, filter_vmap, eqx.error_if."""
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

key = jax.random.PRNGKey(0)
k1, k2, k3 = jax.random.split(key, 3)


class Model(eqx.Module):
    conv: eqx.nn.Conv2d
    mlp: eqx.nn.MLP
    norm: eqx.nn.LayerNorm

    def __init__(self, key):
        ka, kb = jax.random.split(key)
        self.conv = eqx.nn.Conv2d(1, 4, 3, padding=1, key=ka)
        self.norm = eqx.nn.LayerNorm(4 * 6 * 6)
        self.mlp = eqx.nn.MLP(4 * 6 * 6, 3, 16, 2, activation=jax.nn.gelu, key=kb)

    def __call__(self, x):
        x = jax.nn.relu(self.conv(x)).reshape(-1)
        return self.mlp(self.norm(x))


model = Model(k1)
rng = np.random.default_rng(0)
x = jnp.asarray(rng.standard_normal((10, 1, 6, 6)).astype(np.float32))
y = jnp.asarray(rng.integers(0, 3, 10))
tx = optax.adam(1e-2)
opt_state = tx.init(eqx.filter(model, eqx.is_inexact_array))


@eqx.filter_jit
def step(model, opt_state):
    def loss_fn(m):
        logits = jax.vmap(m)(x)
        return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()

    loss, grads = eqx.filter_value_and_grad(loss_fn)(model)
    updates, opt_state = tx.update(grads, opt_state, eqx.filter(model, eqx.is_inexact_array))
    return eqx.apply_updates(model, updates), opt_state, loss


for _ in range(4):
    model, opt_state, loss = step(model, opt_state)
    print("loss", f"{float(loss):.6f}")

doubled = eqx.tree_at(lambda m: m.mlp.layers[-1].bias, model, model.mlp.layers[-1].bias * 2)
print("tree_at", f"{float(jnp.sum(doubled.mlp.layers[-1].bias)):.6f}")
print("filter_vmap", f"{float(jnp.sum(eqx.filter_vmap(model)(x))):.5f}")
checked = eqx.filter_jit(lambda v: eqx.error_if(v, v < 0, "negative"))
print("error_if_ok", f"{float(jnp.sum(checked(jnp.arange(3.0)))):.1f}")
try:
    checked(jnp.array([1.0, -1.0]))
    print("error_if_raised", False)
except Exception as e:  # eqx raises its EqxRuntimeError
    print("error_if_raised", "negative" in str(e))


@eqx.filter_custom_vjp
def scaled_sin(vjp_arg, other, k):
    w, b = vjp_arg
    return jnp.sin(w) * b + other * k


@scaled_sin.def_fwd
def scaled_sin_fwd(perturbed, vjp_arg, other, k):
    return scaled_sin(vjp_arg, other, k), vjp_arg


@scaled_sin.def_bwd
def scaled_sin_bwd(residuals, grad_obj, perturbed, vjp_arg, other, k):
    w, b = residuals
    return (jnp.cos(w) * b * grad_obj * 2.0, jnp.sin(w) * grad_obj)


grads = jax.grad(lambda w, b: jnp.sum(scaled_sin((w, b), jnp.ones(3), 2.0)), argnums=(0, 1))(
    jnp.arange(3.0), jnp.full(3, 0.5))
print("filter_custom_vjp", " ".join(f"{float(v):.6f}" for g in grads for v in g))
