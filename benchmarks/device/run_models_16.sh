#!/usr/bin/env bash
# Issue 41's models on a 16-core host, in one call of the device tool (after fetch_wheels.sh here):
#     run(command="bash benchmarks/device/run_models_16.sh", carry=[".whl"], timeout_s=580)
# Into $OUT (or ./device-out): models16.md (bench_models.py: every model, quiet, at 1x1, 1x16, 2x8 and 16x1, and
# at 1x1 beside 2 busy loops; both libraries at their defaults, one round each to fit the call) and log.txt.
set -uo pipefail
cd "$(dirname "$0")/../.."
source benchmarks/device/setup.sh
timeout 540 python3 benchmarks/bench_models.py --layouts 1x1,1x16,2x8,16x1 --load 0,2 --rounds 1 --budget 520 \
    --output models16
cp benchmarks/results/models16.md "$out/" 2>/dev/null
ls -la "$out"
