"""The PyTorch knobs lesson 11 measures: each setting as a PyTorch user writes it, the configuration
of the fresh process that measures it, and the labkit measurement it corresponds to.

A setting changes one knob from PyTorch's defaults: a ``torch.backends.cudnn`` flag, the memory
format, autocast, or an environment variable that cuDNN's PyTorch integration reads once, when it
starts (so each setting runs in a process of its own)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Optional

from ...errors import InvalidSpec
from ...spec import ConvSpec
from ..core import MIB

#: the environment variables a setting may set (every one is cleared in the others' processes)
KNOB_ENV = ("TORCH_CUDNN_V8_API_LRU_CACHE_LIMIT", "CUDNN_CONV_WSCAP_DBG")
#: the setting that keeps one plan in PyTorch's plan cache (timed with two batch sizes in turn too)
PLAN_CACHE = f"{KNOB_ENV[0]}=1"
#: the networks a call may measure (torchvision's constructors, random weights)
NETS = ("resnet50",)
#: PyTorch's dtypes for labkit's (tf32 is fp32 data: ``allow_tf32`` decides the math)
TORCH_DTYPES = ("fp32", "fp16", "bf16")


@dataclass(frozen=True)
class Setting:
    """One knob setting.

    Attributes:
        knob: the knob's name, as the lesson's charts group them.
        name: the setting, as a PyTorch user writes it.
        flags: ``torch.backends.cudnn`` attributes set (the rest keep PyTorch's defaults).
        env: environment variables set before torch starts.
        layout: the memory format (NCHW or NHWC); None keeps the convolution's.
        autocast: fp16 or bf16 under ``torch.autocast``; None for none.
        tuned: its labkit counterpart is the autotuned plan (else the heuristic's).
        cap_bytes: its labkit counterpart's workspace cap, in bytes; None for none.
    """

    knob: str
    name: str
    flags: dict = field(default_factory=dict)
    env: dict = field(default_factory=dict)
    layout: Optional[str] = None
    autocast: Optional[str] = None
    tuned: bool = False
    cap_bytes: Optional[int] = None


def _other(layout: str) -> str:
    return "NHWC" if layout == "NCHW" else "NCHW"


def settings_for(spec: ConvSpec, net: Optional[str] = None) -> list:
    """The settings measured for one convolution or network, PyTorch's defaults first.

    Args:
        spec: the convolution (for a network: its batch, dtype and layout).
        net: a network of `NETS`, or None for the convolution alone.

    Returns:
        `Setting` objects.
    """
    fmt = "channels_last" if spec.layout == "NCHW" else "contiguous_format"
    out = [
        Setting("defaults", "PyTorch's defaults"),
        Setting("cudnn.benchmark", "benchmark=True", {"benchmark": True}, tuned=True),
    ]
    if net is None:
        out += [
            Setting(
                "benchmark_limit",
                "benchmark=True, benchmark_limit=1",
                {"benchmark": True, "benchmark_limit": 1},
            ),
            Setting(
                "benchmark_limit",
                "benchmark=True, benchmark_limit=0",
                {"benchmark": True, "benchmark_limit": 0},
                tuned=True,
            ),
        ]
    out += [
        Setting("allow_tf32", "allow_tf32=False", {"allow_tf32": False}),
        Setting("deterministic", "deterministic=True", {"deterministic": True}),
        Setting("memory format", fmt, layout=_other(spec.layout)),
        Setting("autocast", "autocast fp16", autocast="fp16"),
        Setting("autocast", "autocast bf16", autocast="bf16"),
    ]
    if net is None:
        out += [
            Setting("plan cache", PLAN_CACHE, env={KNOB_ENV[0]: "1"}),
            Setting("workspace cap", "CUDNN_CONV_WSCAP_DBG=0", env={KNOB_ENV[1]: "0"}, cap_bytes=0),
            Setting("workspace cap", "CUDNN_CONV_WSCAP_DBG=16", env={KNOB_ENV[1]: "16"}, cap_bytes=16 * MIB),
            Setting(
                "workspace cap",
                "benchmark=True, CUDNN_CONV_WSCAP_DBG=16",
                {"benchmark": True},
                env={KNOB_ENV[1]: "16"},
                tuned=True,
                cap_bytes=16 * MIB,
            ),
        ]
    else:
        out.append(
            Setting(
                "all of them",
                f"benchmark=True, {fmt}, autocast fp16",
                {"benchmark": True},
                layout=_other(spec.layout),
                autocast="fp16",
                tuned=True,
            )
        )
    return out


def check_request(spec: ConvSpec, net: Optional[str]) -> None:
    """A clear error for a call PyTorch cannot run as asked.

    Args:
        spec: the convolution.
        net: the network, or None.
    """
    if net is not None and net not in NETS:
        raise InvalidSpec("net", net, f"must be None or one of {', '.join(NETS)}")
    if spec.dtype not in TORCH_DTYPES:
        raise InvalidSpec("spec.dtype", spec.dtype, f"must be one of {', '.join(TORCH_DTYPES)} (PyTorch's)")
    if spec.direction != "fprop":
        raise InvalidSpec("spec.direction", spec.direction, "must be fprop (a forward pass)")


def child_config(spec: ConvSpec, net: Optional[str], setting: Setting, *, calls: int, warmup: int) -> str:
    """The JSON configuration `torch_child` measures a setting from.

    Args:
        spec: the convolution.
        net: the network, or None.
        setting: the setting.
        calls: timed calls.
        warmup: calls before the timed ones.

    Returns:
        The JSON text.
    """
    layout = setting.layout or spec.layout
    cfg = dict(
        dtype=spec.dtype,
        channels_last=layout == "NHWC",
        autocast=setting.autocast,
        flags=setting.flags,
        calls=calls,
        warmup=warmup,
        alternations=10,
        profile=net is None,
        net=net,
        batch=spec.N,
        conv=None
        if net
        else dict(
            x_shape=list(spec.x_shape),
            w_shape=list(spec.w_shape),
            stride=list(spec.stride),
            padding=list(spec.padding),
            dilation=list(spec.dilation),
            groups=spec.groups,
        ),
    )
    return json.dumps(cfg, sort_keys=True)


def child_env(base: dict, setting: Setting) -> dict:
    """The child's environment: ``base`` without any knob variable, plus the setting's.

    Args:
        base: the parent's environment.
        setting: the setting.

    Returns:
        The environment.
    """
    env = {k: v for k, v in base.items() if k not in KNOB_ENV}
    env.update(setting.env)
    return env


def counterpart(spec: ConvSpec, setting: Setting, tf32_allowed: bool) -> Optional[ConvSpec]:
    """The convolution cuDNN runs under a setting, as labkit names it.

    Args:
        spec: the convolution PyTorch was asked for.
        setting: the setting.
        tf32_allowed: ``allow_tf32`` as the setting's process read it back.

    Returns:
        The `ConvSpec` (autocast's dtype; tf32 for fp32 data with TF32 allowed; the setting's
        layout).
    """
    dtype = setting.autocast or ("tf32" if spec.dtype == "fp32" and tf32_allowed else spec.dtype)
    return spec.replace(dtype=dtype, layout=setting.layout or spec.layout)


def labkit_name(spec: ConvSpec, tuned: bool, cap_bytes: Optional[int]) -> str:
    """A labkit row's name: which plan, of which convolution, under which cap.

    Args:
        spec: the convolution labkit ran.
        tuned: the autotuned plan (else the heuristic's).
        cap_bytes: the workspace cap, in bytes; None for none.

    Returns:
        E.g. ``autotuned, tf32 NCHW, cap 16 MiB``.
    """
    cap = "" if cap_bytes is None else f", cap {cap_bytes // MIB} MiB"
    return f"{'autotuned' if tuned else 'heuristic'}, {spec.dtype} {spec.layout}{cap}"
