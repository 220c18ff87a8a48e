"""The models of bench_models.py, written in plain JAX (run on meshax through `meshax.as_jax`).

Each model is `build(name, mesh, style) -> Model`: its parameters and batch already placed on `mesh`
(a 1-D mesh over every device, axis 'data'; style 'tp' uses the same devices as axis 'model'), and a
jitted training step `step(params, opt_state, batch) -> (params, opt_state, loss)`:

- `gpt`: a GPT-style decoder, 4 layers, d 256, 8 heads, seq 128, batch 16, vocabulary 256, SGD;
  style 'dp' (batch P('data'), parameters replicated) or 'tp' (Megatron-style: QKV and the first MLP
  weight split by columns, the output projections by rows, over 'model').
- `gpt_scan`: the same layers stacked and run under `lax.scan` with `jax.checkpoint` on the block
  (flax `nn.scan` style).
- `gru`: a GRU over 200 steps under `lax.scan` (input 64, hidden 128, batch 32), forward and grad.
- `cnn`: two 3x3 convolutions of 32 channels on 32x32x3 images, batch 64, then a dense layer.
- `tiny`: an MLP 64-64-64-10, batch 64, Adam (a step that is all per-operation overhead).
- `mlp`: bench_train's MLP, 784-1024-1024-10, batch 2048, SGD.
"""
from __future__ import annotations

import functools
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec as P

MODELS = ("gpt", "gpt_scan", "gru", "cnn", "tiny", "mlp")
STYLES = {"gpt": ("dp", "tp")}  # models with more than the data-parallel style
# models whose step is well under a millisecond: each timed sample is this many steps in a row (their mean), as a
# single step's time is mostly the barrier's and the timer's jitter and the first steps' cold caches
REPEAT = {"tiny": 25}
# models whose steady state comes after many steps: meshax runs a small program compiled whole from its 500th run
# on, and a scan of small steps from its 100th (interpreters/numba_program.py). The workers run both libraries this
# many steps before the timed ones (gru on one device only: JAX's gru step over 8 devices takes ~8 s).
STEADY_AFTER = {"tiny": 520, "gru": 110}
_STEADY_ONE_DEVICE = {"gru"}


def steady_after(model: str, devices: int) -> int:
    """The steps both libraries run before the timed ones, for `model` on `devices` devices in all."""
    if model in _STEADY_ONE_DEVICE and devices > 1:
        return 0
    return STEADY_AFTER.get(model, 0)


class Model(NamedTuple):
    params: Any
    opt_state: Any
    batch: Any
    step: Callable[..., Any]


def _init(rng: np.random.Generator, *shape: int, scale: float | None = None) -> np.ndarray:
    scale = (1.0 / np.sqrt(shape[-2] if len(shape) > 1 else shape[0])) if scale is None else scale
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def _sgd(lr: float) -> tuple[Callable, Callable]:
    def init(params: Any) -> Any:
        return ()

    def update(params: Any, state: Any, grads: Any) -> tuple[Any, Any]:
        return jax.tree_util.tree_map(lambda p, g: p - lr * g, params, grads), state
    return init, update


def _adam(lr: float, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8) -> tuple[Callable, Callable]:
    def init(params: Any) -> Any:
        zeros = jax.tree_util.tree_map(jnp.zeros_like, params)
        return (jnp.zeros((), jnp.int32), zeros, zeros)

    def update(params: Any, state: Any, grads: Any) -> tuple[Any, Any]:
        count, mu, nu = state
        count = count + 1
        mu = jax.tree_util.tree_map(lambda m, g: b1 * m + (1 - b1) * g, mu, grads)
        nu = jax.tree_util.tree_map(lambda v, g: b2 * v + (1 - b2) * g * g, nu, grads)
        c1 = 1 - b1 ** count.astype(jnp.float32)
        c2 = 1 - b2 ** count.astype(jnp.float32)
        params = jax.tree_util.tree_map(lambda p, m, v: p - lr * (m / c1) / (jnp.sqrt(v / c2) + eps), params, mu, nu)
        return params, (count, mu, nu)
    return init, update


def _cross_entropy(logits: Any, labels: Any) -> Any:
    logp = jax.nn.log_softmax(logits, axis=-1)
    return -jnp.mean(jnp.take_along_axis(logp, labels[..., None], axis=-1))


# ---------------------------------------------------------------- GPT
GPT = dict(layers=4, d=256, heads=8, seq=128, batch=16, vocab=256, mlp=1024)


def _gpt_layer_params(rng: np.random.Generator) -> dict[str, np.ndarray]:
    d, m = GPT["d"], GPT["mlp"]
    return {"ln1": np.ones(d, np.float32), "ln2": np.ones(d, np.float32),
            "qkv": _init(rng, d, 3 * d), "proj": _init(rng, d, d),
            "fc1": _init(rng, d, m), "b1": np.zeros(m, np.float32), "fc2": _init(rng, m, d),
            "b2": np.zeros(d, np.float32)}


