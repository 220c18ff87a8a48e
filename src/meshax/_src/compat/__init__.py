"""The JAX-compatibility surface: small top-level names, the table of JAX names meshax lacks, and the `jax` alias."""
