"""Prints one JSON line describing what this process sees. Args: [address id n] or none (auto-detect)."""
import json
import sys

import meshax

if len(sys.argv) >= 4:
    meshax.distributed.initialize(sys.argv[1], int(sys.argv[3]), int(sys.argv[2]))
else:
    meshax.distributed.initialize()

report = "DEVICES " + json.dumps({
    "process_index": meshax.process_index(),
    "process_count": meshax.process_count(),
    "devices": [repr(d) for d in meshax.devices()],
    "device_names": [str(d) for d in meshax.devices()],
    "local_devices": [repr(d) for d in meshax.local_devices()],
    "device_processes": [d.process_index for d in meshax.devices()],
    "local_hardware_ids": [d.local_hardware_id for d in meshax.local_devices()],
    "device_count": meshax.device_count(),
    "local_device_count": meshax.local_device_count(),
    "process_1_devices": [repr(d) for d in meshax.local_devices(process_index=meshax.process_count() - 1)],
})
sys.stdout.write(report + "\n")  # one write, so lines of processes sharing a pipe stay whole
sys.stdout.flush()
