"""jax._src.interpreters for the alias (its public parts: meshax.interpreters)."""
