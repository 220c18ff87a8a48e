"""Kill a whole host mid-allreduce again and again; count the trials every survivor ended right.

    .venv/bin/python tests/multihost/kill_trials.py --trials 20 [--keep DIR] [--env NAME=VALUE ...]

Each trial builds 2 namespaced hosts (hosts.py), runs 2 x 2 processes allreducing 4 MiB in a loop, SIGKILLs
every process of host 1 at once, and checks that processes 0 and 1 exit 70 naming processes 2 and 3 with no
sign of a crash (a survivor whose MPI asserts is counted too: meshax handles that exit). Prints one line per trial and `K of N trials ended right`; exits 0 only when K == N. With
`--keep DIR` the survivors' stderr of every trial that went wrong is written to DIR/trial-<i>.txt; each
`--env NAME=VALUE` is added to every process's environment (e.g. MPIR_CVAR_CH4_NETMOD=ofi to try MPICH's OFI).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from multihost import hosts, scenarios  # noqa: E402
from multihost.hosts import Cluster  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--keep", type=Path, default=None, help="write the stderr of failed trials here")
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                        help="add to every process's environment (repeatable)")
    options = parser.parse_args()
    extra = dict(item.split("=", 1) for item in options.env)
    reason = hosts.unavailable_reason()
    if reason is not None:
        print(f"cannot run: {reason}", file=sys.stderr)
        return 2
    hosts.sweep()
    right = crashed = asserted = 0
    for trial in range(options.trials):
        started = time.monotonic()
        with Cluster(2, tag="k") as cluster:
            outcomes, problems = scenarios.kill_a_host_mid_allreduce(cluster, **extra)
        crashed += any("crashed" in problem for problem in problems)
        asserted += any("Assertion failed" in outcome.stderr for outcome in outcomes)
        right += not problems
        verdict = "right" if not problems else "WRONG: " + "; ".join(problems)
        print(f"trial {trial + 1}: {verdict} ({time.monotonic() - started:.1f} s)", flush=True)
        if problems and options.keep is not None:
            options.keep.mkdir(parents=True, exist_ok=True)
            (options.keep / f"trial-{trial + 1}.txt").write_text(scenarios.describe(outcomes, tail=None))
    print(f"{right} of {options.trials} trials ended right; {crashed} with a crashed survivor; {asserted} in which "
          "a survivor's MPI asserted (its exit is handled: native_exit.py)")
    return 0 if right == options.trials else 1


if __name__ == "__main__":
    sys.exit(main())
