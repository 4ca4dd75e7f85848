"""A class on one GPU host: several learner processes moving controls at once, each on the GPU the
class hub's spread gives it (`labkit.gpu.host.spread`, as ``class/jupyterhub_config.py`` gives one to
each learner's server).

Each learner is a process of its own (a notebook kernel, as on JupyterHub) with
``CUDA_VISIBLE_DEVICES`` set to its GPU's UUID. For ``--seconds`` it picks a request of lesson 03's
precision panel at random (base convolution at N 16/32/64 in NHWC, N 32 in NCHW: every dtype timed
by CUDA-graph replay of its heuristic plan) and measures it again (``lessons.data(..., force=True)``:
lock, check, timing, save), as a learner moving the panel's controls does. All learners save into
one cache folder (the worst case for the cache: every writer on the same files). Every other
measurement of each request (the 1st, 3rd, ...) has its kernels traced with CUPTI (device records
only), for the overlap check; the timings compared with alone are the untraced ones, in the alone
run and the class run alike. Tracing moves the timings it watches: the smallest request (N=16
fp16, 13.9 us per call untraced on the H200, docs/findings.md) read 15.4-16.3 us
traced, with 10% between traced runs.

Measured per GPU, and written as one row per GPU to ``data/bench/classroom_<gpu slug>.csv``
(``--gpus 1``) or ``classroom_<gpu slug>_x<N>.csv`` (``--gpus N``: ``gpu_index``, ``gpu_uuid``,
``gpus`` and ``learners`` say which GPU and how many learners it was given):

* ``overlaps``: pairs of GPU turns of two processes on this GPU that overlap in time, from the
  lock's own log (``LABKIT_GPU_LOCK_LOG``); ``kernel_overlaps``: pairs of kernels of two processes
  on this GPU that ran at the same time, from CUPTI's timestamps (one clock for the machine) of the
  ``traced_measurements``;
* ``max_deviation`` / ``median_deviation``: each learner's median GPU time per (request, dtype)
  against the same measurement taken alone on the same GPU (one process, every request
  `ALONE_ROUNDS` times before the class run and `ALONE_ROUNDS` times after it, so that a drift of
  the GPU over the run, its clocks as it warms, falls on both sides); ``alone_noise``: the largest
  (max - min) / median of those alone rounds, the run-to-run spread of one process with the GPU to
  itself; ``alone_drift``: the largest change of an alone median from before the class run to
  after it;
* ``contended``: measurements marked as contended (another, non-labkit process used the GPU);
* ``lost_entries``: this GPU's learners' saved calls a fresh reader cannot read back;
  ``corrupted_entries``: files set aside in the class's one cache (the same in every GPU's row);
  ``crashes``: learners on this GPU that did not exit 0; ``wrong_gpu``: measurements whose lock
  was not the GPU the spread gave (the lock is named by the UUID CUDA reports);
* ``wait_shown_ms``: from asking for the GPU while another process holds it to the first
  "waiting for the GPU (n ahead)" announcement; ``takeover_s``: from ``kill -9`` of the holder to
  the waiter's turn (both on the first GPU only).

    python3 scripts/bench_classroom.py [--gpus 2] [--processes 8] [--seconds 120] [--out FILE]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

#: the per-GPU columns a run on several GPUs adds after ``gpu``
GPU_COLUMNS = ["gpu_index", "gpu_uuid", "gpus", "learners"]
COLUMNS = [
    "gpu",
    "date",
    "labkit_commit",
    "processes",
    "seconds",
    "measurements",
    "traced_measurements",
    "overlaps",
    "kernel_overlaps",
    "kernels_traced",
    "max_deviation",
    "median_deviation",
    "alone_noise",
    "alone_drift",
    "contended",
    "lost_entries",
    "corrupted_entries",
    "crashes",
    "wrong_gpu",
    "mean_wait_s",
    "wait_shown_ms",
    "takeover_s",
]


#: times each alone run (one before the class run, one after) measures every request (half of them traced)
ALONE_ROUNDS = 6


def requests():
    from labkit.session import lessons

    return [dict(spec=lessons.base(N=n)) for n in (16, 32, 64)] + [dict(spec=lessons.base(layout="NCHW"))]


# ---- one learner (a child process) -------------------------------------------------------------
def learner(ident: int, seconds: float, rounds: int, out: Path) -> None:
    from labkit import experiments
    from labkit.gpu.host import lock
    from labkit.gpu.timing import trace
    from labkit.session import lessons

    reqs = requests()
    rng = random.Random(ident)
    order = [kw for _ in range(rounds) for kw in reqs] if rounds else None
    deadline = time.monotonic() + seconds
    seen = {}
    gpu = lock.gpu_uuid()  # what the lock is named by: the GPU CUDA gives this process
    with trace.session(), open(out, "w") as f:
        i = 0
        while (order is not None and i < len(order)) or (order is None and time.monotonic() < deadline):
            kw = order[i] if order is not None else rng.choice(reqs)
            i += 1
            key = experiments.request_key(experiments.request_of("precision", **kw))
            seen[key] = seen.get(key, 0) + 1
            traced = seen[key] % 2 == 1  # this request's 1st, 3rd, ... measurement
            t0 = time.time()
            tracer = trace.Tracer(label=f"learner {ident}", api=False) if traced else contextlib.nullcontext()
            with tracer:
                df = lessons.data("precision", force=True, **kw)
            ok = df[df["status"] == "ok"]
            rows = tracer.rows if traced else []
            kernels = trace.merged_spans(
                (r["start_ns"], r["end_ns"]) for r in rows if r["kind"] in ("kernel", "memset", "memcpy")
            )
            turn = df.attrs.get("gpu_turn") or {}
            f.write(
                json.dumps(
                    dict(
                        learner=ident,
                        pid=os.getpid(),
                        gpu=gpu,
                        given=os.environ.get("CUDA_VISIBLE_DEVICES"),
                        t0=t0,
                        t1=time.time(),
                        request=key,
                        traced=traced,
                        gpu_us=dict(zip(ok["dtype"], map(float, ok["gpu_us"]))),
                        saved_in=df.attrs.get("saved_in"),
                        contended_by=turn.get("contended_by", []),
                        waited_s=turn.get("waited_s", 0.0),
                        kernels=kernels,
                        dropped=tracer.dropped if traced else 0,
                    )
                )
                + "\n"
            )
            f.flush()


def _run_learners(envs, seconds: float, rounds: int, work: Path, first: int = 0):
    """Start one learner process per environment in ``envs`` (learner ``first``, ``first + 1``,
    ...), wait for all; (their rows, how many did not exit 0 per GPU they were given)."""
    procs = []
    for i, env in enumerate(envs, start=first):
        out = work / f"learner{i}.jsonl"
        cmd = [
            sys.executable,
            __file__,
            "--learner",
            str(i),
            "--seconds",
            str(seconds),
            "--rounds",
            str(rounds),
        ]
        log = open(work / f"learner{i}.log", "w")
        procs.append(
            (
                subprocess.Popen([*cmd, "--jsonl", str(out)], env=env, stdout=log, stderr=subprocess.STDOUT),
                out,
                env,
            )
        )
    crashes: dict = {}
    rows = []
    for p, out, env in procs:
        p.wait()
        given = env.get("CUDA_VISIBLE_DEVICES")
        crashes[given] = crashes.get(given, 0) + (p.returncode != 0)
        if out.exists():
            rows += [json.loads(line) for line in out.read_text().splitlines() if line.strip()]
    return rows, crashes


def placements(processes: int, gpus, record: Path):
    """Each learner's GPU, as the class hub gives them (`labkit.gpu.host.spread.Spread.assign`): a list
    of (learner number, `labkit.gpu.host.spread.HostGPU`, the variables its process gets)."""
    from labkit.gpu.host import spread

    gpus = spread.as_gpus(gpus)
    s = spread.Spread(record, gpus=gpus)
    out = []
    for i in range(processes):
        gpu = s.assign(f"learner{i}")
        out.append((i, gpu, spread.environment(gpu, of=len(gpus))))
    return out


# ---- checks ------------------------------------------------------------------------------------
def lock_overlaps(log: Path, gpu=None) -> int:
    """Pairs of turns (acquire..release) of different processes that overlap (on GPU ``gpu``, a
    UUID, only; every GPU when None); -1 when there is no log."""
    if not log.exists():
        return -1
    open_at, spans = {}, []
    for line in log.read_text().splitlines():
        e = json.loads(line)
        if gpu is not None and e.get("gpu") != gpu:
            continue
        if e["event"] == "acquire":
            open_at[e["pid"]] = e["t"]
        elif e["event"] == "release" and e["pid"] in open_at:
            spans.append((open_at.pop(e["pid"]), e["t"], e["pid"]))
    return _cross_overlaps(spans)


def _cross_overlaps(spans) -> int:
    spans = sorted(spans)
    n, active = 0, []
    for s, e, who in spans:
        active = [a for a in active if a[1] > s]
        n += sum(1 for a in active if a[2] != who)
        active.append((s, e, who))
    return n


def _per_key(rows, *key) -> dict:
    """(row[k] for k in key) + (dtype,) -> the GPU times (us) of those rows."""
    out = {}
    for r in rows:
        for d, us in r["gpu_us"].items():
            out.setdefault(tuple(r[k] for k in key) + (d,), []).append(us)
    return out


def deviations(alone_rows, class_rows, worst: int = 5):
    """(max, median deviation, alone noise, the ``worst`` largest deviations as text lines): each
    learner's median per (request, dtype) against the alone median of the same, untraced
    measurements only."""
    alone_rows = [r for r in alone_rows if not r.get("traced")]
    class_rows = [r for r in class_rows if not r.get("traced")]
    alone = _per_key(alone_rows, "request")
    noise = max((max(v) - min(v)) / statistics.median(v) for v in alone.values()) if alone else float("nan")
    alone = {k: statistics.median(v) for k, v in alone.items()}
    devs = sorted(
        (
            (abs(statistics.median(v) / alone[(req, d)] - 1), lr, req, d, statistics.median(v), len(v))
            for (lr, req, d), v in _per_key(class_rows, "learner", "request").items()
            if (req, d) in alone
        ),
        reverse=True,
    )
    lines = [
        f"  {dev:6.2%}  learner {lr} {d} {req}: {m:.2f} us in class (median of {n}) "
        f"vs {alone[(req, d)]:.2f} us alone"
        for dev, lr, req, d, m, n in devs[:worst]
    ]
    just = [x[0] for x in devs]
    return (
        (just[0] if just else float("nan")),
        (statistics.median(just) if just else float("nan")),
        noise,
        lines,
    )


def drift(before_rows, after_rows) -> float:
    """The largest relative change of an alone median per (request, dtype) from before to after
    (untraced measurements)."""
    before = _per_key([r for r in before_rows if not r.get("traced")], "request")
    after = _per_key([r for r in after_rows if not r.get("traced")], "request")
    ch = [
        abs(statistics.median(after[k]) / statistics.median(v) - 1) for k, v in before.items() if k in after
    ]
    return max(ch) if ch else float("nan")


def cache_check(cache: Path, rows) -> tuple:
    """(lost, corrupted): saved calls a fresh reader cannot read; files set aside."""
    from labkit.store import localcache, machine

    store = localcache.LocalRecording(cache, machine.this_identity())
    lost = 0
    seen = {}
    for r in rows:
        if r.get("saved_in"):
            seen[r["request"]] = r
    for key in seen:
        if store.get("precision", json.loads(key)) is None:
            lost += 1
    aside = cache / "set-aside"
    return lost, (len(list(aside.iterdir())) if aside.is_dir() else 0)


def takeover() -> tuple:
    """(wait_shown_ms, takeover_s): another process holds this GPU's lock; this one asks, hears
    "waiting for the GPU", and gets its turn after the holder is killed with SIGKILL."""
    from labkit.gpu.host import lock
    from labkit.signals.progress import announcing

    folder = lock.lock_root() / lock.gpu_uuid()
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from labkit.gpu.host.lock import FileLock; "
            f"FileLock({str(folder)!r}).acquire(); print('held', flush=True); time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )
    assert holder.stdout.readline().strip() == "held"
    got = {}

    def ask():
        t0 = time.monotonic()

        def heard(phase):
            if phase.startswith("waiting for the GPU") and "shown" not in got:
                got["shown"] = time.monotonic() - t0

        with announcing(heard), lock.hold():
            got["turn"] = time.monotonic()

    t = threading.Thread(target=ask)
    t.start()
    time.sleep(1.0)
    killed = time.monotonic()
    os.kill(holder.pid, signal.SIGKILL)
    t.join(30)
    holder.wait()
    return got.get("shown", float("nan")) * 1000, got.get("turn", float("nan")) - killed


def run(processes: int, seconds: float, out: Path, *, gpus: int = 1) -> None:
    """The alone runs, the class run and the checks on the first ``gpus`` GPUs NVML lists; one row
    per GPU into ``out`` (see the module docstring)."""
    from labkit.cli.record import git_commit
    from labkit.gpu.host import spread

    host = spread.host_gpus()
    if len(host) < gpus:
        raise SystemExit(f"--gpus {gpus}: NVML sees {len(host)} GPU(s) on this host")
    used = host[:gpus]
    work = Path(tempfile.mkdtemp(prefix="labkit-classroom-"))
    log = work / "lock.jsonl"
    base_env = dict(
        os.environ,
        LABKIT_MODE="live",
        LABKIT_PREFETCH="0",
        LABKIT_BUILD_WORKERS="0",
        LABKIT_GPU_LOCK_LOG=str(log),
        PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    )
    base_env.pop("LABKIT_SHARED_CACHE", None)
    places = placements(processes, used, work / "gpus.json")
    for i, g, _ in places:
        print(f"learner {i}: GPU {g.index} ({g.uuid})", flush=True)

    def alone_run(when: str):
        rows, crashes = [], {}
        for g in used:
            print(
                f"alone ({when}) on GPU {g.index}: 1 process, every request {ALONE_ROUNDS} times ({work})",
                flush=True,
            )
            folder = work / f"alone-{when}-{g.index}"
            folder.mkdir()
            env = dict(base_env, LABKIT_CACHE=str(folder / "cache"), **spread.environment(g, of=len(used)))
            got, crashed = _run_learners([env], 0, ALONE_ROUNDS, folder)
            rows += got
            crashes[g.uuid] = crashes.get(g.uuid, 0) + crashed.get(g.uuid, 0)
        if log.exists():
            log.rename(work / f"lock-alone-{when}.jsonl")
        return rows, crashes

    before, before_crash = alone_run("before")
    print(f"class: {processes} processes on {len(used)} GPU(s) for {seconds:.0f} s", flush=True)
    (work / "class").mkdir()
    cache = work / "class-cache"
    envs = [dict(base_env, LABKIT_CACHE=str(cache), **env) for _, _, env in places]
    rows, crashes = _run_learners(envs, seconds, 0, work / "class")
    class_log = work / "lock-class.jsonl"
    if log.exists():
        log.rename(class_log)
    after, after_crash = alone_run("after")
    corrupted = cache_check(cache, [])[1]
    shown_ms, take_s = takeover()
    table, worst = [], {}
    for g in used:
        mine = [r for r in rows if r.get("given") == g.uuid]
        alone_before = [r for r in before if r.get("given") == g.uuid]
        alone_after = [r for r in after if r.get("given") == g.uuid]
        spans = [(st, en, r["pid"]) for r in mine for st, en in r["kernels"]]
        max_dev, med_dev, noise, worst[g.index] = deviations(alone_before + alone_after, mine)
        lost = cache_check(cache, mine)[0]
        table.append(
            dict(
                gpu=g.name,
                gpu_index=g.index,
                gpu_uuid=g.uuid,
                gpus=len(used),
                learners=sum(1 for _, x, _ in places if x == g),
                date=time.strftime("%Y-%m-%d"),
                labkit_commit=git_commit(),
                processes=processes,
                seconds=seconds,
                measurements=len(mine),
                traced_measurements=sum(1 for r in mine if r.get("traced")),
                overlaps=lock_overlaps(class_log, g.uuid),
                kernel_overlaps=_cross_overlaps(spans),
                kernels_traced=len(spans),
                max_deviation=round(max_dev, 4),
                median_deviation=round(med_dev, 4),
                alone_noise=round(noise, 4),
                alone_drift=round(drift(alone_before, alone_after), 4),
                contended=sum(1 for r in mine if r["contended_by"]),
                lost_entries=lost,
                corrupted_entries=corrupted,
                crashes=crashes.get(g.uuid, 0) + before_crash.get(g.uuid, 0) + after_crash.get(g.uuid, 0),
                wrong_gpu=sum(1 for r in mine if r.get("gpu") != g.uuid),
                mean_wait_s=round(statistics.mean(r["waited_s"] for r in mine), 3) if mine else None,
                wait_shown_ms=round(shown_ms, 1) if g == used[0] else None,
                takeover_s=round(take_s, 3) if g == used[0] else None,
            )
        )
    write_rows(table, out, several=len(used) > 1)
    for r in table:
        print(verdict(r))
    per = {}
    for r in rows:
        per.setdefault(r["learner"], []).append(r)
    for i, rs in sorted(per.items()):
        print(
            f"learner {i} (GPU {rs[0].get('given')}): {len(rs)} measurements, "
            f"waited {sum(r['waited_s'] for r in rs):.1f} s in all"
        )
    for index, lines in worst.items():
        print(f"largest deviations from alone on GPU {index}:\n" + "\n".join(lines))
    print(f"work folder: {work}")


def columns(several: bool):
    """The CSV's columns: `COLUMNS`, with `GPU_COLUMNS` after ``gpu`` for a run on several GPUs."""
    return [COLUMNS[0], *GPU_COLUMNS, *COLUMNS[1:]] if several else list(COLUMNS)


