"""Neural-network functions (as jax.nn), and their weight initializers in the submodule `initializers`."""
from meshax._src.compat import array_methods as _methods  # noqa: F401  (installs Array operators and methods)
from meshax.nn import initializers as initializers
from meshax._src.nn.functions import (
    celu, dot_product_attention, elu, gelu, glu, hard_sigmoid, hard_silu, hard_swish, hard_tanh, identity, leaky_relu,
    log1mexp, log_sigmoid, log_softmax, logmeanexp, logsumexp, mish, one_hot, relu, relu6, selu, sigmoid, silu,
    soft_sign, softmax, softplus, sparse_plus, sparse_sigmoid, squareplus, standardize, swish, tanh,
)
from meshax._src.compat.small_modules import get_scaled_dot_general_config, scaled_dot_general, scaled_matmul

__all__ = ["celu", "dot_product_attention", "elu", "gelu", "get_scaled_dot_general_config", "glu", "hard_sigmoid",
           "hard_silu", "hard_swish", "hard_tanh", "identity", "initializers", "leaky_relu", "log1mexp",
           "log_sigmoid", "log_softmax", "logmeanexp", "logsumexp", "mish", "one_hot", "relu", "relu6",
           "scaled_dot_general", "scaled_matmul", "selu", "sigmoid", "silu", "soft_sign", "softmax", "softplus",
           "sparse_plus", "sparse_sigmoid", "squareplus", "standardize", "swish", "tanh"]


def __getattr__(name: str):
    """Names of jax.nn that meshax does not have yet raise NotImplementedError (others AttributeError)."""
    from meshax._src.compat.missing_names import missing_attribute

    missing_attribute("jax.nn", name)
