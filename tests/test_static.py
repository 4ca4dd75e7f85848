"""Names that do not exist, found without running the code (pyflakes): labkit's GPU modules
import CuPy, so on a machine without a GPU their tests are skipped and a broken line in them
would go unseen until a GPU run (it happened: a stray line in gpu/engine.py)."""

from pathlib import Path

from pyflakes import api, messages, reporter

ROOT = Path(__file__).resolve().parents[1]
#: what pyflakes reports that would fail when the line runs (unused imports are re-exports here)
FATAL = (messages.UndefinedName, messages.UndefinedExport, messages.UndefinedLocal)


class _Collect(reporter.Reporter):
    def __init__(self):
        self.found = []

    def flake(self, message):
        if isinstance(message, FATAL):
            self.found.append(
                f"{Path(message.filename).relative_to(ROOT)}:{message.lineno}: "
                f"{message.message % message.message_args}"
            )

    def syntaxError(self, filename, msg, lineno, offset, text):
        self.found.append(f"{filename}:{lineno}: {msg}")

    def unexpectedError(self, filename, msg):
        self.found.append(f"{filename}: {msg}")


def test_labkit_and_the_scripts_use_no_undefined_name():
    seen = _Collect()
    for folder in ("labkit", "scripts", "tests"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            api.checkPath(str(path), seen)
    assert not seen.found, "\n".join(seen.found)
