"""Does a cuDNN graph build in another thread block the main thread (the GIL)? The main thread
ticks every 5 ms while a thread builds every plan of a few new graphs; prints the longest gap
between ticks (5 ms: the build releases the GIL; about the build time: it holds it). Informs
how long a click can wait behind a prefetch job (labkit.session.prefetch). GPU only."""

import threading
import time

from labkit import experiments
from labkit.gpu import engine

specs = [experiments.BASE.replace(N=n, C=c, K=c) for n, c in ((3, 40), (5, 72), (7, 24))]
done = threading.Event()
build_s = []


def build():
    for s in specs:
        t = time.perf_counter()
        engine.get_graph(s)
        build_s.append(time.perf_counter() - t)
    done.set()


ticks = []
th = threading.Thread(target=build)
th.start()
while not done.is_set():
    ticks.append(time.perf_counter())
    time.sleep(0.005)
th.join()
gaps = sorted(b - a for a, b in zip(ticks, ticks[1:]))
print(
    f"builds: {', '.join(f'{s:.2f} s' for s in build_s)}; main-thread ticks: {len(ticks)}, "
    f"longest gap {gaps[-1] * 1000:.0f} ms, median {gaps[len(gaps) // 2] * 1000:.1f} ms"
)
