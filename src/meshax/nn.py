"""Neural-network functions (as jax.nn)."""
from meshax._src.nn import (
    gelu, log_softmax, logsumexp, one_hot, relu, relu6, sigmoid, silu, softmax, softplus, standardize, swish, tanh,
)

__all__ = ["gelu", "log_softmax", "logsumexp", "one_hot", "relu", "relu6", "sigmoid", "silu", "softmax", "softplus",
           "standardize", "swish", "tanh"]
