"""What every GPU run shares (child processes only; the parent never imports CuPy): the device's
description, mapped pinned host memory that outlives a trap, evicting L2 between runs, and a
CUDA error's name."""

from __future__ import annotations

import ctypes
import datetime as dt
import subprocess

L2_EVICT_BYTES = 256 << 20
"""Written before a timed or logged launch so no tile is still in L2 from the host's fill."""


def now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def device_info() -> dict:
    """Name, compute capability, SM count, driver and CUDA versions of device 0."""
    import cupy
    rt = cupy.cuda.runtime
    props = rt.getDeviceProperties(0)
    name = props["name"]
    name = name.decode() if isinstance(name, bytes) else str(name)

    def version(v: int) -> str:
        return f"{v // 1000}.{(v % 1000) // 10}"

    driver = "unknown"
    try:
        driver = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=20, check=True,
        ).stdout.strip().splitlines()[0]
    except (OSError, subprocess.SubprocessError, IndexError):
        pass
    return {
        "device": name,
        "compute_capability": f"{props['major']}.{props['minor']}",
        "sm_count": int(props["multiProcessorCount"]),
        "driver": driver,
        "cuda": version(rt.runtimeGetVersion()),
        "cuda_driver_api": version(rt.driverGetVersion()),
        "cupy": cupy.__version__,
    }


class MappedBuffer:
    """Pinned host memory mapped into the device's address space: survives a kernel trap."""

    def __init__(self, nbytes: int):
        import cupy
        import numpy as np
        rt = cupy.cuda.runtime
        self.nbytes = nbytes
        self.host_ptr = rt.hostAlloc(nbytes, 0x01 | 0x02)  # cudaHostAllocPortable | Mapped
        ctypes.memset(self.host_ptr, 0, nbytes)
        get = getattr(rt, "hostGetDevicePointer", None)
        self.device_ptr = get(self.host_ptr, 0) if get else self.host_ptr  # UVA: the same
        raw = (ctypes.c_uint8 * nbytes).from_address(self.host_ptr)
        self.bytes = np.ctypeslib.as_array(raw)

    def view(self, dtype):
        return self.bytes.view(dtype)


def evict_l2() -> None:
    import cupy
    scratch = cupy.empty(L2_EVICT_BYTES // 4, dtype=cupy.uint32)
    scratch.fill(0x5A5A5A5A)
    cupy.cuda.Device(0).synchronize()
    del scratch


def cuda_error_name(exc: Exception) -> str:
    text = str(exc)
    for token in text.replace(":", " ").split():
        if token.startswith("cudaError"):
            return token
    return type(exc).__name__
