"""The NVML handle of this process's GPU (`labkit.gpu.host.conditions._handle`): looked up by PCI bus
id once, not at every step's end; by index when the bus id cannot be had or found. No GPU needed:
NVML and CuPy's device are stand-ins that count the lookups."""

from __future__ import annotations

import sys
import types

from labkit.gpu.host import conditions


class _NVML:
    def __init__(self, fail: bool = False):
        self.lookups, self.fail = [], fail

    def nvmlDeviceGetHandleByPciBusId(self, bus):
        self.lookups.append(bus)
        if self.fail:
            raise RuntimeError("NVML_ERROR_NOT_FOUND")
        return f"handle of {bus}"

    def nvmlDeviceGetHandleByIndex(self, index):
        return f"handle {index}"


def _cupy_on(monkeypatch, bus: str) -> None:
    device = types.SimpleNamespace(pci_bus_id=bus)
    fake = types.SimpleNamespace(cuda=types.SimpleNamespace(Device=lambda: device))
    monkeypatch.setitem(sys.modules, "cupy", fake)


def test_the_handle_is_looked_up_once_per_bus_id(monkeypatch):
    monkeypatch.setattr(conditions, "_HANDLES", {})
    n = _NVML()
    _cupy_on(monkeypatch, "0000:19:00.0")
    assert [conditions._handle(n) for _ in range(3)] == ["handle of 0000:19:00.0"] * 3
    _cupy_on(monkeypatch, "0000:3b:00.0")
    assert conditions._handle(n) == "handle of 0000:3b:00.0"
    assert n.lookups == ["0000:19:00.0", "0000:3b:00.0"]


def test_a_bus_id_nvml_cannot_find_falls_back_to_the_first_gpu_and_is_asked_again(monkeypatch):
    monkeypatch.setattr(conditions, "_HANDLES", {})
    n = _NVML(fail=True)
    _cupy_on(monkeypatch, "0000:19:00.0")
    assert conditions._handle(n) == conditions._handle(n) == "handle 0"
    assert len(n.lookups) == 2
