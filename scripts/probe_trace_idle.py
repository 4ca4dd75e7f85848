"""Why a traced strategy pass shows more idle GPU time than the same pass untraced (issue 26's
idle-share goal): the pass of `labkit.gpu.workloads.traced_pass` under several tracer settings,
each against the untraced pass of the same run. Per setting: the host's wall time per pass (what
CUPTI adds to the launching thread), the traced idle share, and the untraced idle share (1 -
traced kernel busy time / untraced GPU time between two events).

    python3 scripts/probe_trace_idle.py [--calls 8] [--passes 5]

Settings: ``device`` (kernels, memsets, memcpys: one pass), ``device, 2nd pass`` (two passes in one
trace, the second read: the first pays CUPTI's per-kernel set-up), ``api`` (every runtime and
driver call recorded, as the timeline lesson does), ``api, 2nd pass``; ``..., keep_from_now``: the
same two passes, the first dropped by `labkit.gpu.trace.Tracer.keep_from_now`.
"""

import argparse
import statistics
import time


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=8)
    ap.add_argument("--passes", type=int, default=5)
    ap.add_argument("--strategies", default="fixed_arena,malloc_per_call")
    ap.add_argument("--no-warm", action="store_true", help="no trace.warm() first (as bench_under_the_hood)")
    args = ap.parse_args(argv)

    import cupy

    from labkit.gpu import engine, trace, workloads, workspace
    from labkit.gpu.runner import Runner

    opts = dict(workloads.BENCH_STRATEGIES)
    seq = workloads.sequence("one_conv", 1)
    seq = (seq * args.calls)[: args.calls]
    if not args.no_warm:
        trace.warm()
    for name in args.strategies.split(","):
        runner = Runner(workspace.make(name, **opts.get(name, {})), fallback=True)
        stream = runner.stream
        for spec in dict.fromkeys(seq):
            engine.get_graph(spec)
            runner.operands(spec)

        def one_pass():
            for spec in seq:
                runner.run(spec)

        one_pass()
        stream.synchronize()
        gpu, host = [], []
        for _ in range(args.passes):
            a, b = cupy.cuda.Event(), cupy.cuda.Event()
            a.record(stream)
            t0 = time.perf_counter()
            one_pass()
            host.append((time.perf_counter() - t0) * 1e6)
            b.record(stream)
            b.synchronize()
            gpu.append(cupy.cuda.get_elapsed_time(a, b) * 1e3)
        gpu_us, host_us = statistics.median(gpu), statistics.median(host)
        print(
            f"\n== {name}, {len(seq)} calls: untraced GPU {gpu_us:.0f} us between events, host {host_us:.0f} us",
            flush=True,
        )
        for label, api, passes in (
            ("device", False, 1),
            ("device, 2nd pass", False, 2),
            ("api", True, 1),
            ("api, 2nd pass", True, 2),
            ("device, keep_from_now", False, -2),
            ("api, keep_from_now", True, -2),
        ):
            shares, hosts, busys = [], [], []
            for _ in range(args.passes):
                with trace.Tracer(label, api=api) as t:
                    for i in range(abs(passes)):
                        t0 = time.perf_counter()
                        one_pass()
                        h = (time.perf_counter() - t0) * 1e6
                        stream.synchronize()
                        if passes < 0 and i == 0:
                            t.keep_from_now()
                df = t.frame()
                dev = trace.device_rows(df)
                per = len(dev) // max(1, passes)
                last = dev.iloc[per * (passes - 1) :] if passes > 0 else dev
                shares.append(trace.idle_share(last))
                busys.append(trace.busy_us(last))
                hosts.append(h)
            busy = statistics.median(busys)
            print(
                f"   {label:18s} idle {statistics.median(shares):.3f} (untraced {1 - busy / gpu_us:.3f}); "
                f"host {statistics.median(hosts):.0f} us per pass; busy {busy:.0f} us; "
                f"{per} device records per pass",
                flush=True,
            )
        runner.close()


if __name__ == "__main__":
    main()
