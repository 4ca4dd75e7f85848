"""Sense checks shared by the recorded (CPU) and live (GPU) experiment tests."""


def precision(df):
    ok = df[df.status == "ok"].set_index("dtype")
    e = ok.rel_error_vs_fp64_inputs
    assert e["fp32"] < e["tf32"] < e["fp16"] < e["bf16"], e.to_dict()
    assert (ok.rel_error <= ok.tolerance).all()
    if "fp8_e4m3" in e:
        assert e["fp8_e4m3"] > e["bf16"]
    assert (ok.tflops > 0).all() and (ok.workspace_bytes >= 0).all()


def fusion(df):
    for epi, g in df[df.status == "ok"].groupby("epilogue"):
        g = g.set_index("path")
        assert g.allocated_bytes["fused"] < g.allocated_bytes["unfused"], epi
        assert g.modelled_hbm_bytes["fused"] < g.modelled_hbm_bytes["unfused"], epi
        assert g.intermediate_bytes["fused"] == 0 < g.intermediate_bytes["unfused"]
        if "fused, autotuned" in g.gpu_us:  # the autotuner times the heuristic's plan too: never much slower,
            # 10% or 2 us (on the H100 a 5.8 us heuristic plan once met a 7.4 us autotuned pick at N=8, 28x28)
            assert g.gpu_us["fused, autotuned"] <= max(1.1 * g.gpu_us["fused"], g.gpu_us["fused"] + 2.0), (
                epi,
                g.gpu_us,
            )
            assert g.intermediate_bytes["fused, autotuned"] == 0
        assert (g.rel_error < 5e-3).all()


def caps(df):
    ok = df[df.status == "ok"]
    capped = ok[ok.cap_bytes >= 0]
    assert (capped.workspace_bytes <= capped.cap_bytes).all()
    assert (ok.slowdown_vs_unlimited >= 0.9).all()  # a cap never makes the best plan much faster
    assert ok.plans_within_cap.is_monotonic_increasing or ok.cap_bytes.iloc[-1] == -1


def plans(df):
    assert df.heuristic_pick.sum() == 1 and df.best.sum() == 1 and df.worst.sum() == 1
    ok = df[df.status == "ok"]
    assert ok[ok.best].gpu_us.iloc[0] == ok.gpu_us.min()
    assert ok[ok.worst].gpu_us.iloc[0] == ok.gpu_us.max()
    assert (df.candidates >= len(df)).all()


def race(df):
    d = df.set_index("scratchpad")
    assert (
        d.loc["per-stream", "mismatches_bitwise"] == 0 and d.loc["per-stream", "mismatches_vs_reference"] == 0
    )
    assert d.loc["shared", "runs"] >= 1000 and d.loc["per-stream", "runs"] >= 1000
    if d.loc["shared", "launch"] == "graph":
        assert d.loc["shared", "mismatches_vs_reference"] > 0


def strategies(df):
    ok = df[df.status == "ok"].set_index("strategy")
    malloc = ok.loc["malloc_per_call"]
    assert malloc.alloc_calls == malloc.calls and malloc.held_after_bytes == 0
    arena = ok[ok.index.str.startswith("fixed_arena")].iloc[0]
    assert arena.alloc_calls <= 1 and arena.held_after_bytes == arena.peak_bytes  # allocated once, up front
    assert (ok.peak_bytes >= ok.held_after_bytes).all()


def roofline(df):
    ok = df[df.status == "ok"]
    assert len(ok) and (ok.tflops > 0).all()
    from labkit import ceilings

    c = ceilings.for_gpu(df.attrs.get("gpu"))
    if (
        c is None or c.peak_tflops(str(df.dtype.iloc[0])) is None
    ):  # no roof known (GPU or dtype): none to be under
        assert ok.peak_tflops.isna().all()
        return
    assert (ok.tflops < ok.peak_tflops).all()
    assert (
        ok.achieved_gb_s < ok.bandwidth_gb_s * 1.5
    ).all()  # min-bytes model (ConvSpec.min_bytes); caches can beat it a little
