#!/usr/bin/env bash
# Issue 41's models on a 16-core host, in one call of the device tool (after fetch_wheels.sh here):
#     run(command="bash benchmarks/device/run_models_16.sh", carry=[".whl"], timeout_s=580)
# Into $OUT (or ./device-out): models16.md (bench_models.py: every model, quiet, at 1x1, 1x16, 2x8 and 16x1, and
# at 1x1 beside 2 busy loops; both libraries at their defaults, one round each to fit the call) and log.txt.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=$(realpath -m "${OUT:-device-out}")
mkdir -p "$out"
exec > >(tee "$out/log.txt") 2>&1
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD/src
echo "host: $(nproc) cores, $(python3 --version)"
python3 -c "import numpy, numba, mpi4py, jax, meshax; print('numpy', numpy.__version__, 'numba', numba.__version__, 'mpi4py', mpi4py.__version__, 'jax', jax.__version__, 'meshax', meshax.__version__)"
timeout 540 python3 benchmarks/bench_models.py --layouts 1x1,1x16,2x8,16x1 --load 0,2 --rounds 1 --budget 520 \
    --output models16
cp benchmarks/results/models16.md "$out/" 2>/dev/null
ls -la "$out"
