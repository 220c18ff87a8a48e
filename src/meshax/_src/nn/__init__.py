"""meshax.nn: activation functions and weight initializers."""
