"""A process that takes a GPU lock folder's turn (`labkit.gpu.host.lock.FileLock`), for the lock tests:

    python tests/lock_holder.py FOLDER HOLD_S LOG NAME

appends ``NAME acquired <time>`` to LOG, prints ``held``, holds HOLD_S seconds, appends
``NAME released <time>`` and exits. No GPU."""

import sys
import time

from labkit.gpu.host.lock import FileLock


def main():
    folder, hold_s, log, name = sys.argv[1], float(sys.argv[2]), sys.argv[3], sys.argv[4]
    lock = FileLock(folder)
    lock.acquire()
    with open(log, "a") as f:
        f.write(f"{name} acquired {time.time():.6f}\n")
    print("held", flush=True)
    time.sleep(hold_s)
    with open(log, "a") as f:
        f.write(f"{name} released {time.time():.6f}\n")
    lock.release()


if __name__ == "__main__":
    main()