def write_rows(table, out: Path, *, several: bool) -> None:
    """Write ``table`` (one dict per GPU) to ``out``, replacing the rows of an earlier run of the
    same GPU model (and, for several GPUs, the same number of GPUs) and keeping the others."""
    import pandas as pd

    df = pd.DataFrame(table, columns=columns(several))
    if out.exists():
        old = pd.read_csv(out)
        same = old.gpu.isin(df.gpu) & (old.gpus.isin(df.gpus) if several and "gpus" in old else True)
        df = pd.concat([old[~same], df], ignore_index=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    df.to_csv(out, index=False)
    print(df.T.to_string(header=False))


def verdict(row: dict) -> str:
    """One line per GPU: the class's goals (no overlap, <= 5 % from alone, nothing lost) met or not."""
    ok = (
        row["overlaps"] == 0
        and row["kernel_overlaps"] == 0
        and row["max_deviation"] <= 0.05
        and row["lost_entries"] == 0
        and row["crashes"] == 0
        and row["wrong_gpu"] == 0
    )
    return (
        f"GPU {row.get('gpu_index', 0)}: {row.get('learners', row['processes'])} learners, "
        f"{row['measurements']} measurements, {row['overlaps']} overlapping turns, "
        f"{row['kernel_overlaps']} overlapping kernels, "
        f"max deviation from alone {row['max_deviation']:.1%} (alone noise {row['alone_noise']:.1%}), "
        f"{row['lost_entries']} lost entries, {row['crashes']} crashes, {row['wrong_gpu']} on another GPU: "
        + ("goals met" if ok else "GOALS NOT MET")
    )


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--gpus", type=int, default=1, help="use the first N GPUs NVML lists (default 1)")
    ap.add_argument("--processes", type=int, default=8, help="learner processes (default 8)")
    ap.add_argument("--seconds", type=float, default=120.0, help="length of the class run (default 120)")
    ap.add_argument(
        "--out",
        help="CSV (default data/bench/classroom_<gpu slug>.csv; --gpus N: classroom_<gpu slug>_x<N>.csv)",
    )
    ap.add_argument("--learner", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--rounds", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--jsonl", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.learner is not None:
        learner(a.learner, a.seconds, a.rounds, Path(a.jsonl))
        return 0
    if a.gpus < 1 or a.processes < 1:
        ap.error("--gpus and --processes must be at least 1")
    out = Path(a.out) if a.out else default_out(a.gpus)
    run(a.processes, a.seconds, out, gpus=a.gpus)
    return 0


def default_out(gpus: int) -> Path:
    """``data/bench/classroom_<gpu slug>.csv``; ``..._x<N>.csv`` for N GPUs."""
    from labkit import env

    slug = env.gpu_slug(env.environment().gpu_name)
    return ROOT / "data" / "bench" / f"classroom_{slug}{f'_x{gpus}' if gpus > 1 else ''}.csv"


if __name__ == "__main__":
    sys.exit(main())
