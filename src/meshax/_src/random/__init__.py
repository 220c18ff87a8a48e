"""meshax.random: JAX's default PRNG (threefry-2x32) and its distributions."""
