"""A strategy has one label wherever a learner meets it (lesson 02's strategies chart, lesson 09's
report tables and chart, both lessons' checks), and a check takes any spelling of it a learner
could copy from what they see."""

from __future__ import annotations

import pytest

from labkit.errors import InvalidSpec
from labkit.experiments.core import from_recording
from labkit.experiments.workspace_strategies import strategies_repeats
from labkit.experiments.your_network import REPORT_STRATEGIES, table_of
from labkit.gpu.workspaces.labels import label, match
from labkit.gpu.workspaces.workloads import BENCH_STRATEGIES
from labkit.store import recordings

RECS = recordings.shipped()
REPORT = ["preallocated", "fixed_arena (8 MiB)", "malloc_per_call", "keyed_cache (256 MiB, key=full)"]
REPORT += ["keyed_cache (32 MiB, key=full)", "scratchpad_per_stream", "cupy_pool", "async_pool"]


def test_a_label_is_the_name_then_the_options_that_tell_it_apart():
    assert label("fixed_arena", size_bytes=1 << 30) == label("fixed_arena") == "fixed_arena (1024 MiB)"
    assert label("fixed_arena", size_bytes=131) == "fixed_arena (131 B)"  # never "0 MiB"
    assert label("keyed_cache", budget_bytes=32 << 20) == "keyed_cache (32 MiB, key=full)"
    assert label("keyed_cache", key="dims_only") == "keyed_cache (256 MiB, key=dims_only)"
    assert label("scratchpad") == "scratchpad_per_stream"
    assert label("scratchpad", shared=True) == "scratchpad_shared"
    assert label("async_pool") == "async_pool"


@pytest.mark.parametrize(
    "answer, named",
    [
        ("async_pool (32 MiB)", "async_pool"),  # its peak, copied from the table beside its name
        ("ASYNC_POOL", "async_pool"),
        ("fixed_arena (sized)", "fixed_arena (8 MiB)"),
        ("fixed_arena (1024 MiB)", "fixed_arena (8 MiB)"),  # lesson 02's arena: one arena here
        ("scratchpad", "scratchpad_per_stream"),
        ("keyed_cache (32 MiB)", "keyed_cache (32 MiB, key=full)"),
        ("keyed_cache(256MiB)", "keyed_cache (256 MiB, key=full)"),
        ("keyed_cache (32 MiB, key=full)", "keyed_cache (32 MiB, key=full)"),
        ("cupy", "cupy_pool"),
        ("pre", "preallocated"),
        ("keyed_cache", None),  # two keyed caches
        ("keyed_cache (999 MiB)", None),
        ("pool", None),
    ],
)
def test_match_names_the_one_label_a_spelling_can_mean(answer, named):
    assert match(answer, REPORT) == named


@pytest.mark.parametrize("rec", RECS, ids=[r.name for r in RECS])
def test_lessons_02_and_09_name_every_strategy_alike(rec):
    bench = from_recording("strategies", rec, workload="one_conv", repeats=strategies_repeats("one_conv"))
    assert list(dict.fromkeys(bench.strategy)) == [label(n, **o) for n, o in BENCH_STRATEGIES]
    for net in ("resnet50", "vgg16", "convnext_tiny"):
        df = from_recording("network_report", rec, net=net, batch=32, dtype="fp16", layout="NHWC")
        strategies, layers = table_of(df, "strategies"), table_of(df, "layers")
        sized = int(layers.fastest_workspace_bytes.max())
        assert list(strategies.strategy) == [
            label(n, **({"size_bytes": sized} if o == "sized" else o)) for _, n, o in REPORT_STRATEGIES
        ]
        assert set(table_of(df, "timeline").strategy) == set(strategies.strategy)
        shared = set(strategies.strategy) & set(bench.strategy)
        assert len(shared) == len(REPORT_STRATEGIES) - 1  # all but the arena, sized to the network


def test_lesson_10s_check_takes_a_strategy_as_lesson_02_or_its_timeline_spells_it(capsys):
    from labkit.experiments.under_the_hood import exercises

    parse = exercises.idle_strategy.parse
    assert parse("keyed_cache (32 MiB, key=full)") == parse("keyed_cache (32 MiB)") == "keyed_cache"
    assert parse("Keyed_Cache") == "keyed_cache"  # both keyed caches answer to their name
    assert parse("scratchpad") == "scratchpad_per_stream" and parse("fixed_arena (1024 MiB)") == "fixed_arena"
    assert parse("MALLOC_PER_CALL") == "malloc_per_call"
    with pytest.raises(InvalidSpec, match="must be a strategy"):
        parse("pool")
