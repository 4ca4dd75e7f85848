"""Who imports a module (GPU host: which call makes a panel pay for a heavy import): prints the
Python stack, each thread's, at the first import of each module named, while a lesson's first cell
and the panels named are built.

    python3 scripts/probe_who_imports.py cupyx.scipy.special scipy.sparse -- algorithms
"""

import sys
import threading
import traceback


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    cut = argv.index("--") if "--" in argv else len(argv)
    watch, panels = set(argv[:cut]), argv[cut + 1 :] or ["algorithms"]

    class Finder:
        def find_spec(self, name, path=None, target=None):
            if name in watch:
                watch.discard(name)
                print(f"---- {name} imported in thread {threading.current_thread().name}:", flush=True)
                frames = [f for f in traceback.format_stack()[:-1] if "<frozen" not in f]
                print("".join(frames[-40:]), flush=True)
            return None

    sys.meta_path.insert(0, Finder())
    from labkit import lessons, widgets

    lessons.banner()
    for name in panels:
        widgets.panel(name).wait()


if __name__ == "__main__":
    main()
