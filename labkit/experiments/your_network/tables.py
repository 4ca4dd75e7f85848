"""The tables of a network report's long frame: reading one (`table_of`), what was not measured to
the end (`cut_counts`), and the rows made from the measurements: one per call of the pass
(`layer_rows`) and the budget curve (`budget_rows`: the pass time within each workspace cap, a sum
of measured plan times). Bytes; microseconds.
"""

from __future__ import annotations

from typing import List, Optional, Tuple

from ...draw.plots import fmt_bytes, ok_rows
from ...errors import InvalidSpec
from ...gpu.checks.plan_checks import is_wrong
from ...signals.cancel import not_timed, was_cut
from ...spec import ConvSpec
from .request import BUDGET_CAPS, COLUMNS, TABLES, strategy_labels


def table_of(df, table: str):
    """One of `TABLES` from a `network_report` frame, with only that table's columns.

    Args:
        df: `network_report`'s result.
        table: the table's name.

    Returns:
        Its rows; `InvalidSpec` for a name not in `TABLES`.
    """
    return tables_of(df, table)[0]


def tables_of(df, *tables: str) -> tuple:
    """`table_of` for several tables, the long frame's missing values found once; a strategy is
    named by its label (`strategy_labels`), not by the key the frame stores it under. A table keeps
    its own columns (`COLUMNS`) when none of its rows has a value there (a cut report's pass times).

    Args:
        df: `network_report`'s result.
        *tables: the tables' names.

    Returns:
        One DataFrame per name, in order; `InvalidSpec` for a name not in `TABLES`.
    """
    for table in tables:
        if table not in TABLES:
            raise InvalidSpec("table", table, f"must be one of {', '.join(TABLES)}")
    if "table" not in df.columns:
        subs = [df.iloc[0:0, 0:0] for _ in tables]
    else:  # each table's columns found first, so only they are copied (the long frame has ~66, a table ~12)
        filled = df.notna().to_numpy()
        kinds = df["table"].to_numpy(dtype=object)
        subs = [
            df.loc[kinds == t, _columns_of(df, t, filled[kinds == t])].reset_index(drop=True) for t in tables
        ]
    labels = strategy_labels(sized_bytes(df)) if any("strategy" in sub.columns for sub in subs) else {}
    for sub in subs:
        if "strategy" in sub.columns:
            sub["strategy"] = [labels.get(k, k) for k in sub["strategy"]]
        sub.attrs = dict(df.attrs)
    return tuple(subs)


def _columns_of(df, table: str, filled) -> list:
    """A table's columns in the long frame: its own (`COLUMNS`), also where a cut report left every
    value of one missing, and any other column its rows give a value."""
    known = set(COLUMNS[table])
    return [c for c, f in zip(df.columns, filled.any(axis=0)) if c != "table" and (f or c in known)]


def sized_bytes(df) -> int:
    """The sized arena's size: the largest workspace of the pass's fastest plans (measured calls).

    Args:
        df: `network_report`'s result.

    Returns:
        Bytes; 0 when no call was measured.
    """
    if "table" not in df.columns or "fastest_workspace_bytes" not in df.columns:
        return 0
    rows = (df["table"] == "layers") & df["status"].isin(("ok", "wrong"))
    top = df.loc[rows, "fastest_workspace_bytes"].max()
    return 0 if top != top else int(top)


def cut_counts(df) -> dict:
    """What a report did not measure to the end.

    Args:
        df: `network_report`'s result.

    Returns:
        ``plans`` a budget cut or timed out (unknown), ``slower_plans`` left after one eager call far
        slower than the best (known to lose), ``wrong_plans`` left for a wrong result against
        float64, distinct ``layers`` whose step timed out or whose worker died, ``strategies`` that
        did not finish.
    """
    plans, layers, strategies = tables_of(df, "plans", "layers", "strategies")
    status = plans["status"] if len(plans) else []
    cut = int(sum(map(was_cut, status)))
    return dict(
        plans=cut,
        wrong_plans=int(sum(map(is_wrong, status))),
        slower_plans=int(sum(map(not_timed, status))) - cut,
        layers=int(layers[layers["status"].isin(("timed_out", "error"))]["spec_id"].nunique())
        if len(layers)
        else 0,
        strategies=int((strategies["status"] != "ok").sum()) if len(strategies) else 0,
    )


def largest_request(layers) -> float:
    """The most workspace any call of the pass asks for with its fastest plan, in bytes (0 before a
    layer is measured: a report's first partial table has no such column yet).

    Args:
        layers: the report's ``layers`` table.

    Returns:
        The bytes.
    """
    if "fastest_workspace_bytes" not in layers or not len(layers):
        return 0.0
    return float(layers["fastest_workspace_bytes"].max())


def layer_rows(steps, spec_id, groups, measured) -> List[dict]:
    """The ``layers`` table's rows: one per call of the pass, with its measured summary.

    Args:
        steps: (layer name, spec) per call of the pass (`pass_steps`).
        spec_id: `ConvSpec.key` -> its index in ``groups``.
        groups: the distinct convolutions (`labkit.networks.unique`).
        measured: index in ``groups`` -> its measured summary; a call not measured yet says
            ``pending``.

    Returns:
        The rows, as dicts.
    """
    out = []
    for order, (name, spec) in enumerate(steps):
        sid = spec_id[spec.key]
        row = dict(
            table="layers",
            order=order,
            layer=name,
            spec_id=sid,
            spec=spec.label,
            count=groups[sid].count,
            **_spec_columns(spec),
        )
        row.update(measured.get(sid, dict(status="pending", reason="not measured yet")))
        out.append(row)
    return out


