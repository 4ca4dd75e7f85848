"""What a GPU engineer would check in the numbers, on the recorded H100 data (and live on a GPU
in test_experiments_gpu.py): orderings and bounds, never hard-coded timings."""

import pytest
import sense

from labkit import experiments
from labkit.experiments import BASE

pytestmark = pytest.mark.usefixtures("recorded_mode")


def test_precision_error_ordering():
    sense.precision(experiments.precision(BASE))


def test_fusion_saves_memory_and_traffic():
    sense.fusion(experiments.fusion(BASE))


def test_caps_are_respected():
    sense.caps(experiments.caps(BASE.replace(layout="NCHW")))


def test_plans_table():
    sense.plans(experiments.plans(BASE))


def test_race_counts():
    sense.race(experiments.race())


def test_strategies_books():
    sense.strategies(experiments.strategies())


def test_roofline_below_the_roof():
    sense.roofline(experiments.roofline())
