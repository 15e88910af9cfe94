"""The mean SM clock of a GPU while a block of Python code runs, for the benchmarks that time PyTorch
next to `dskc bench` (which reads the same NVML counter itself): on the H200 the clock drops from
1980 to ~1550 MHz once the board reaches its power limit (bench/NOTES.md v31), so a timing is only
comparable with the clock it ran at.

    with SmClock(device_index) as clk:
        ...timed work...
    clk.mhz  # mean of the samples, nan without NVML (no driver library, no such device)

The samples are taken by a forked helper process through NVML (ctypes, libnvidia-ml.so.1): no thread
in the timed process, so a Python-bound workload (eager PyTorch launching kernels) is not slowed by
it. `device_index` is NVML's index, which is CUDA's ordinal when CUDA_VISIBLE_DEVICES is unset.
"""
import ctypes
import math
import multiprocessing
import statistics

_NVML_CLOCK_SM = 1


def _sampler(conn, index, period_s):
    try:
        nv = ctypes.CDLL("libnvidia-ml.so.1")
        handle = ctypes.c_void_p()
        ok = nv.nvmlInit_v2() == 0 and nv.nvmlDeviceGetHandleByIndex_v2(index, ctypes.byref(handle)) == 0
    except OSError:
        ok = False
    conn.send(ok)
    if not ok:
        return
    clock = ctypes.c_uint()
    samples = []
    while not conn.poll(period_s):  # until the parent says stop
        if nv.nvmlDeviceGetClockInfo(handle, _NVML_CLOCK_SM, ctypes.byref(clock)) == 0:
            samples.append(clock.value)
    conn.recv()
    conn.send(samples)


def mean_or_nan(samples):
    return statistics.fmean(samples) if samples else math.nan


class SmClock:
    def __init__(self, device_index=0, period_ms=5):
        self.index, self.period_s = device_index, period_ms / 1000.0
        self.samples, self.mhz, self._proc = [], math.nan, None

    def __enter__(self):
        ctx = multiprocessing.get_context("fork")
        self._conn, child = ctx.Pipe()
        self._proc = ctx.Process(target=_sampler, args=(child, self.index, self.period_s), daemon=True)
        self._proc.start()
        if not self._conn.recv():  # NVML unavailable: the helper has exited
            self._proc.join()
            self._proc = None
        return self

    def __exit__(self, *exc):
        if self._proc is not None:
            self._conn.send("stop")
            self.samples = self._conn.recv()
            self._proc.join()
        self.mhz = mean_or_nan(self.samples)
        return False


if __name__ == "__main__":
    import time

    with SmClock() as c:
        time.sleep(0.05)
    print(f"SM clock over 50 ms: {c.mhz:.0f} MHz ({len(c.samples)} samples)")
