"""The NumPy floor of bench_train.py: the MLP's SGD step written by hand with NumPy (and MPI between processes).

Each process computes the forward and backward pass of its rows of the global batch with one NumPy call
per operation (matmuls on BLAS with this controller's threads), the processes sum their gradients and
losses with MPI Allreduce, and every process applies the same SGD update: the least a library
that computes with NumPy can spend on this step in this layout. Same model and data as the libraries'
step (examples/mlp_common.py: ReLU MLP, mean softmax cross-entropy, SGD), in float32.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

Params = list[dict[str, np.ndarray]]


def floor_step(params: Params, x: np.ndarray, one_hot: np.ndarray, lr: float, global_batch: int,
               allreduce: Callable[[np.ndarray], None]) -> tuple[Params, float]:
    """(new parameters, loss) after one SGD step; `x`/`one_hot` are this process's rows; `allreduce` sums an
    array in place over the processes."""
    (w1, b1), (w2, b2), (w3, b3) = ((p["w"], p["b"]) for p in params)
    h1 = x @ w1
    h1 += b1
    a1 = np.maximum(h1, 0)
    h2 = a1 @ w2
    h2 += b2
    a2 = np.maximum(h2, 0)
    logits = a2 @ w3
    logits += b3
    shifted = logits - logits.max(axis=-1, keepdims=True)
    exp = np.exp(shifted)
    total = exp.sum(axis=-1, keepdims=True)
    loss = np.array([-np.sum(one_hot * (shifted - np.log(total))) / global_batch], np.float32)
    g3 = (exp / total - one_hot) / np.float32(global_batch)
    g2 = g3 @ w3.T
    g2 *= h2 > 0
    g1 = g2 @ w2.T
    g1 *= h1 > 0
    grads = [(x.T @ g1, g1.sum(axis=0)), (a1.T @ g2, g2.sum(axis=0)), (a2.T @ g3, g3.sum(axis=0))]
    for gw, gb in grads:
        allreduce(gw)
        allreduce(gb)
    allreduce(loss)
    lr32 = np.float32(lr)
    new = [{"w": p["w"] - lr32 * gw, "b": p["b"] - lr32 * gb} for p, (gw, gb) in zip(params, grads)]
    return new, float(loss[0])


def mpi_allreduce(world: Any) -> Callable[[np.ndarray], None]:
    """In-place sum over the processes of `world` (an mpi4py communicator); nothing for one process."""
    if world is None or world.Get_size() == 1:
        return lambda array: None
    from mpi4py import MPI

    return lambda array: world.Allreduce(MPI.IN_PLACE, array, op=MPI.SUM)


def local_rows(array: np.ndarray, rank: int, size: int) -> np.ndarray:
    rows = array.shape[0] // size
    return np.ascontiguousarray(array[rank * rows:(rank + 1) * rows])
