"""config.update('jax_num_cpu_devices', n) sets the CPU device count before devices exist, and refuses after, as
JAX does (in a fresh process, since this one's devices already exist)."""
import subprocess
import sys

from multiprocess import child_env

PROGRAM = """
import meshax
meshax.config.update('jax_num_cpu_devices', 4)
print(meshax.device_count(), meshax.local_device_count())
try:
    meshax.config.update('jax_num_cpu_devices', 2)
except RuntimeError as error:
    print('refused:', error)
"""


def test_num_cpu_devices_from_config():
    done = subprocess.run([sys.executable, "-c", PROGRAM], env=child_env(), capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "4 4"
    assert lines[1].startswith("refused: jax_num_cpu_devices config should be updated before backends are initialized")
