"""A program of tests/programs run across hosts: `recoverable_training` or `recoverable_rejoin` (jobs that survive a
dead process), the job's own arguments (address, id, count) taken from the documented variables.
Args: program, then that program's arguments after the job's own."""
import faulthandler
import os
import runpy
import signal
import sys
from pathlib import Path

PROGRAM = Path(__file__).resolve().parents[2] / "programs" / f"{sys.argv[1]}.py"
sys.argv = [str(PROGRAM), os.environ["MESHAX_COORDINATOR_ADDRESS"], os.environ["MESHAX_PROCESS_ID"],
            os.environ["MESHAX_NUM_PROCESSES"], *sys.argv[2:]]
faulthandler.register(signal.SIGUSR2, all_threads=True)  # where a hung process waits, before the tier kills it
sys.path.insert(0, str(PROGRAM.parent))  # where they find recoverable_common
runpy.run_path(str(PROGRAM), run_name="__main__")
