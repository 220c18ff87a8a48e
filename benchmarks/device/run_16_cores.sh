#!/usr/bin/env bash
# Issue 23's measurements on a 16-core host, in one call of the device tool (after fetch_wheels.sh here):
#     run(command="bash benchmarks/device/run_16_cores.sh", carry=[".whl"], timeout_s=560)
# Into $OUT (or ./device-out): train16.md (bench_train.py, every layout, both libraries at their defaults),
# train16_tiny.md (the all-dispatch model), timelines.txt (each operation of the 1x16 and 1x1 FSDP steps with
# its wall time: where 1x16 loses to one device), fusion16.txt (bench_fusion.py on 1 and 16 threads) and log.txt.
# Each part has its own time limit, so that a slow one leaves the others their time.
set -uo pipefail
cd "$(dirname "$0")/../.."
source benchmarks/device/setup.sh
python3 -m meshax info | head -30
timeout 260 python3 benchmarks/bench_train.py --output "$out/train16" --budget 250
timeout 90 python3 benchmarks/bench_train.py --model tiny --steps 20 --output "$out/train16_tiny" --budget 80
for devices in 16 1; do
    MESHAX_NUM_CPU_DEVICES=$devices timeout 60 python3 benchmarks/profile_train.py --style fsdp --timeline --steps 10
done > "$out/timelines.txt" 2>&1
timeout 60 python3 benchmarks/bench_fusion.py --threads 1,16 --repeats 10 > "$out/fusion16.txt" 2>&1
ls -la "$out"
