"""High-level ("hijax") type definitions, as in jax.experimental.hijax: they can be defined (flax's
`nnx.Variable` module does at import), not bound (meshax has no high-level types)."""
from meshax._src.compat.hijax import *  # noqa: F401,F403
from meshax._src.compat.hijax import __all__  # noqa: F401
