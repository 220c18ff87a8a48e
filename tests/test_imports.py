"""`import meshax` is light (no NumPy until a name is used), and every way into the package gives Arrays
and traced values their operators (they are installed by meshax.numpy's code)."""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest


def run(code: str) -> str:
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_import_meshax_and_the_launcher_do_not_import_numpy():
    assert run("import sys, meshax, meshax._src.launch.launcher; print('numpy' in sys.modules)") == "False"


def test_joining_a_job_and_asking_about_devices_do_not_import_numpy():
    code = ("import sys, meshax; meshax.distributed.initialize; meshax.config; meshax.devices(); "
            "meshax.process_count(); meshax.tree_util; print('numpy' in sys.modules)")
    assert run(code) == "False"


def test_a_training_step_does_not_import_scipy_until_a_special_function_runs():
    """SciPy (~0.25 s to import) serves lax's special functions only: a jitted step touching `lax` and `nn` goes
    without it, and the first special function brings it, with SciPy's value."""
    code = ("import sys, numpy as np, meshax, meshax.numpy as jnp; "
            "f = meshax.jit(meshax.grad(lambda w: jnp.sum(meshax.nn.relu(meshax.lax.dot(w, w)) ** 2))); "
            "f(np.ones((3, 3), np.float32)); print('scipy' in sys.modules, end=' '); "
            "print(float(meshax.lax.lgamma(np.float32(4.5))), 'scipy.special' in sys.modules)")
    import math
    assert run(code) == f"False {float(np.float32(math.lgamma(4.5)))} True"


@pytest.mark.parametrize("entry", [
    "import meshax as jax; f = jax.jit(lambda a, b: jax.nn.relu(a @ b - 1)); x = jax.device_put(np.ones((2, 2)))",
    "from meshax import jit as J; import meshax; f = J(lambda a, b: (a @ b - 1).clip(0)); "
    "x = meshax.device_put(np.ones((2, 2)))",
    "from meshax.experimental.shard_map import shard_map; from meshax.sharding import PartitionSpec as P; "
    "import meshax; m = meshax.make_mesh((meshax.device_count(),), ('i',)); "
    "f = shard_map(lambda a, b: (a @ b - 1).clip(0), mesh=m, in_specs=P(), out_specs=P()); "
    "x = meshax.device_put(np.ones((2, 2)))",
])
def test_operators_exist_whichever_module_is_imported_first(entry):
    assert run(f"import numpy as np; {entry}; print(float(f(x, x).sum()))") == "4.0"


def test_import_meshax_puts_openblas_threads_to_sleep_unless_the_user_chose():
    code = "import os, meshax; print(os.environ['OPENBLAS_THREAD_TIMEOUT'])"
    assert run(code) == "4"
    chosen = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                            env={**os.environ, "OPENBLAS_THREAD_TIMEOUT": "28"})
    assert chosen.stdout.strip() == "28"


def test_loading_mpi_tells_ucx_not_to_hook_memory_calls():
    code = "import os; from meshax._src.runtime.mpi import mpi_module; mpi_module(); print(os.environ['UCX_MEM_EVENTS'])"
    assert run(code) == "no"
