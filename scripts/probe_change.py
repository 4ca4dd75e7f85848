"""Where one control change of a panel spends its time, in every thread (issue 27's median): the
panel is built (fresh labkit result cache, as bench_widgets' first visit), then each change named
is made as bench_widgets makes it, while a sampler reads every Python thread's stack every few ms.
Prints per change: its wall time and the functions (file:line name) most often on a stack, as a
share of the samples of the threads that were busy (a function on the stack of two threads counts
twice); the panel's build too. ``PROBE_PERIOD_S`` sets the period (default 0.002). Prints; writes nothing.

    LABKIT_MODE=live python3 scripts/probe_change.py plans C=128 N=64 -- sweep dtype=fp32
"""

import collections
import os
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

#: a thread whose innermost frame is in one of these standard modules is waiting, not working
IDLE_FILES = (
    "threading.py",
    "queue.py",
    "selectors.py",
    "socket.py",
    "connection.py",
    "subprocess.py",
    "popen_fork.py",
)


class Sampler:
    """Every ``period`` seconds: each other thread's stack; ``counts`` counts frames (inclusive),
    ``leaves`` the innermost frame of each sample (where the time itself goes)."""

    def __init__(self, period: float = 0.005):
        self.period, self.samples, self.counts = period, 0, collections.Counter()
        self.leaves = collections.Counter()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="probe-sampler")

    def _run(self):
        me = threading.get_ident()
        while not self._stop.is_set():
            for ident, frame in sys._current_frames().items():
                if ident == me:
                    continue
                if (
                    Path(frame.f_code.co_filename).name in IDLE_FILES
                ):  # a thread waiting is not where the time goes
                    continue
                self.samples += 1
                self.leaves[
                    f"{Path(frame.f_code.co_filename).name}:{frame.f_code.co_firstlineno} {frame.f_code.co_name}"
                ] += 1
                seen = set()
                f = frame
                while f is not None:
                    key = f"{Path(f.f_code.co_filename).name}:{f.f_code.co_firstlineno} {f.f_code.co_name}"
                    if key not in seen:
                        seen.add(key)
                        self.counts[key] += 1
                    f = f.f_back
            time.sleep(self.period)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def _print_samples(s: Sampler, lines: int) -> None:
    for key, n in s.counts.most_common(lines):
        print(f"   {100 * n / max(1, s.samples):5.1f}%  {key}")
    print(
        "   innermost: "
        + "; ".join(f"{100 * n / max(1, s.samples):.1f}% {key}" for key, n in s.leaves.most_common(12))
    )


def parse(value: str):
    try:
        return int(value)
    except ValueError:
        return value


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    os.environ.setdefault("LABKIT_PREFETCH", "0")
    from labkit.present import widgets
    from labkit.session import lessons

    lessons.banner()
    groups, cur = [], []
    for a in argv + ["--"]:
        if a == "--":
            if cur:
                groups.append(cur)
            cur = []
        else:
            cur.append(a)
    period = float(os.environ.get("PROBE_PERIOD_S", "0.002"))
    sys.setswitchinterval(
        period / 4
    )  # the sampler gets the GIL within a period of a busy thread (default 5 ms)
    for name, *changes in groups:
        with Sampler(period) as s:
            t0 = time.perf_counter()
            p = widgets.panel(name)
            shown = (time.perf_counter() - t0) * 1000
            p.wait()
        print(
            f"== {name}: shown at {shown:.0f} ms, built in {(time.perf_counter() - t0) * 1000:.0f} ms, "
            f"{s.samples} busy samples",
            flush=True,
        )
        _print_samples(s, 25)
        for ch in changes:
            control, value = ch.split("=", 1)
            lessons.forget()
            with Sampler(period) as s:
                t = time.perf_counter()
                p.set(**{control: parse(value)})
                p.wait()
                ms = (time.perf_counter() - t) * 1000
            print(
                f"-- {name} {control}={value}: {ms:.0f} ms, {s.samples} busy samples; {p.status.value[-140:]}",
                flush=True,
            )
            _print_samples(s, 40)
            p.reset()
            p.wait()


if __name__ == "__main__":
    main()
