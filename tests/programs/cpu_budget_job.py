"""One process of a job that reports its CPU budget: the threads it got, BLAS's threads while computing, and a
matmul's checksum (eager, sharded over every device of the job)."""
import threadpoolctl

import meshax
import meshax.numpy as jnp
import numpy as np
from meshax._src.runtime import cpu_budget
from meshax.sharding import NamedSharding, PartitionSpec as P

meshax.distributed.initialize()
mesh = meshax.make_mesh((len(meshax.devices()),), ("data",))
x = meshax.device_put(np.arange(16 * 8, dtype=np.float32).reshape(16, 8) / 100, NamedSharding(mesh, P("data")))
total = float(jnp.sum(x @ x.T))
blas = ",".join(str(n) for n in sorted({i["num_threads"] for i in threadpoolctl.threadpool_info()
                                        if i["user_api"] == "blas"}))
print(f"budget {meshax.process_index()} {cpu_budget.compute_threads()} {cpu_budget.host_controllers()} "
      f"{cpu_budget.host_index()} {blas} {total:.4f}", flush=True)
