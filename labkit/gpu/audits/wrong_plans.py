"""Plans cuDNN gets wrong: their smallest reproductions, re-checked on this GPU, and the search.

``docs/wrong-plans.md`` holds one table row per wrong plan: its name, the smallest convolution
found where it computes a wrong result, the relative error against float64, and the GPU, cuDNN
and frontend it was seen on (`Reproduction`; `read_table` parses the rows, `table_row` writes
one). `recheck` runs each row's plan again on this GPU (``python -m labkit wrong-plans``), so the
file can be reported upstream and checked again on the next cuDNN. `sweep` checks every plan of
seeded random convolutions, also at batch 1 (does a check on small operands see the same?), and
`shrink` makes a failing convolution as small as it stays failing (``--sweep``).

labkit needs none of this to stay right: every plan is checked before it is used
(`labkit.gpu.cudnn.checked_plans`). This is what a maintainer reports. Parsing works without a GPU.
"""

from __future__ import annotations

import math
import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, List, Optional, Tuple

from ...errors import InvalidSpec, LabkitError
from ...spec import DIRECTIONS, DTYPES, LAYOUTS, ConvSpec
from ..checks import plan_checks
from ..checks.plan_checks import Verdict

#: the file, in a checkout of the repository
DOC = Path(__file__).resolve().parents[3] / "docs" / "wrong-plans.md"
#: the heading the table sits under, and its columns
TABLE_HEADING = "## Reproductions"
COLUMNS = ("plan", "convolution", "relative error", "GPU", "cuDNN", "frontend", "also wrong at")


@dataclass(frozen=True)
class Reproduction:
    """One row of the table of wrong plans.

    Attributes:
        plan: cuDNN's plan name.
        spec: the smallest convolution found where it is wrong.
        rel_error: the relative error seen there (inf: NaN or inf in the output).
        gpu: the GPU it was seen on.
        cudnn: the cuDNN version.
        frontend: the cuDNN frontend version.
        larger: a larger convolution where the same plan was wrong too; None if none is kept.
    """

    plan: str
    spec: ConvSpec
    rel_error: float
    gpu: str
    cudnn: str
    frontend: str
    larger: Optional[ConvSpec] = None


def _cells(line: str) -> List[str]:
    return [c.strip().strip("`").strip() for c in line.strip().strip("|").split("|")]


def read_table(text: str) -> List[Reproduction]:
    """The rows of the table under `TABLE_HEADING`.

    Args:
        text: the doc's markdown.

    Returns:
        One `Reproduction` per row; `InvalidSpec` naming the line for a table that is missing, has
        other columns, or a row that does not parse.
    """
    lines = text.splitlines()
    try:
        start = next(i for i, line in enumerate(lines) if line.strip() == TABLE_HEADING)
    except StopIteration:
        raise InvalidSpec("wrong-plans doc", TABLE_HEADING, "the heading of the table is missing") from None
    rows = [(i + 1, line) for i, line in enumerate(lines[start + 1 :], start + 1) if line.startswith("|")]
    if len(rows) < 2 or tuple(_cells(rows[0][1])) != COLUMNS:
        raise InvalidSpec(
            "wrong-plans doc", rows[0][1] if rows else "", f"the table's columns must be {COLUMNS}"
        )
    out = []
    for number, line in rows[2:]:
        cells = _cells(line)
        if len(cells) != len(COLUMNS):
            raise InvalidSpec(f"wrong-plans doc line {number}", line, f"needs {len(COLUMNS)} cells")
        plan, label, error, gpu, cudnn, frontend, larger = cells
        try:
            spec = ConvSpec.from_label(label)
            rel = math.inf if error.lower().startswith("inf") else float(error)
            bigger = None if larger in ("", "-") else ConvSpec.from_label(larger)
        except (InvalidSpec, ValueError) as exc:
            raise InvalidSpec(f"wrong-plans doc line {number}", line, str(exc)) from None
        if not plan or not gpu or not cudnn or not frontend:
            raise InvalidSpec(f"wrong-plans doc line {number}", line, "every cell must be filled")
        out.append(Reproduction(plan, spec, rel, gpu, cudnn, frontend, bigger))
    return out


