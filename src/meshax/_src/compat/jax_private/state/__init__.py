"""jax._src.state for the alias: array refs (meshax's `Ref`)."""
