"""Single-process tests see 8 CPU devices, as in the seeds' notebook; multi-process tests set their own."""
import os
import sys
from pathlib import Path

os.environ.setdefault("MESHAX_NUM_CPU_DEVICES", "8")
os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
sys.path.insert(0, str(Path(__file__).parent))
