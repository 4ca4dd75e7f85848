"""Bad input to the report of a learner's own model: each a one-line `InvalidSpec`
naming the argument, raised before anything is measured. Needs torch (skipped, visibly, without
it); the model on a GPU needs one too."""

import subprocess
import sys

import pytest

torch = pytest.importorskip("torch", reason="a model of one's own needs torch (not a labkit dependency)")

import labkit  # noqa: E402
from labkit import InvalidSpec  # noqa: E402
from labkit.present.netreport import request_for  # noqa: E402


class Tiny(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.head = torch.nn.Linear(8, 2)

    def forward(self, x):
        return self.head(self.conv(x).mean((2, 3)))


def one_line(err) -> str:
    text = str(err.value)
    assert "\n" not in text, text
    return text


def test_the_batch_is_the_example_inputs_first_dimension():
    kwargs, name, _ = request_for(Tiny(), input_shape=(16, 3, 32, 32))
    assert name == "Tiny" and {spec.N for _, spec in kwargs["net"]} == {16}
    with pytest.raises(InvalidSpec, match="batch=8") as err:
        request_for(Tiny(), batch=8, input_shape=(16, 3, 32, 32))
    assert err.value.field == "batch" and one_line(err)


@pytest.mark.parametrize(
    "shape,field", [((3, 32), "input_shape"), ((16, 3, 32), "input_shape"), ((16, 5, 32, 32), "input_shape")]
)
def test_an_input_the_model_cannot_take_is_named(shape, field):
    with pytest.raises(InvalidSpec) as err:
        request_for(Tiny(), input_shape=shape)
    assert err.value.field == field and one_line(err)


def test_a_model_in_half_precision_is_named_with_the_fix():
    with pytest.raises(InvalidSpec, match=r"model\.float\(\)") as err:
        request_for(Tiny().half(), input_shape=(2, 3, 32, 32))
    assert err.value.field == "net" and one_line(err)


def test_a_model_without_conv2d_is_named():
    with pytest.raises(InvalidSpec, match="no Conv2d") as err:
        request_for(torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(12, 2)), input_shape=(2, 3, 2, 2))
    assert err.value.field == "net" and one_line(err)


@pytest.mark.parametrize(
    "path,says",
    [
        ("no_such_module_anywhere:make", "does not import"),
        ("torch.nn:NoSuchThing", "has no 'NoSuchThing'"),
        ("torch.nn:Conv2d", "calling Conv2d() failed"),
        ("math:pi", "not a function returning a model"),
        ("builtins:dict", "returned a dict, not a torch.nn.Module"),
        (":make", 'a model is named "module:callable"'),
    ],
)
def test_a_model_path_that_does_not_give_a_model_is_named(path, says):
    with pytest.raises(InvalidSpec, match=None) as err:
        request_for(path, input_shape=(2, 3, 32, 32))
    assert err.value.field == "net" and says in str(err.value) and one_line(err)


def test_the_cli_refuses_a_bad_model_path_in_one_line(tmp_path):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "labkit",
            "report",
            "no_such_module_anywhere:make",
            "--input-shape",
            "2,3,32,32",
            "--out",
            str(tmp_path / "out"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and not (tmp_path / "out").exists()
    assert (
        proc.stderr.strip().count("\n") == 0
        and "InvalidSpec: net='no_such_module_anywhere:make'" in proc.stderr
    )


@pytest.mark.gpu
def test_a_model_on_the_gpu_is_named_with_the_fix():
    if not torch.cuda.is_available():
        pytest.skip("needs torch with CUDA")
    with pytest.raises(InvalidSpec, match=r"model\.cpu\(\)") as err:
        labkit.report(Tiny().cuda(), input_shape=(2, 3, 32, 32))
    assert err.value.field == "net" and one_line(err)
