"""examples/toy.py as bench_compute.py runs it: with a free coordinator address, under meshax or JAX.

    python compute_toy.py meshax|jax PROC_ID NUM_PROCS HOST:PORT [TAG]

The example's source is run as it is, with its fixed 'localhost:10000' replaced by HOST:PORT; for JAX
its meshax imports become jax imports, and with one process initialize() is skipped (as JAX needs).
A trailing TAG (for cleanup by the benchmark) is ignored.
"""
import sys
from pathlib import Path

framework, arguments = sys.argv[1], sys.argv[2:]
source = (Path(__file__).resolve().parents[2] / "examples" / "toy.py").read_text()
source = source.replace("'localhost:10000'", repr(arguments[2]))
if framework == "jax":
    source = source.replace("import meshax as jax", "import jax").replace("meshax.", "jax.")
    if arguments[1] == "1":
        source = source.replace("jax.distributed.initialize(", "(lambda *args: None)(")
sys.argv = [sys.argv[0], *arguments]
exec(compile(source, "examples/toy.py", "exec"), {"__name__": "__main__"})
