"""The primitive set (the level of jax.lax's primitives): NumPy implementations, shape and sharding rules, the CPU
kernels behind them, and the structural moves the batching interpreter needs."""
