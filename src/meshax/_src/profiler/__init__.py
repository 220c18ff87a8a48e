"""jax.profiler's machinery: the recorder the interpreters and the data plane report to (`recorder.py`), the Chrome
Trace Event files a trace becomes (`writer.py`), the merge of every process's file (`merge.py`) and the device memory
profile (`pprof.py`). This layer imports only the standard library: every layer above may report to it."""
