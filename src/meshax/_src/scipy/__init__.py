"""Implementation of meshax.scipy: SciPy's API (as jax.scipy) on meshax arrays."""
