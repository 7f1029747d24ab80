"""Process-wide native thread settings; import this before anything imports numpy.

Each call's end-of-turn model computes its features with numpy, whose OpenBLAS
starts a worker thread per core that spins between calls: measured here, that
doubled the model's CPU cost (70 ms instead of 34 ms per turn decision) and
starved the event loop under load. Calls already run in parallel, so one BLAS
thread each is the right size. Explicit environment settings win.
"""

import os

for _variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")
