#!/usr/bin/env bash
# Start a meshax job with MPICH's mpiexec (hydra), e.g. 8 processes on hosts a and b:
#
#   examples/cluster/mpiexec.sh a,b          # 8 processes, 4 per host
#   NP=4 PPN=2 examples/cluster/mpiexec.sh a,b
#
# The bare form is simply
#
#   mpiexec -n 8 -hosts a,b python examples/demo.py
#
# meshax sees the launcher (PMI_RANK, PMI_SIZE, PMI_FD in each process) and:
#   - takes process_id/num_processes from MPI (rank/size), and lets MPI start through
#     hydra's own PMI: no MESHAX_* variable and no coordinator address is needed;
#   - has process 0 open the coordinator on a free port of its host and send
#     "<hostname of process 0>:<port>" to the others over MPI.
#
# Needs: passwordless ssh from here to every host (hydra starts its proxies with
# ssh), the same venv at the same path on every host (a shared file system, or the
# same install everywhere: `pip install "$MESHAX_SPEC"` with MESHAX_SPEC a
# checkout path, a git URL or a wheel), and the mpiexec of the pip "mpich" package that meshax
# depends on (it is in the venv's bin/), so that launcher and library match.
#
# Placement: plain `-hosts a,b` deals ranks out round-robin (0,2,4,6 on a; 1,3,5,7
# on b). `-ppn 4` (or `-hosts a:4,b:4`) gives each host a block of consecutive
# ranks, so neighbouring devices of jax.devices() sit on the same host.
#
# Firewalls: the hosts must reach each other on hydra's ports, on MPI's own TCP
# ports and on the coordinator's port. To pin the coordinator port, give the whole
# address (it is passed to every process, since hydra forwards the environment):
#   MESHAX_COORDINATOR_ADDRESS=a:8476 examples/cluster/mpiexec.sh a,b
# (MESHAX_COORDINATOR_PORT alone does not apply here: it only replaces the port of
# an address that is already known.)
set -euo pipefail

HOSTS=${1:?usage: $0 host1,host2,... (see the comments in this file)}
NP=${NP:-8}
PPN=${PPN:-4}
here=$(cd "$(dirname "$0")" && pwd)
SCRIPT=${SCRIPT:-$here/../demo.py}

# Devices per process, read by every process (hydra passes the environment on).
export JAX_NUM_CPU_DEVICES=${JAX_NUM_CPU_DEVICES:-1}

# The job's secret, made once here per job (unless you set it) and passed on by
# hydra with the rest of the environment: the coordinator admits only processes
# that know it.
MESHAX_JOB_TOKEN=${MESHAX_JOB_TOKEN:-$(python -c 'import secrets; print(secrets.token_hex(32))')}
export MESHAX_JOB_TOKEN

exec mpiexec -n "$NP" -ppn "$PPN" -hosts "$HOSTS" python "$SCRIPT"
