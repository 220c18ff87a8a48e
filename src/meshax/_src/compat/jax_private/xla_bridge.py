"""jax._src.xla_bridge for the alias: meshax has no XLA backends."""
_backends: dict = {}
