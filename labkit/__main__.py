"""``python -m labkit ...``: the command line (`labkit.cli.main`)."""

import sys

from .cli.main import main

if __name__ == "__main__":
    sys.exit(main())
