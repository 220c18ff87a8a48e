"""Transformations users call: jit, grad/vjp/jvp, vmap, jacobians, remat, custom derivatives, shard_map and its AD."""
