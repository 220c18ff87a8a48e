#!/usr/bin/env bash
# meshax's side of run_models_16.sh's multi-process layouts (2x8, 16x1) alone, for a call with little device time
# left (JAX's side is in that script's table):
#     run(command="bash benchmarks/device/run_models_16_processes.sh", carry=[".whl"], timeout_s=...)
# gru (110 untimed steps first) runs last, in the time that is left.
set -uo pipefail
cd "$(dirname "$0")/../.."
source benchmarks/device/setup.sh
budget=${BUDGET:-200}
start=$SECONDS
timeout $((budget + 15)) python3 benchmarks/bench_models.py --only meshax --layouts 2x8,16x1 --rounds 1 \
    --models gpt,gpt_scan,cnn,tiny,mlp --budget "$budget" --output models16_processes
cp benchmarks/results/models16_processes.md "$out/" 2>/dev/null
left=$((budget - (SECONDS - start)))
if [ "$left" -gt 40 ]; then
    timeout $((left + 10)) python3 benchmarks/bench_models.py --only meshax --layouts 2x8,16x1 --rounds 1 \
        --models gru --budget "$left" --output models16_processes_gru
    cp benchmarks/results/models16_processes_gru.md "$out/" 2>/dev/null
fi
ls -la "$out"