def table_row(rep: Reproduction) -> str:
    """One markdown row of the table, as `read_table` reads it back.

    Args:
        rep: the reproduction.

    Returns:
        The row, ``| ... |``.
    """
    error = "inf" if not math.isfinite(rep.rel_error) else f"{rep.rel_error:.3g}"
    larger = f"`{rep.larger.label}`" if rep.larger is not None else "-"
    cells = (f"`{rep.plan}`", f"`{rep.spec.label}`", error, rep.gpu, rep.cudnn, rep.frontend, larger)
    return "| " + " | ".join(cells) + " |"


def size(spec: ConvSpec) -> int:
    """Elements of the image, filter and output together: what `shrink` makes small.

    Args:
        spec: the convolution.

    Returns:
        The element count.
    """
    return sum(math.prod(s) for s in (spec.x_shape, spec.w_shape, spec.y_shape))


def smaller(spec: ConvSpec) -> Iterator[ConvSpec]:
    """Valid specs one step smaller than a convolution (`size`), the biggest cuts first.

    Args:
        spec: the convolution.

    Returns:
        An iterator of distinct `ConvSpec` s no larger than ``spec``.
    """
    changes = [dict(N=1), dict(groups=1, C=spec.C // spec.groups, K=spec.K // spec.groups)]
    changes += [dict(N=spec.N // 2), dict(C=spec.C // 2), dict(K=spec.K // 2)]
    changes += [dict(H=spec.H // 2), dict(W=spec.W // 2), dict(R=1), dict(S=1), dict(R=1, S=1)]
    changes += [
        dict(H=spec.H - 1),
        dict(W=spec.W - 1),
        dict(C=spec.C - spec.groups),
        dict(K=spec.K - spec.groups),
    ]
    changes += [dict(stride=1), dict(padding=0), dict(dilation=1), dict(groups=1)]
    seen = set()
    for change in changes:
        try:
            s = spec.replace(**change)
        except InvalidSpec:
            continue
        if s != spec and s.key not in seen and size(s) <= size(spec):
            seen.add(s.key)
            yield s


def random_spec(rng: random.Random, **fixed) -> ConvSpec:
    """A seeded random valid convolution.

    Every dtype, layout and direction may come, with groups (depthwise too), dilation, strides,
    padding and odd sizes up to 40x40 pixels and 64 channels.

    Args:
        rng: the random generator.
        **fixed: fields that keep the given value.

    Returns:
        The `ConvSpec`.
    """
    while True:
        g = rng.choice([1, 1, 1, 2, 4, 0])  # 0: depthwise
        cg = rng.choice([1, 2, 3, 4, 8, 16, 17, 32])
        groups = cg if g == 0 else g
        C = groups * (1 if g == 0 else cg)
        K = groups * rng.choice([1, 2, 4, 8, 16, 24]) if g != 0 else C * rng.choice([1, 1, 2])
        R, S = rng.choice([(1, 1), (3, 3), (3, 3), (5, 5), (7, 7), (1, 7), (3, 1)])
        d = rng.choice([1, 1, 1, 2])
        fields = dict(
            N=rng.choice([1, 1, 2, 3, 4, 8, 16, 32]),
            C=C,
            H=rng.randint(1, 40),
            W=rng.randint(1, 40),
            K=K,
            R=R,
            S=S,
            stride=(rng.choice([1, 1, 2, 3]), rng.choice([1, 1, 2])),
            padding=(rng.randint(0, d * (R - 1)), rng.randint(0, d * (S - 1))),
            dilation=d,
            groups=groups,
            dtype=rng.choice(DTYPES),
            layout=rng.choice(LAYOUTS),
            direction=rng.choice(DIRECTIONS),
        )
        fields.update(fixed)
        try:
            return ConvSpec(**fields)
        except InvalidSpec:
            continue


# ---- on the GPU ---------------------------------------------------------------------------------
def check_named(spec: ConvSpec, plan: str, *, seed: int = 0) -> Optional[plan_checks.Verdict]:
    """Run one named plan of a convolution once against float64, whatever labkit knows of it.

    Args:
        spec: the convolution.
        plan: cuDNN's plan name.
        seed: the inputs' seed.

    Returns:
        The `Verdict`; None when cuDNN does not offer that plan for ``spec`` or does not build it.
    """
    from ..cudnn import conv_graph, operands, reference_runs  # heavy: CuPy, live only

    try:
        cg = conv_graph.ConvGraph(spec, all_plans=False, parallel=False)
    except LabkitError:
        return None
    index = next((p.index for p in cg.plans if p.name == plan), None)
    if index is None or not cg.build_plan(index).built:
        return None
    return reference_runs.judge(cg, [index], ops=operands.Operands(spec, seed=seed))[0]


def state_of(verdict: Optional[plan_checks.Verdict]) -> str:
    """What a re-check found: ``"still wrong"``, ``"right now"`` or ``"not offered"``.

    Args:
        verdict: the re-check's verdict; None when cuDNN no longer lists the plan.

    Returns:
        One of the three words.
    """
    return "not offered" if verdict is None else "right now" if verdict.ok else "still wrong"


def recheck(reproductions: List[Reproduction]) -> List[Tuple[Reproduction, ConvSpec, Optional[Verdict]]]:
    """Each row's plan run again on this GPU, on its smallest and its larger convolution.

    Args:
        reproductions: the table's rows.

    Returns:
        (row, convolution, its verdict or None when the plan is not offered there) per run.
    """
    out = []
    for rep in reproductions:
        for spec in filter(None, (rep.spec, rep.larger)):
            out.append((rep, spec, check_named(spec, rep.plan)))
    return out


def sweep(seconds: float, *, seed: int = 0, at_batch_1: bool = True, **fixed) -> Iterator[dict]:
    """Every plan of seeded random convolutions checked against float64, for a while.

    Args:
        seconds: how long to search.
        seed: the random generator's seed.
        at_batch_1: also check each plan at N=1 (does a check on small operands see the same?).
        **fixed: fields every convolution keeps (`random_spec`).

    Returns:
        An iterator of rows: one per plan (label, plan, rel_error, ok, first_choice, ok_at_batch_1:
        None if not offered at N=1) and one per convolution cuDNN refused.
    """
    from ..cudnn import conv_graph  # heavy: CuPy, live only

    rng, t0 = random.Random(seed), time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        spec = random_spec(rng, **fixed)
        try:
            cg = conv_graph.ConvGraph(spec)
            verdicts = cg.check()
        except LabkitError as exc:
            yield dict(label=spec.label, status=f"{type(exc).__name__}: {exc}"[:200])
            continue
        first = cg.heuristic_plan.index
        small = {}
        if at_batch_1 and spec.N > 1:
            try:
                one = conv_graph.ConvGraph(spec.replace(N=1))
                small = {one.plans[i].name: v.ok for i, v in one.check().items()}
            except LabkitError:
                small = {}
        for index, v in sorted(verdicts.items()):
            yield dict(
                label=spec.label,
                plan_index=index,
                plan=v.plan_name,
                rel_error=v.rel_error,
                ok=v.ok,
                first_choice=index == first,
                ok_at_batch_1=small.get(v.plan_name) if spec.N > 1 else v.ok,
                status=v.status,
            )


def shrink(
    spec: ConvSpec, plan: str, *, seconds: float
) -> Tuple[ConvSpec, Optional[plan_checks.Verdict], int]:
    """The smallest convolution on which a plan still computes a wrong result.

    It is reached from ``spec`` by `smaller` steps.

    Args:
        spec: a convolution where ``plan`` is wrong.
        plan: cuDNN's plan name.
        seconds: how long to search.

    Returns:
        (spec, its verdict, trials).
    """
    t0, trials = time.perf_counter(), 0
    best, verdict = spec, check_named(spec, plan)
    if verdict is None or verdict.ok:
        return spec, verdict, 1
    improved = True
    while improved and time.perf_counter() - t0 < seconds:
        improved = False
        for candidate in smaller(best):
            if time.perf_counter() - t0 >= seconds:
                break
            trials += 1
            v = check_named(candidate, plan)
            if v is not None and not v.ok:
                best, verdict, improved = candidate, v, True
                break
    return best, verdict, trials