def _layer_norm(x: Any, g: Any) -> Any:
    mean = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean(jnp.square(x - mean), axis=-1, keepdims=True)
    return (x - mean) * jax.lax.rsqrt(var + 1e-5) * g


def _gpt_block(x: Any, p: dict[str, Any]) -> Any:
    b, s, d = x.shape
    h = GPT["heads"]
    qkv = _layer_norm(x, p["ln1"]) @ p["qkv"]
    q, k, v = jnp.split(qkv, 3, axis=-1)
    q, k, v = (t.reshape(b, s, h, d // h) for t in (q, k, v))
    scores = jnp.einsum("bqhd,bkhd->bhqk", q, k) / np.sqrt(d // h).astype(np.float32)
    mask = jnp.tril(jnp.ones((s, s), bool))
    scores = jnp.where(mask, scores, -1e9)
    attn = jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(scores, axis=-1), v).reshape(b, s, d)
    x = x + attn @ p["proj"]
    y = jax.nn.gelu(_layer_norm(x, p["ln2"]) @ p["fc1"] + p["b1"])
    return x + y @ p["fc2"] + p["b2"]


def _gpt_loss(params: dict[str, Any], tokens: Any, scanned: bool) -> Any:
    x = params["embed"][tokens[:, :-1]] + params["pos"]
    if scanned:
        block = jax.checkpoint(_gpt_block)
        x, _ = jax.lax.scan(lambda c, p: (block(c, p), None), x, params["layers"])
    else:
        for p in params["layers"]:
            x = _gpt_block(x, p)
    x = _layer_norm(x, params["ln_f"])
    return _cross_entropy(x @ params["embed"].T, tokens[:, 1:])


def _gpt(mesh: Any, style: str, scanned: bool) -> Model:
    rng = np.random.default_rng(0)
    layers = [_gpt_layer_params(rng) for _ in range(GPT["layers"])]
    params = {"embed": _init(rng, GPT["vocab"], GPT["d"], scale=0.02),
              "pos": _init(rng, GPT["seq"], GPT["d"], scale=0.02), "ln_f": np.ones(GPT["d"], np.float32),
              "layers": (jax.tree_util.tree_map(lambda *xs: np.stack(xs), *layers) if scanned else layers)}
    tokens = rng.integers(0, GPT["vocab"], (GPT["batch"], GPT["seq"] + 1)).astype(np.int32)
    replicated = NamedSharding(mesh, P())
    if style == "tp":
        lead = (None,) if scanned else ()
        split = {"qkv": P(*lead, None, "data"), "fc1": P(*lead, None, "data"), "b1": P(*lead, "data"),
                 "proj": P(*lead, "data", None), "fc2": P(*lead, "data", None)}

        def place_layer(layer: dict[str, Any]) -> dict[str, Any]:
            return {k: jax.device_put(v, NamedSharding(mesh, split.get(k, P()))) for k, v in layer.items()}
        placed = {k: jax.device_put(v, replicated) for k, v in params.items() if k != "layers"}
        placed["layers"] = place_layer(params["layers"]) if scanned else [place_layer(l) for l in params["layers"]]
        batch = jax.device_put(tokens, replicated)
    else:
        placed = jax.device_put(params, replicated)
        batch = jax.device_put(tokens, NamedSharding(mesh, P("data")))
    return _trainer(mesh, placed, batch, functools.partial(_gpt_loss, scanned=scanned), _sgd(0.05))


# ---------------------------------------------------------------- GRU
GRU = dict(steps=200, inputs=64, hidden=128, batch=32)


def _gru_loss(params: dict[str, Any], batch: tuple[Any, Any]) -> Any:
    xs, targets = batch  # xs: [steps, batch, inputs]
    hdim = GRU["hidden"]

    def cell(h: Any, x: Any) -> tuple[Any, Any]:
        gates = x @ params["wx"] + h @ params["wh"] + params["b"]
        z = jax.nn.sigmoid(gates[:, :hdim])
        r = jax.nn.sigmoid(gates[:, hdim:2 * hdim])
        n = jnp.tanh(x @ params["wxn"] + (r * h) @ params["whn"] + params["bn"])
        h = (1 - z) * n + z * h
        return h, h
    h0 = jnp.zeros((xs.shape[1], hdim), jnp.float32)
    h, _ = jax.lax.scan(cell, h0, xs)
    return jnp.mean(jnp.square(h @ params["out"] - targets))


def _gru(mesh: Any, style: str) -> Model:
    rng = np.random.default_rng(0)
    i, h = GRU["inputs"], GRU["hidden"]
    params = {"wx": _init(rng, i, 2 * h), "wh": _init(rng, h, 2 * h), "b": np.zeros(2 * h, np.float32),
              "wxn": _init(rng, i, h), "whn": _init(rng, h, h), "bn": np.zeros(h, np.float32),
              "out": _init(rng, h, 1)}
    xs = rng.standard_normal((GRU["steps"], GRU["batch"], i)).astype(np.float32)
    targets = rng.standard_normal((GRU["batch"], 1)).astype(np.float32)
    params = jax.device_put(params, NamedSharding(mesh, P()))
    batch = (jax.device_put(xs, NamedSharding(mesh, P(None, "data"))),
             jax.device_put(targets, NamedSharding(mesh, P("data"))))
    return _trainer(mesh, params, batch, _gru_loss, _sgd(0.1))


# ---------------------------------------------------------------- CNN
CNN = dict(batch=64, size=32, channels=3, features=32, classes=10)


def _cnn_loss(params: dict[str, Any], batch: tuple[Any, Any]) -> Any:
    images, labels = batch
    x = images
    for w, b in ((params["c1"], params["b1"]), (params["c2"], params["b2"])):
        x = jax.lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
        x = jax.nn.relu(x + b)
    x = jnp.mean(x, axis=(1, 2))
    return _cross_entropy(x @ params["dense"], labels)


def _cnn(mesh: Any, style: str) -> Model:
    rng = np.random.default_rng(0)
    c, f = CNN["channels"], CNN["features"]
    params = {"c1": _init(rng, 3, 3, c, f, scale=0.2), "b1": np.zeros(f, np.float32),
              "c2": _init(rng, 3, 3, f, f, scale=0.06), "b2": np.zeros(f, np.float32),
              "dense": _init(rng, f, CNN["classes"])}
    images = rng.standard_normal((CNN["batch"], CNN["size"], CNN["size"], c)).astype(np.float32)
    labels = rng.integers(0, CNN["classes"], CNN["batch"]).astype(np.int32)
    params = jax.device_put(params, NamedSharding(mesh, P()))
    batch = jax.device_put((images, labels), NamedSharding(mesh, P("data")))
    return _trainer(mesh, params, batch, _cnn_loss, _sgd(0.1))


# ---------------------------------------------------------------- MLPs
def _mlp_loss(params: list[tuple[Any, Any]], batch: tuple[Any, Any]) -> Any:
    x, labels = batch
    for w, b in params[:-1]:
        x = jax.nn.relu(x @ w + b)
    w, b = params[-1]
    return _cross_entropy(x @ w + b, labels)


def _mlp(mesh: Any, style: str, sizes: tuple[int, ...], batch_size: int, optimizer: tuple) -> Model:
    rng = np.random.default_rng(0)
    params = [(_init(rng, a, b), np.zeros(b, np.float32)) for a, b in zip(sizes[:-1], sizes[1:])]
    x = rng.standard_normal((batch_size, sizes[0])).astype(np.float32)
    labels = rng.integers(0, sizes[-1], batch_size).astype(np.int32)
    params = jax.device_put(params, NamedSharding(mesh, P()))
    batch = jax.device_put((x, labels), NamedSharding(mesh, P("data")))
    return _trainer(mesh, params, batch, _mlp_loss, optimizer)


def _trainer(mesh: Any, params: Any, batch: Any, loss_fn: Callable, optimizer: tuple) -> Model:
    """The model with its jitted step; the optimizer state starts replicated on `mesh`, as the step returns it
    (placed as jit(init) leaves it, JAX's second step retraced and compiled again: 1.0 s of Adam's `tiny`)."""
    init, update = optimizer

    @jax.jit
    def step(params: Any, opt_state: Any, batch: Any) -> tuple[Any, Any, Any]:
        loss, grads = jax.value_and_grad(loss_fn)(params, batch)
        params, opt_state = update(params, opt_state, grads)
        return params, opt_state, loss
    return Model(params, jax.device_put(jax.jit(init)(params), NamedSharding(mesh, P())), batch, step)


def build(name: str, mesh: Any, style: str = "dp") -> Model:
    """The model `name` (one of MODELS) on `mesh` (axis 'data'), in `style` ('dp', or 'tp' for gpt)."""
    if name in ("gpt", "gpt_scan"):
        return _gpt(mesh, style, scanned=name == "gpt_scan")
    if name == "gru":
        return _gru(mesh, style)
    if name == "cnn":
        return _cnn(mesh, style)
    if name == "tiny":
        return _mlp(mesh, style, (64, 64, 64, 10), 64, _adam(1e-3))
    if name == "mlp":
        return _mlp(mesh, style, (784, 1024, 1024, 10), 2048, _sgd(0.1))
    raise ValueError(f"unknown model {name!r}: expected one of {', '.join(MODELS)}")
