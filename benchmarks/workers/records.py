"""Where benchmark children leave their measurements: $BENCH_RECORD_DIR/<rank>.json, written atomically."""
from __future__ import annotations

import json
import os
import time
from typing import Any


def write_record(rank: int, record: dict[str, Any]) -> None:
    """Replace this process's record file by `record` (readers never see a half-written file)."""
    path = os.path.join(os.environ["BENCH_RECORD_DIR"], f"{rank}.json")
    with open(path + ".tmp", "w") as file:
        json.dump(record, file)
    os.replace(path + ".tmp", path)


class RecordWriter:
    """A record rewritten now and then while it grows, so that a job killed at its time limit keeps
    what it measured."""

    def __init__(self, record: dict[str, Any]) -> None:
        self.record = dict(record, complete=False)
        self.written = 0.0

    def write(self, complete: bool = False, every: float = 0.5) -> None:
        """Write the record (at most every `every` s unless `complete`)."""
        if not complete and time.monotonic() - self.written < every:
            return
        self.record["complete"] = complete
        write_record(self.record["rank"], self.record)
        self.written = time.monotonic()
