"""The interpreters' public rule tables (as jax.interpreters): ad, batching, partial_eval, mlir."""
from meshax.interpreters import ad, batching, mlir, partial_eval

__all__ = ["ad", "batching", "mlir", "partial_eval"]
