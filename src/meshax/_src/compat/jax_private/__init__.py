"""The private `jax._src.X` modules that popular libraries (flax, equinox, chex, jaxtyping) import, answered for
the `jax` alias with meshax's equivalents. Nothing in meshax itself uses them."""