def _spec_columns(spec: ConvSpec) -> dict:
    return dict(
        direction=spec.direction,
        N=spec.N,
        C=spec.C,
        H=spec.H,
        W=spec.W,
        K=spec.K,
        R=spec.R,
        S=spec.S,
        stride=spec.stride[0],
        padding=spec.padding[0],
        dilation=spec.dilation[0],
        groups=spec.groups,
        flops=spec.flops,
    )


def fastest_within(plans, cap: Optional[int]):
    """Each distinct convolution's fastest plan whose workspace fits in a cap (plans that ran only).

    Args:
        plans: the ``plans`` table.
        cap: the workspace cap in bytes; None for no cap.

    Returns:
        The plans' rows indexed by ``spec_id``, one per convolution that has a plan that fits.
    """
    ok = ok_rows(plans)
    fits = ok if cap is None else ok[ok["workspace_bytes"] <= cap]
    return fits.loc[fits.groupby("spec_id")["gpu_us"].idxmin()].set_index("spec_id")


def budget_rows(plans, steps_specs: List[Tuple[int, str]], caps=BUDGET_CAPS) -> List[dict]:
    """The budget curve from timed plans: the pass time if each call used its fastest plan within a cap.

    The time is a sum of measured plan times, not a new measurement.

    Args:
        plans: the ``plans`` table.
        steps_specs: (spec_id, direction) per call of the pass.
        caps: workspace caps in bytes; None for no cap.

    Returns:
        One ``budget`` row per cap: ``pass_gpu_us`` (NaN when a call has no plan that fits), calls
        that change plan or have none, the peak workspace (bytes) and the ``slowdown`` against no cap.
    """
    best = fastest_within(plans, None)["gpu_us"]
    rows = []
    for cap in caps:
        fits = fastest_within(plans, cap)
        total, changed, missing, peak = 0.0, 0, 0, 0
        for sid, _ in steps_specs:
            if sid not in fits.index:
                missing += 1
                continue
            us = float(fits.at[sid, "gpu_us"])
            total += us
            peak = max(peak, int(fits.at[sid, "workspace_bytes"]))
            changed += us > best[sid]
        rows.append(
            dict(
                table="budget",
                cap_bytes=-1 if cap is None else int(cap),
                cap_label="no cap" if cap is None else fmt_bytes(cap),
                pass_gpu_us=total if not missing else float("nan"),
                calls_changing_plan=int(changed),
                calls_without_plan=int(missing),
                peak_workspace_bytes=peak,
            )
        )
    unlimited = rows[-1]["pass_gpu_us"]
    for r in rows:
        r["slowdown"] = r["pass_gpu_us"] / unlimited if unlimited else float("nan")
    return rows


def over_cap_rows(layers, plans, cap: int):
    """The calls of the pass whose fastest plan needs more workspace than a cap, each with its
    fastest plan that fits (the plan the budget curve counts for it at that cap).

    Args:
        layers: the ``layers`` table.
        plans: the ``plans`` table.
        cap: the workspace cap in bytes.

    Returns:
        One row per such call, in the pass's order: ``layer``, ``spec``, its fastest plan's
        ``fastest_gpu_us`` and ``fastest_workspace_bytes``, and its fastest plan within the cap's
        ``within_cap_gpu_us`` and ``within_cap_workspace_bytes`` (empty where no plan fits).
    """
    calls = ok_rows(layers)
    calls = calls[calls["fastest_workspace_bytes"] > cap]
    fits = fastest_within(plans, cap)
    out = calls[["layer", "spec", "fastest_gpu_us", "fastest_workspace_bytes"]].reset_index(drop=True)
    for col in ("gpu_us", "workspace_bytes"):
        out[f"within_cap_{col}"] = [
            fits.at[sid, col] if sid in fits.index else None for sid in calls["spec_id"]
        ]
    out.attrs = dict(getattr(layers, "attrs", {}))
    return out


#: columns that hold measured fractions even when a value happens to be whole
_FRACTION = ("_us", "_ms", "_s", "seconds", "slowdown", "ratio", "error", "tolerance")


def whole_numbers(df):
    """``df`` with each float column whose values are all whole numbers (or missing) as integers
    (pandas ``Int64``): counts, sizes and bytes read as ``32``, not ``32.0``.

    Args:
        df: a report table (the long frame gives every numeric column as floats).

    Returns:
        A copy; columns named like a time, a ratio or an error stay floats.
    """
    df = df.copy()
    for col in df.columns:
        values = df[col]
        if values.dtype.kind != "f" or str(col).endswith(_FRACTION):
            continue
        known = values.dropna()
        if len(known) and (known == known.round()).all() and known.abs().max() < 2**53:
            df[col] = values.astype("Int64")
    df.attrs = dict(getattr(df, "attrs", {}))
    return df
