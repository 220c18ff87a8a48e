"""The examples' small MLP training step, written once for any library with JAX's API (meshax or JAX itself)."""
from __future__ import annotations

from typing import Any, Callable


def sgd_step(lib: Any, np_: Any) -> Callable[..., Any]:
    """`run(params, x, labels) -> (new params, loss)`: a 2-layer ReLU MLP, softmax cross-entropy over 4 classes,
    one SGD step of rate 0.1, written with `lib` (meshax or jax) and its numpy module `np_`."""

    def loss(params, x, labels):
        h = lib.nn.relu(x @ params[0]["w"] + params[0]["b"])
        logits = h @ params[1]["w"] + params[1]["b"]
        return -np_.mean(np_.sum(lib.nn.one_hot(labels, 4) * lib.nn.log_softmax(logits), axis=-1))

    def run(params, x, labels):
        value, grads = lib.value_and_grad(loss)(params, x, labels)
        return lib.tree_util.tree_map(lambda p, g: p - 0.1 * g, params, grads), value

    return run
