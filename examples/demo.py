# The seed's TPU demo.py with only its import changed: initialize() with no arguments
# auto-detects the job (meshax launch, mpiexec, Slurm, Kubernetes, MESHAX_* variables).
import meshax as jax
jax.distributed.initialize()
if jax.process_index() == 0:
  print(jax.devices())
