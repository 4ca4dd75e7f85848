"""One PyTorch knob setting, measured in a fresh process: ``python torch_child.py '<json config>'``.

Run by `labkit.experiments.pytorch_knobs.runs` as a subprocess, with the setting's environment
variables set before torch starts (cuDNN reads them once, at its first use). It imports nothing
of labkit: what it measures is PyTorch alone. It prints one line, `MARKER` followed by the
results as JSON (`runs.parse_child` reads it).

What it measures, for a convolution (``F.conv2d``) or a network's forward pass (inference mode):
the first call's host time (cuDNN's set-up and any benchmarking included), the median time per call
after warm-up (CUDA events around each call, no CUDA graph), the peak memory above the inputs
(the caching allocator's ``max_memory_allocated``) during the first call and during the steady
calls, what the allocator keeps reserved, whether two calls give identical bits, the error against
float64 and the kernels one call launches (``torch.profiler``).
"""

import contextlib
import json
import statistics
import sys
import time

#: the line the parent reads
MARKER = "LABKIT_TORCH_KNOBS "


def _quantile(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def _flags(torch, flags):
    """Set torch.backends.cudnn's flags; return what they read back as."""
    cudnn = torch.backends.cudnn
    for name, value in flags.items():
        setattr(cudnn, name, value)
    return {
        "benchmark": bool(cudnn.benchmark),
        "benchmark_limit": int(getattr(cudnn, "benchmark_limit", -1)),
        "deterministic": bool(cudnn.deterministic),
        "allow_tf32": bool(cudnn.allow_tf32),
    }


def _call(torch, cfg):
    """The measured call, its half-batch twin (None for a network) and the float64 reference."""
    import torch.nn.functional as F  # heavy: torch, imported by the child only

    dt = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[cfg["dtype"]]
    fmt = torch.channels_last if cfg["channels_last"] else torch.contiguous_format
    ac = cfg.get("autocast")
    cast = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(ac)
    g = torch.Generator(device="cuda").manual_seed(0)
    conv = cfg.get("conv")

    def ctx():
        if cast is None:
            return contextlib.nullcontext()
        return torch.autocast("cuda", dtype=cast)

    if cfg.get("net"):
        import torchvision  # heavy: torchvision, for a network only

        torch.manual_seed(0)
        model = getattr(torchvision.models, cfg["net"])(weights=None).to("cuda", dt).eval()
        model = model.to(memory_format=fmt)
        x = torch.randn((cfg["batch"], 3, 224, 224), device="cuda", dtype=dt, generator=g).to(
            memory_format=fmt
        )

        def run(inp=x):
            with torch.inference_mode(), ctx():
                return model(inp)

        return run, None, None

    n, c, h, w = conv["x_shape"]
    x = torch.randn((n, c, h, w), device="cuda", dtype=dt, generator=g).to(memory_format=fmt)
    x2 = torch.randn((max(1, n // 2), c, h, w), device="cuda", dtype=dt, generator=g).to(memory_format=fmt)
    wt = torch.randn(conv["w_shape"], device="cuda", dtype=dt, generator=g)
    wt = (wt / (conv["w_shape"][1] * conv["w_shape"][2] * conv["w_shape"][3]) ** 0.5).to(memory_format=fmt)
    args = dict(
        stride=conv["stride"], padding=conv["padding"], dilation=conv["dilation"], groups=conv["groups"]
    )

    def run(inp=x):
        with torch.inference_mode(), ctx():
            return F.conv2d(inp, wt, None, **args)

    def reference():
        with torch.backends.cudnn.flags(enabled=False), torch.inference_mode():
            return F.conv2d(x.double(), wt.double(), None, **args)

    return run, (lambda: run(x2)), reference


def kernels(torch, run) -> list:
    """The kernels (and memsets) one PyTorch call launches, in launch order, from ``torch.profiler``.

    The call runs once unprofiled, then once profiled. `labkit.cli.vs_torch` reads PyTorch's kernels
    with it too.

    Args:
        torch: the imported ``torch`` module.
        run: the call, with no arguments.

    Returns:
        The kernels' names, as the profiler gives them (a list of str).
    """
    from torch.profiler import ProfilerActivity, profile  # heavy: torch's profiler, after the timing

    run()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        run()
        torch.cuda.synchronize()
    events = [e for e in prof.events() if getattr(e.device_type, "name", "") == "CUDA"]
    events.sort(key=lambda e: e.time_range.start)
    return [e.name for e in events]


def measure(cfg):
    """Every figure of one setting (the module doc says which).

    Args:
        cfg: the setting, as the parent sends it (its flags, the convolution or network, calls).

    Returns:
        Name -> value: times in milliseconds (``_ms``) or microseconds (``_us``), memory in bytes
        (``_bytes``), the kernels' names, ``status`` and ``reason``.
    """
    t_import = time.perf_counter()
    import torch  # heavy: torch, its import timed here

    out = {"torch": torch.__version__, "import_s": time.perf_counter() - t_import}
    out["flags"] = _flags(torch, cfg.get("flags", {}))
    out["cudnn"] = torch.backends.cudnn.version()
    out["gpu"] = torch.cuda.get_device_name()
    run, half, reference = _call(torch, cfg)
    torch.cuda.synchronize()
    base, base_reserved = torch.cuda.memory_allocated(), torch.cuda.memory_reserved()
    torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    y = run()
    torch.cuda.synchronize()
    out["first_call_ms"] = (time.perf_counter() - t0) * 1e3
    out["first_peak_bytes"] = torch.cuda.max_memory_allocated() - base
    out["out_bytes"] = y.numel() * y.element_size()
    out["out_dtype"] = str(y.dtype).replace("torch.", "")
    first = y.detach().clone()
    del y
    for _ in range(cfg["warmup"]):
        run()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    pairs = [
        (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
        for _ in range(cfg["calls"])
    ]
    for a, b in pairs:
        a.record()
        run()
        b.record()
    torch.cuda.synchronize()
    us = [a.elapsed_time(b) * 1e3 for a, b in pairs]
    out["steady_peak_bytes"] = torch.cuda.max_memory_allocated() - before
    out["gpu_us"], out["gpu_us_p10"], out["gpu_us_p90"] = (
        statistics.median(us),
        _quantile(us, 0.1),
        _quantile(us, 0.9),
    )
    out["calls"] = len(us)
    out["reserved_bytes"] = torch.cuda.memory_reserved() - base_reserved
    stats = torch.cuda.memory_stats()
    out["alloc_retries"] = int(stats.get("num_alloc_retries", 0))
    out["repeatable"] = bool(torch.equal(run(), first))
    if half is not None:  # two shapes in turn: what the plan cache holds decides this one
        for _ in range(2):
            run(), half()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(cfg["alternations"]):
            run(), half()
        torch.cuda.synchronize()
        out["alternating_us"] = (time.perf_counter() - t0) * 1e6 / (2 * cfg["alternations"])
    if cfg.get("profile"):
        out["kernels"] = kernels(torch, run)
    if reference is not None:
        ref = reference()
        err = (first.double() - ref).abs().max() / ref.abs().max()
        out["max_rel_error"] = float(err)
    return out


def main(argv):
    """Measure the setting given as JSON in ``argv[1]``; print `MARKER` and the results.

    Args:
        argv: the command line (``sys.argv``).
    """
    cfg = json.loads(argv[1])
    print(MARKER + json.dumps(measure(cfg)), flush=True)


if __name__ == "__main__":
    main(sys.argv)
