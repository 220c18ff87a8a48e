#!/usr/bin/env bash
# Start one meshax job over ssh, one process (or PROCS_PER_HOST processes) per host,
# in the style of the tutorial's TPU example (`xargs -P` running ssh in parallel).
#
#   examples/cluster/ssh_launch.sh host0 host1 host2 host3
#   INSTALL=1 MESHAX_SPEC=dist/meshax-0.1.0-py3-none-any.whl CPU_DEVICES=2 \
#       examples/cluster/ssh_launch.sh 10.0.0.1 10.0.0.2
#
# The first host runs process 0 and therefore the coordinator. Each process gets
# its place from three environment variables, which is all meshax needs:
#   MESHAX_COORDINATOR_ADDRESS  <first host>:<PORT>
#   MESHAX_NUM_PROCESSES        number of hosts x PROCS_PER_HOST
#   MESHAX_PROCESS_ID           hosts in the order given, consecutive ids per host
# and the job's secret MESHAX_JOB_TOKEN, made once here per job (or taken from your
# environment) and sent to each process over ssh's stdin, never on a command line.
#
# Needs: passwordless ssh to every host; on every host a Python with meshax
# installed (INSTALL=1 makes a venv "meshax-venv" in the remote home and
# pip-installs MESHAX_SPEC there); the hosts able to reach the first host on PORT
# and each other on MPI's own TCP ports.
#
# Settings (environment variables):
#   SCRIPT          program to run, copied to each remote home (default: examples/demo.py)
#   PORT            coordinator port on the first host (default: 8476)
#   COORDINATOR     name/IP under which the other hosts reach the first host
#                   (default: the first host argument without any "user@")
#   PROCS_PER_HOST  processes per host (default: 1)
#   CPU_DEVICES     sets JAX_NUM_CPU_DEVICES, devices per process (default: unset = 1)
#   PYTHON          remote interpreter (default: meshax-venv/bin/python, relative to home)
#   INSTALL         1 = create the remote venv and pip install MESHAX_SPEC first
#   MESHAX_SPEC     what pip installs meshax from (needed with INSTALL=1): a local
#                   wheel file (copied to each host), a git URL
#                   (git+https://HOST/OWNER/meshax.git@TAG) or a path on the hosts
#   MESHAX_JOB_TOKEN  the job's secret (default: a fresh random one)
set -euo pipefail

if [ "$#" -eq 0 ]; then
    sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
    exit 2
fi

here=$(cd "$(dirname "$0")" && pwd)
export SCRIPT=${SCRIPT:-$here/../demo.py}
export PORT=${PORT:-8476}
export PROCS_PER_HOST=${PROCS_PER_HOST:-1}
export CPU_DEVICES=${CPU_DEVICES:-}
export PYTHON=${PYTHON:-meshax-venv/bin/python}
export INSTALL=${INSTALL:-0}
export MESHAX_SPEC=${MESHAX_SPEC:-}
if [ "$INSTALL" = 1 ] && [ -z "$MESHAX_SPEC" ]; then
    echo "$0: INSTALL=1 needs MESHAX_SPEC, what pip installs meshax from: a wheel file, a git URL (git+https://...) or a path on the hosts, e.g. MESHAX_SPEC=dist/meshax-0.1.0-py3-none-any.whl" >&2
    exit 2
fi
# A local wheel is copied to each host's home and installed from there.
export REMOTE_SPEC=$MESHAX_SPEC
[ -f "$MESHAX_SPEC" ] && REMOTE_SPEC=./$(basename "$MESHAX_SPEC")
# The job's secret, once per job: the coordinator admits only processes that know it.
MESHAX_JOB_TOKEN=${MESHAX_JOB_TOKEN:-$(python3 -c 'import secrets; print(secrets.token_hex(32))')}
export MESHAX_JOB_TOKEN
first=$1
export COORDINATOR=${COORDINATOR:-${first#*@}}
export NUM_PROCESSES=$(( $# * PROCS_PER_HOST ))
export REMOTE_SCRIPT
REMOTE_SCRIPT=$(basename "$SCRIPT")

# Copy the program (and optionally install meshax) on every host, in parallel.
printf '%s\n' "$@" | xargs -P 0 -I{} bash -c '
    scp -q -o BatchMode=yes "$SCRIPT" "$0:" || exit 1
    if [ "$INSTALL" = 1 ]; then
        if [ -f "$MESHAX_SPEC" ]; then scp -q -o BatchMode=yes "$MESHAX_SPEC" "$0:" || exit 1; fi
        ssh -n -o BatchMode=yes "$0" "python3 -m venv meshax-venv && meshax-venv/bin/pip install -q '\''$REMOTE_SPEC'\''"
    fi' {}

# One line "<process id> <host>" per process: ids run host by host, so the
# processes that share a host get consecutive ids.
plan() {
    local h=0 host l
    for host in "$@"; do
        for (( l = 0; l < PROCS_PER_HOST; l++ )); do
            echo "$(( h * PROCS_PER_HOST + l )) $host"
        done
        h=$(( h + 1 ))
    done
}

# Start every process at once; their output comes back prefixed with "[id] ".
# If one fails, the coordinator tells the others, which then exit too. The token
# goes through ssh's stdin (the remote shell reads it first), so it never appears
# in a process list.
plan "$@" | xargs -P 0 -n 2 bash -c '
    id=$0 host=$1
    devices=""
    [ -n "$CPU_DEVICES" ] && devices="JAX_NUM_CPU_DEVICES=$CPU_DEVICES"
    printf "%s\n" "$MESHAX_JOB_TOKEN" | ssh -o BatchMode=yes "$host" \
        "IFS= read -r MESHAX_JOB_TOKEN && export MESHAX_JOB_TOKEN && exec" \
        "env MESHAX_COORDINATOR_ADDRESS=$COORDINATOR:$PORT MESHAX_NUM_PROCESSES=$NUM_PROCESSES" \
        "MESHAX_PROCESS_ID=$id $devices PYTHONUNBUFFERED=1 $PYTHON $REMOTE_SCRIPT" 2>&1 |
        sed -u "s/^/[$id] /"
    rc=${PIPESTATUS[0]}; [ "$rc" = 0 ] || echo "[$id] exit $rc" >&2; exit "$rc"'
