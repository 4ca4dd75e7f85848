"""Command line: ``python -m labkit doctor | record | bench``."""
from __future__ import annotations

import argparse
import sys


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m labkit", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("doctor", help="what this machine has, the mode and why, the recordings available")
    args, rest = parser.parse_known_args(argv)
    if args.command == "doctor":
        from .env import doctor

        print(doctor())
        return 0
    return 2


if __name__ == "__main__":
    sys.exit(main())
