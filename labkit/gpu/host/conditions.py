"""The conditions a measurement was taken under: the GPU's SM and memory clocks, power, temperature
and why its clocks were held down, from NVML (``nvidia-ml-py``, imported as ``pynvml``).

`sample` reads them once; `Watch` samples before, every `EVERY_S` during and after a
measurement and keeps what describes it (`summary`: the highest clocks reached, since an idle GPU
parks its clocks low between measurements; the highest power and temperature; every throttle
reason seen), so a result taken while the GPU was throttling says so
(`labkit.draw.plots.conditions_text` writes it in every chart's provenance line). Without NVML (no
package, no driver, a GPU it cannot see) every call answers None: conditions are information,
never a reason to fail.
"""

from __future__ import annotations

import functools
import threading
from typing import Optional

#: NVML "clocks event reasons" that mean the GPU ran slower than it could (bit -> words). Idle,
#: application clocks set by an administrator and display clocks are not throttling.
THROTTLE_REASONS = {
    0x4: "software power cap",
    0x8: "hardware slowdown",
    0x20: "software thermal slowdown",
    0x40: "hardware thermal slowdown",
    0x80: "power brake",
}
_LOCK = threading.Lock()
#: seconds between samples while a measurement runs
EVERY_S = 0.25


@functools.lru_cache(maxsize=1)
def _nvml():
    try:
        import pynvml  # heavy: NVML, an optional extra
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except Exception:  # noqa: BLE001  (no driver, no permission)
        return None
    return pynvml


#: (NVML module, PCI bus id) -> its NVML handle: the lookup takes about a millisecond, and the
#: network report's worker asks at every step's end (`labkit.gpu.host.contention`)
_HANDLES: dict = {}


def _handle(n):
    """The NVML handle of the GPU CUDA calls device 0 here (by PCI bus id, not index: NVML and
    CUDA may number GPUs differently), looked up once per bus id."""
    try:
        import cupy  # heavy: CuPy, live only

        key = (id(n), cupy.cuda.Device().pci_bus_id)
        if key not in _HANDLES:
            _HANDLES[key] = n.nvmlDeviceGetHandleByPciBusId(key[1])
        return _HANDLES[key]
    except Exception:  # noqa: BLE001
        return n.nvmlDeviceGetHandleByIndex(0)


def sample() -> Optional[dict]:
    """The GPU's conditions now, from NVML.

    Returns:
        ``sm_clock_mhz``, ``sm_clock_max_mhz``, ``mem_clock_mhz``, ``power_w``, ``power_limit_w``,
        ``temperature_c`` and ``throttle`` (the reasons, in words; empty when none); None when NVML
        cannot answer.
    """
    n = _nvml()
    if n is None:
        return None
    with _LOCK:
        try:
            h = _handle(n)
            reasons = 0
            getter = (
                getattr(n, "nvmlDeviceGetCurrentClocksEventReasons", None)
                or n.nvmlDeviceGetCurrentClocksThrottleReasons
            )
            try:
                reasons = int(getter(h))
            except Exception:  # noqa: BLE001
                pass
            return dict(
                sm_clock_mhz=int(n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_SM)),
                sm_clock_max_mhz=int(n.nvmlDeviceGetMaxClockInfo(h, n.NVML_CLOCK_SM)),
                mem_clock_mhz=int(n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_MEM)),
                power_w=round(n.nvmlDeviceGetPowerUsage(h) / 1000.0, 1),
                power_limit_w=round(n.nvmlDeviceGetEnforcedPowerLimit(h) / 1000.0, 1),
                temperature_c=int(n.nvmlDeviceGetTemperature(h, n.NVML_TEMPERATURE_GPU)),
                throttle=[w for bit, w in THROTTLE_REASONS.items() if reasons & bit],
            )
        except Exception:  # noqa: BLE001
            return None


def summary(*samples: Optional[dict]) -> Optional[dict]:
    """Several samples (or summaries) as one.

    Args:
        *samples: `sample` dicts or earlier summaries; None ones are skipped.

    Returns:
        The highest SM and memory clocks, power and temperature, every throttle reason seen, and
        ``samples`` (how many); None when none is a sample.
    """
    got = [s for s in samples if s]
    if not got:
        return None
    out = dict(got[0])
    out["samples"] = sum(int(s.get("samples", 1)) for s in got)
    for s in got[1:]:
        for k in ("sm_clock_mhz", "mem_clock_mhz", "power_w", "temperature_c"):
            out[k] = max(out[k], s[k])
        out["throttle"] = sorted(set(out["throttle"]) | set(s["throttle"]))
    return out


class Watch:
    """A context manager that samples the GPU's conditions on entry, every ``every_s`` and on exit.

    The samples are taken in a background thread; ``result`` is their `summary`. Without NVML it
    samples nothing and ``result`` is None.

    Args:
        every_s: seconds between samples.
    """

    def __init__(self, every_s: float = EVERY_S):
        self.every_s = every_s
        self.result: Optional[dict] = None
        self._samples: list = []
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            self._samples.append(sample())

    def __enter__(self):
        first = sample()
        if first is not None:
            self._samples.append(first)
            self._thread = threading.Thread(target=self._run, name="labkit-conditions", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc):
        if self._thread is not None:
            self._stop.set()
            self._thread.join(1.0)
            self._samples.append(sample())
        self.result = summary(*self._samples)
        return False
