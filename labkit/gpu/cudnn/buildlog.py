"""cuDNN's own words about building a graph: the frontend's log (``CUDNN_FRONTEND_LOG_INFO``,
``CUDNN_FRONTEND_LOG_FILE``) and the backend's (``CUDNN_LOGLEVEL_DBG``, ``CUDNN_LOGDEST_DBG``).

Both libraries read those variables once, when they load, so the build runs in a fresh worker
process (`labkit.gpu.host.isolated`) started with them set and logging to files of its own; the
notebook's process is untouched. The build is a real one from nothing (no saved plan, no build
worker): the graph is planned as labkit plans it (heuristics A then FALLBACK, labkit's filters)
and every candidate plan is built.

`capture` returns both logs' lines; `labkit.experiments.build_log` turns them into rows, and
`engines` reads from the frontend log which engine configurations were proposed, which were
filtered out and why, and which built.
"""

from __future__ import annotations

import os
import re
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional

from ...signals.cancel import Budget
from ...spec import ConvSpec
from ..host import isolated

#: seconds a logged build may take (fused fp8 graphs compile for tens of seconds)
BUDGET_S = 180.0
#: the backend's log level: 1 errors, 2 errors and warnings, 3 everything (megabytes per build)
BACKEND_LEVEL = 2
#: lines kept per log (the head and the tail of a longer one, with a line saying how many were cut)
MAX_LINES = 2000


def build_step(spec_fields: dict, epilogue: str, workspace_cap: Optional[int]) -> Dict[str, object]:
    """In the logging worker: plan a graph and build every candidate plan.

    Args:
        spec_fields: the convolution, as `ConvSpec.to_dict` gives it.
        epilogue: the graph's epilogue.
        workspace_cap: the graph's workspace cap, in bytes; None for none.

    Returns:
        plans (the candidates), built, seconds, and why_not (index -> why a plan did not build).
    """
    from . import frontend  # heavy: CuPy, live only

    spec = ConvSpec.from_dict(spec_fields)
    t0 = time.perf_counter()
    g = frontend.planned_graph(spec, epilogue, workspace_cap)
    count = g.get_execution_plan_count()
    why_not = frontend.build_every_plan(g, Budget(BUDGET_S, f"building {spec.label}"))
    return dict(
        plans=count,
        built=count - len(why_not),
        seconds=time.perf_counter() - t0,
        why_not={int(k): str(v)[:200] for k, v in why_not.items()},
    )


def _lines(path: Path) -> List[str]:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return []
    lines = text.splitlines()
    if len(lines) > MAX_LINES:
        half = MAX_LINES // 2
        lines = lines[:half] + [f"... {len(lines) - MAX_LINES} lines cut ..."] + lines[-half:]
    return lines


def capture(
    spec: ConvSpec,
    epilogue: str = "none",
    *,
    workspace_cap: Optional[int] = None,
    backend_level: int = BACKEND_LEVEL,
) -> dict:
    """Build a convolution's graph in a fresh process with cuDNN's logs on.

    Args:
        spec: the convolution.
        epilogue: the graph's epilogue.
        workspace_cap: the graph's workspace cap, in bytes; None for none.
        backend_level: the backend's log level (`BACKEND_LEVEL`).

    Returns:
        ``frontend`` and ``backend`` (the logs' lines) and ``build`` (what `build_step` reported).
    """
    with tempfile.TemporaryDirectory(prefix="labkit-buildlog-") as tmp:
        fe, be = Path(tmp) / "frontend.log", Path(tmp) / "backend.log"
        env = {
            "CUDNN_FRONTEND_LOG_INFO": "1",
            "CUDNN_FRONTEND_LOG_FILE": str(fe),
            "CUDNN_LOGLEVEL_DBG": str(int(backend_level)),
            "CUDNN_LOGDEST_DBG": str(be),
        }
        w = isolated.Worker(daemon=True, env=env)
        try:
            build = w.call(
                f"{__name__}:build_step",
                (spec.to_dict(), epilogue, workspace_cap),
                BUDGET_S + 30,
                f"building {spec.label} with cuDNN's logs on",
            )
        finally:
            w.stop()
        return dict(frontend=_lines(fe), backend=_lines(be), build=build)


_ENGINE = re.compile(r"(eng\d+(?:_k\d+=\d+)*)")


def engine_in(line: str) -> str:
    """The first engine configuration a log line names.

    Args:
        line: a frontend log line.

    Returns:
        e.g. ``eng62_k2=5_k13=1``; "" when the line names none.
    """
    m = _ENGINE.search(line)
    return m.group(1) if m else ""


def engines(lines: List[str]) -> List[dict]:
    """The engine configurations the frontend log names, in order of first mention.

    Args:
        lines: the frontend log's lines.

    Returns:
        One dict per engine: engine, first_line, mentions (how many lines name it) and why_not (the
        first line saying it was filtered, failed or not supported; "" when none did).
    """
    seen: Dict[str, dict] = {}
    for no, line in enumerate(lines):
        for name in _ENGINE.findall(line):
            e = seen.setdefault(name, dict(engine=name, first_line=no, mentions=0, why_not=""))
            e["mentions"] += 1
            low = line.lower()
            if not e["why_not"] and any(
                w in low
                for w in ("filter", "not supported", "fail", "skip", "error", "deselect", "exceed", "blocked")
            ):
                e["why_not"] = line.strip()[:240]
    return list(seen.values())


def enabled_in_this_process() -> bool:
    """Whether cuDNN logging variables are set for the notebook's own process.

    Its own builds then log too: usually by accident, and slow.

    Returns:
        True when ``CUDNN_FRONTEND_LOG_INFO`` or ``CUDNN_LOGLEVEL_DBG`` is set.
    """
    return any(os.environ.get(k) for k in ("CUDNN_FRONTEND_LOG_INFO", "CUDNN_LOGLEVEL_DBG"))
