"""Small example libraries (as jax.example_libraries): import `meshax.example_libraries.optimizers` explicitly."""
