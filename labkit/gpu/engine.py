"""cuDNN frontend graphs for a `ConvSpec`: build, list plans, execute, cache, autotune, cap.

One `ConvGraph` per (spec, epilogue, workspace cap). It is built through ``cudnn.pygraph`` with
heuristics A + FALLBACK and *every* candidate plan built (``build_plan_policy.ALL``), so a lesson
can run any plan by index. labkit always supplies the workspace itself (``cudnn.Graph``'s own
allocator needs torch; the workspace strategies are the point of this workbook).

Tensors are described in logical NCHW order with strides for the chosen layout; CuPy arrays hold
them in storage order (``storage_shape``). Roles: ``x`` image, ``w`` filter, ``y`` output image,
``b`` bias (1,K,1,1), ``z`` residual (like y). Which one a direction writes: `OUTPUT_ROLE`.
Fused epilogues (fprop only): ``bias_relu`` = relu(conv + b); ``bias_relu_add`` =
relu(conv + b + z) (the ResNet block order).
"""
from __future__ import annotations

import collections
import threading
import time
from dataclasses import dataclass, field
from typing import Dict, List, Optional

import cudnn
import cupy
import numpy

from . import memory
from ..errors import InvalidSpec, LabkitError, OutOfMemory, Unsupported
from ..cancel import Budget, checkpoint, was_cut
from ..progress import announce
from ..spec import ConvSpec

EPILOGUES = ("none", "bias_relu", "bias_relu_add")
OUTPUT_ROLE = {"fprop": "y", "dgrad": "x", "wgrad": "w"}
INPUT_ROLES = {"fprop": ("x", "w"), "dgrad": ("y", "w"), "wgrad": ("x", "y")}
UIDS = {"x": 1, "w": 2, "y": 3, "b": 4, "z": 5}

_CUDNN_DTYPE = {
    "fp32": cudnn.data_type.FLOAT,
    "tf32": cudnn.data_type.FLOAT,
    "fp16": cudnn.data_type.HALF,
    "bf16": cudnn.data_type.BFLOAT16,
    "fp8_e4m3": cudnn.data_type.FP8_E4M3,
}


# ---- layouts --------------------------------------------------------------------------------
def strides(shape, layout: str) -> tuple:
    """Element strides of a logical (n, c, h, w) tensor stored in ``layout``."""
    n, c, h, w = shape
    if layout == "NCHW":
        return (c * h * w, h * w, w, 1)
    return (h * w * c, 1, w * c, c)


def storage_shape(shape, layout: str) -> tuple:
    """Shape of the CuPy array holding a logical (n, c, h, w) tensor in ``layout``."""
    n, c, h, w = shape
    return (n, c, h, w) if layout == "NCHW" else (n, h, w, c)


def logical_view(arr, layout: str):
    """View a storage-order array as logical (n, c, h, w)."""
    return arr if layout == "NCHW" else arr.transpose(0, 3, 1, 2)


def role_shapes(spec: ConvSpec, epilogue: str = "none") -> Dict[str, tuple]:
    shapes = {"x": spec.x_shape, "w": spec.w_shape, "y": spec.y_shape}
    if epilogue != "none":
        shapes["b"] = (1, spec.K, 1, 1)
    if epilogue == "bias_relu_add":
        shapes["z"] = spec.y_shape
    return shapes


def role_dtype(spec: ConvSpec, role: str) -> str:
    """labkit dtype of a role's tensor: the written tensor and b/z use the output dtype."""
    if role == OUTPUT_ROLE[spec.direction] or role in ("b", "z"):
        return spec.output_dtype
    return spec.dtype


def _check_epilogue(spec: ConvSpec, epilogue: str) -> str:
    if epilogue not in EPILOGUES:
        raise InvalidSpec("epilogue", epilogue, f"must be one of {', '.join(EPILOGUES)}")
    if epilogue != "none" and spec.direction != "fprop":
        raise InvalidSpec("epilogue", epilogue, "fused epilogues apply to fprop only")
    return epilogue


def _check_spec(spec) -> ConvSpec:
    if not isinstance(spec, ConvSpec):
        raise InvalidSpec("spec", spec, "must be a labkit.ConvSpec")
    return spec


def _check_cap(cap) -> Optional[int]:
    return None if cap is None else memory.check_request(cap, "workspace cap")


# ---- handles --------------------------------------------------------------------------------
_handles: Dict[tuple, object] = {}
_handles_lock = threading.Lock()


def handle_for(stream=None):
    """The cuDNN handle bound to ``stream`` (default: CuPy's current stream), one per stream."""
    stream = stream if stream is not None else cupy.cuda.get_current_stream()
    key = (cupy.cuda.Device().id, int(stream.ptr))
    with _handles_lock:
        h = _handles.get(key)
        if h is None:
            try:
                h = cudnn.create_handle()
            except Exception as exc:  # cuDNN allocates streams and memory for a handle
                raise OutOfMemory(f"a cuDNN handle ({str(exc).strip()[:120]})", 0, memory.free_bytes()) from exc
            cudnn.set_stream(h, int(stream.ptr))
            _handles[key] = h
    return h


def release_handle(stream) -> None:
    """Destroy the cuDNN handle bound to ``stream`` (if any). Call when the stream is done with:
    each handle holds a few MiB of device memory and its own internal streams."""
    key = (cupy.cuda.Device().id, int(stream.ptr))
    with _handles_lock:
        h = _handles.pop(key, None)
    if h is not None:
        stream.synchronize()
        cudnn.destroy_handle(h)


# ---- plans ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Plan:
    """One candidate plan. ``workspace_bytes`` is None when the plan did not build (``error`` says why)."""

    index: int
    name: str
    workspace_bytes: Optional[int]
    built: bool
    notes: str = ""
    error: str = ""


def _wrap_cudnn_error(what: str, exc: Exception) -> LabkitError:
    msg = str(exc).strip() or type(exc).__name__
    if "out of memory" in msg.lower() or "alloc" in msg.lower() and "fail" in msg.lower():
        return OutOfMemory(what, 0, memory.free_bytes())
    return Unsupported(what, msg)


#: Plans labkit has seen give wrong results (checked against the float64 reference); they are
#: listed as not runnable, with the evidence, so no lesson or strategy runs them.
#: (engine name, dtype, layout, evidence)
KNOWN_WRONG = (
    ("eng7_k24=26", "fp8_e4m3", "NCHW",
     "relative error 1.4 vs the float64 reference on an H100 with cuDNN 9.19.0 "
     "(fp8 NCHW fprop 2x32x12x12 -> 32 3x3, 3 seeds); the heuristic's first pick there"),
)


def _known_wrong(spec: ConvSpec, name: str) -> Optional[str]:
    for engine_name, dtype, layout, evidence in KNOWN_WRONG:
        if name == engine_name and spec.dtype == dtype and spec.layout == layout:
            return "excluded by labkit: " + evidence
    return None


#: seconds an all-plan build may take before the plans not yet built are left out ("cut"); the
#: frontend builds plans one at a time, so the budget is checked between plans
BUILD_BUDGET_S = 60.0


def build_every_plan(g, budget: Budget) -> Dict[int, str]:
    """Build every candidate plan of frontend graph ``g``, one at a time (what ``build_plans(ALL)``
    does inside the frontend), checking ``budget`` between plans. labkit runs plans by index, so
    which plan the frontend calls selected does not matter. Returns {plan index: why it was not
    built}: cuDNN's reason, or ``cut: ...`` for the plans the spent budget left out."""
    why_not = {}
    count = g.get_execution_plan_count()
    for i in range(count):
        if budget.over:
            why = f"cut: the build budget ({budget.seconds:.0f} s) was spent after {budget.spent:.1f} s"
            why_not.update({j: why for j in range(i, count)})
            break
        try:
            g.build_plan_at_index(i)
        except Exception as exc:  # noqa: BLE001  (declined by cuDNN, or barred by a filter: kept as the reason)
            why_not[i] = " ".join(str(exc).split())[:200] or type(exc).__name__
    return why_not


class ConvGraph:
    """A built cuDNN graph for one spec/epilogue/cap with every candidate plan built.

    ``plans``: every candidate (heuristics A then FALLBACK), built or not. ``default_plan``: the
    first plan that built (the heuristic's pick). ``build_seconds``: wall time of the build.
    ``build_budget_s``: once an all-plan build has taken this long, the plans not yet built are
    left unbuilt, each saying so (``build_cut`` counts them). None: `BUILD_BUDGET_S`.
    """

    build_cut = 0

    def __init__(self, spec: ConvSpec, epilogue: str = "none", workspace_cap: Optional[int] = None,
                 all_plans: bool = True, _deterministic_only: bool = False, build_budget_s: Optional[float] = None):
        _check_spec(spec)
        self.spec, self.all_plans = spec, bool(all_plans)
        self._deterministic_only = _deterministic_only
        self._deterministic: Optional[set] = None
        self.epilogue = _check_epilogue(spec, epilogue)
        self.workspace_cap = _check_cap(workspace_cap)
        budget = Budget(BUILD_BUDGET_S if build_budget_s is None else build_budget_s, f"building {spec.label}")
        announce(f"building {'every plan' if all_plans else 'the heuristic plan'} of {spec.label}"
                 + ("" if epilogue == "none" else f" + {epilogue}"))
        t0 = time.perf_counter()
        try:
            self.graph = self._define()
            why_not = self._plan_all(budget)
        except LabkitError:
            raise
        except Exception as exc:
            raise _wrap_cudnn_error(spec.label + ("" if epilogue == "none" else f" + {epilogue}"), exc) from exc
        self.build_seconds = time.perf_counter() - t0
        self.plans: List[Plan] = self._describe_plans(why_not)
        if not any(p.built for p in self.plans):
            raise Unsupported(spec.label, "no plan built: " + "; ".join(p.error for p in self.plans[:3]))
        self._cpp_index = self._backend_indices()

    # -- definition --
    def _define(self):
        s, io = self.spec, _CUDNN_DTYPE[self.spec.dtype]
        out = _CUDNN_DTYPE[s.output_dtype]
        f32 = cudnn.data_type.FLOAT
        g = cudnn.pygraph(io_data_type=io, intermediate_data_type=f32, compute_data_type=f32, handle=handle_for())
        shapes = role_shapes(s, self.epilogue)

        def t(role):
            return g.tensor(
                name=role.upper(), dim=list(shapes[role]), stride=list(strides(shapes[role], s.layout)),
                data_type=_CUDNN_DTYPE[role_dtype(s, role)], uid=UIDS[role],
            )

        conv_args = dict(padding=list(s.padding), stride=list(s.stride), dilation=list(s.dilation), compute_data_type=f32)
        if s.direction == "fprop":
            result = g.conv_fprop(image=t("x"), weight=t("w"), name="conv", **conv_args)
            if self.epilogue != "none":
                result.set_data_type(f32)
                result = g.add(a=result, b=t("b"), name="bias", compute_data_type=f32)
                result.set_data_type(f32)
                if self.epilogue == "bias_relu_add":
                    result = g.add(a=result, b=t("z"), name="residual", compute_data_type=f32)
                    result.set_data_type(f32)
                result = g.relu(input=result, name="relu", compute_data_type=f32)
        elif s.direction == "dgrad":
            result = g.conv_dgrad(loss=t("y"), filter=t("w"), name="dgrad", **conv_args)
        else:
            result = g.conv_wgrad(image=t("x"), loss=t("y"), name="wgrad", **conv_args)
        role = OUTPUT_ROLE[s.direction]
        result.set_output(True).set_data_type(out).set_dim(list(shapes[role])).set_stride(list(strides(shapes[role], s.layout)))
        result.set_uid(UIDS[role])
        return g

    def _plan_all(self, budget: Budget) -> Dict[int, str]:
        g = self.graph
        g.validate()
        g.build_operation_graph()
        g.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
        if self.spec.dtype == "fp32":  # true fp32: no TF32 tensor cores, no down-conversion
            g.deselect_numeric_notes([cudnn.numerical_note.TENSOR_CORE, cudnn.numerical_note.DOWN_CONVERT_INPUTS])
        elif self.spec.dtype == "tf32":
            g.select_numeric_notes([cudnn.numerical_note.TENSOR_CORE])
        if self._deterministic_only:
            g.deselect_numeric_notes([cudnn.numerical_note.NONDETERMINISTIC])
        if self.workspace_cap is not None:
            g.deselect_workspace_greater_than(self.workspace_cap)
        g.check_support()
        if not self.all_plans:
            g.build_plans(cudnn.build_plan_policy.HEURISTICS_CHOICE)
            return {}
        why_not = build_every_plan(g, budget)
        self.build_cut = sum(map(was_cut, why_not.values()))
        return why_not

    def _describe_plans(self, why_not: Dict[int, str]) -> List[Plan]:
        """Every candidate as a `Plan`; ``why_not``: plan index -> why its build failed or was cut."""
        g, plans = self.graph, []
        for i in range(g.get_execution_plan_count()):
            try:
                name = g.get_plan_name_at_index(i)
            except Exception as exc:  # noqa: BLE001
                name = f"plan{i} ({exc})"
            if i in why_not:
                plans.append(Plan(i, name, None, False, error=why_not[i]))
                continue
            try:
                ws = int(g.get_workspace_size_plan_at_index(i))
            except Exception as exc:  # did not build, or barred by a filter/cap
                plans.append(Plan(i, name, None, False, error=str(exc).strip().splitlines()[0][:200]))
                continue
            wrong = _known_wrong(self.spec, name)
            if wrong:
                plans.append(Plan(i, name, ws, False, error=wrong))
                continue
            if self.workspace_cap is not None and ws > self.workspace_cap:
                plans.append(Plan(i, name, ws, False, error=f"needs {ws} B > cap {self.workspace_cap} B"))
                continue
            try:
                notes = ",".join(str(n).split(".")[-1] for n in g.get_behavior_notes_for_plan_at_index(i))
            except Exception:  # noqa: BLE001
                notes = ""
            plans.append(Plan(i, name, ws, True, notes=notes))
        return plans

    def _backend_indices(self) -> Dict[int, int]:
        """Plan index -> the lowered C++ graph's own index (for the low-overhead path)."""
        try:
            cfgs = self.graph._plans
            return {i: cfg.cpp_index for i, cfg in enumerate(cfgs) if cfg.cpp_index is not None}
        except Exception:  # noqa: BLE001  (a frontend without this internal: use the public path)
            return {}

    # -- queries --
    @property
    def runnable(self) -> List[Plan]:
        return [p for p in self.plans if p.built]

    @property
    def default_plan(self) -> Plan:
        return self.runnable[0]

    def plan(self, index: Optional[int] = None) -> Plan:
        """The plan at ``index`` (None: the default plan). Raises `InvalidSpec` for a bad index."""
        if index is None:
            return self.default_plan
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < len(self.plans):
            raise InvalidSpec("plan index", index, f"must be an int in 0..{len(self.plans) - 1}")
        p = self.plans[index]
        if not p.built:
            raise Unsupported(f"plan {index} ({p.name})", p.error or "it did not build")
        return p

    def deterministic_names(self) -> set:
        """Names of the plans cuDNN does not mark NONDETERMINISTIC (the frontend has no per-plan
        query for numerical notes, so a sibling graph is built with those plans deselected; once)."""
        if self._deterministic is None:
            try:
                sibling = ConvGraph(self.spec, self.epilogue, self.workspace_cap, self.all_plans, _deterministic_only=True)
                self._deterministic = {p.name for p in sibling.runnable}
            except Unsupported:  # every plan is nondeterministic
                self._deterministic = set()
        return self._deterministic

    def plan_table(self, determinism: bool = False):
        """Every candidate plan as a tidy DataFrame: index, name, workspace_bytes, built, notes
        (cuDNN's behaviour notes), error; with ``determinism`` also ``deterministic`` (bool)."""
        import pandas as pd

        df = pd.DataFrame([p.__dict__ for p in self.plans])
        if determinism:
            names = self.deterministic_names()
            df["deterministic"] = df.name.isin(names)
        return df

    # -- execution --
    def bind(self, arrays: Dict[str, object], workspace_ptr: int, plan_index: Optional[int] = None, stream=None) -> "BoundConv":
        """Prebind device pointers for fast repeated execution (see `BoundConv`)."""
        return BoundConv(self, arrays, workspace_ptr, self.plan(plan_index).index, stream)

    def execute(self, arrays: Dict[str, object], workspace_ptr: int, plan_index: Optional[int] = None, stream=None) -> None:
        """Run one plan once on ``stream`` (CuPy current by default). ``workspace_ptr``: device
        address of at least ``plan.workspace_bytes`` bytes (0 when the plan needs none)."""
        self.bind(arrays, workspace_ptr, plan_index, stream).run()

    @property
    def key(self) -> tuple:
        return graph_key(self.spec, self.epilogue, self.workspace_cap, self.all_plans)


class BoundConv:
    """A plan with its device pointers bound: ``run()`` launches it with ~the frontend's minimum
    host cost (the lowered graph's ``_execute_plan_at_index`` with a prebuilt uid -> pointer
    pack, falling back to the public ``execute_plan_at_index``)."""

    def __init__(self, cg: ConvGraph, arrays: Dict[str, object], workspace_ptr: int, plan_index: int, stream=None):
        needed = set(role_shapes(cg.spec, cg.epilogue))
        missing = needed - set(arrays)
        if missing:
            raise InvalidSpec("arrays", sorted(arrays), f"missing tensor(s) {sorted(missing)} for this graph")
        self.graph, self.plan_index = cg, plan_index
        self.workspace_bytes = cg.plans[plan_index].workspace_bytes
        if self.workspace_bytes and not workspace_ptr:
            raise InvalidSpec("workspace_ptr", workspace_ptr, f"plan {plan_index} needs {self.workspace_bytes} B of workspace")
        self.stream = stream if stream is not None else cupy.cuda.get_current_stream()
        self.handle = handle_for(self.stream)
        self.pack = {UIDS[r]: _ptr(arrays[r]) for r in needed}
        self.workspace_ptr = int(workspace_ptr or 0)
        self._fast = None
        cpp = cg._cpp_index.get(plan_index)
        lowered = getattr(cg.graph, "_lowered_graph", None)
        if cpp is not None and lowered is not None and hasattr(lowered, "_execute_plan_at_index"):
            backend = self.handle.backend_handle
            fn = lowered._execute_plan_at_index
            pack, ws = self.pack, self.workspace_ptr
            self._fast = lambda: fn(pack, ws, cpp, backend)

    def run(self) -> None:
        if self._fast is not None:
            self._fast()
        else:
            self.graph.graph.execute_plan_at_index(self.pack, self.workspace_ptr, self.plan_index, handle=self.handle)


def _ptr(a) -> int:
    if isinstance(a, int):
        return a
    return int(a.data.ptr)


# ---- saved plans: a graph's chosen plan on disk (labkit.plan_store) ----------------------------
class LoadedGraph(ConvGraph):
    """A graph with one plan, deserialized from disk instead of built (`load_plan`). It runs like a
    `ConvGraph` (``plans`` holds that one plan, index 0); ``build_seconds`` is the load time
    (reading the file and ``deserialize``), ``saved`` the `labkit.plan_store.SavedPlan`."""

    def __init__(self, spec: ConvSpec, epilogue: str, workspace_cap: Optional[int], saved, graph, seconds: float):
        self.spec, self.all_plans, self.epilogue, self.workspace_cap = spec, False, epilogue, workspace_cap
        self._deterministic_only, self._deterministic = False, None
        self.graph, self.saved, self.build_seconds = graph, saved, seconds
        self.plans = [Plan(0, saved.plan_name, int(saved.workspace_bytes), True, notes=saved.notes)]
        self._cpp_index = {0: 0}  # a deserialized graph holds its one plan at index 0


def _plan_store(kind: Optional[str] = None):
    """This machine's `labkit.plan_store.PlanStore` (None: saving off, no GPU, or ``LABKIT_CACHE``
    unusable); ``kind`` is checked first (`InvalidSpec` for one that is not a plan kind)."""
    from .. import plan_store

    if kind is not None:
        plan_store.check_kind(kind)
    try:
        return plan_store.current()
    except LabkitError:  # LABKIT_CACHE names a file: the error is raised where the cache is used for results
        return None


def save_plan(cg: ConvGraph, plan_index: int, kind: str, info: Optional[dict] = None, store=None):
    """Serialize plan ``plan_index`` of ``cg`` to disk as this graph's ``kind`` plan ("heuristic" or
    "autotuned"; `labkit.plan_store`). Returns the file, or None (saving off, a loaded graph, or
    cuDNN would not serialize it: that is not an error, the plan is simply built next time)."""
    store = store if store is not None else _plan_store(kind)
    if store is None or isinstance(cg, LoadedGraph):
        return None
    plan = cg.plan(plan_index)
    try:
        g = cg.graph
        if cg.all_plans or plan.index != cg.default_plan.index:
            g.build_plan_at_index(plan.index)  # selects it (already built: no rebuild) so serialize() holds it
        data = bytes(g.serialize())
    except Exception:  # noqa: BLE001  (a plan cuDNN cannot serialize is built again next time)
        return None
    key = graph_key(cg.spec, cg.epilogue, cg.workspace_cap, False)
    return store.put(key, kind, data, plan.name, plan.workspace_bytes or 0, plan.notes, info)


def load_plan(spec: ConvSpec, epilogue: str = "none", workspace_cap: Optional[int] = None, kind: str = "heuristic",
              store=None) -> Optional[LoadedGraph]:
    """This graph's saved ``kind`` plan, deserialized (about 10 ms), or None when none is saved.
    A file cuDNN will not load is set aside with one warning naming it, and None is returned."""
    t0 = time.perf_counter()
    spec = _check_spec(spec)  # bad input is an error whether or not anything is saved
    epilogue, workspace_cap = _check_epilogue(spec, epilogue), _check_cap(workspace_cap)
    store = store if store is not None else _plan_store(kind)
    if store is None:
        return None
    saved = store.get(graph_key(spec, epilogue, workspace_cap, False), kind)
    if saved is None:
        return None
    try:
        g = cudnn.pygraph(handle=handle_for())
        g.deserialize(handle_for(), list(saved.data))  # the binding takes the list of ints serialize() gave
        loaded = LoadedGraph(spec, epilogue, workspace_cap, saved, g, time.perf_counter() - t0)
    except Exception as exc:  # noqa: BLE001  (cuDNN refused it: build instead, and say which file)
        store.set_aside(saved, f"cuDNN would not deserialize it: {type(exc).__name__}: {str(exc).strip()[:120]}")
        return None
    return loaded


# ---- the graph cache ------------------------------------------------------------------------
def graph_key(spec: ConvSpec, epilogue: str = "none", workspace_cap: Optional[int] = None, all_plans: bool = True) -> tuple:
    """Everything that makes two graphs different: every spec field, the epilogue, the workspace
    cap, and whether every plan was built (``all_plans``) or only the heuristic's first choice."""
    return (spec.key, epilogue, workspace_cap, bool(all_plans))


@dataclass
class CacheStats:
    hits: int = 0
    misses: int = 0
    evictions: int = 0
    build_seconds: List[float] = field(default_factory=list)
    hit_seconds: List[float] = field(default_factory=list)
    #: graphs deserialized from saved plans instead of built (not counted in ``misses``)
    loads: int = 0
    load_seconds: List[float] = field(default_factory=list)


class GraphCache:
    """Built graphs keyed by `graph_key`, least-recently-used eviction beyond ``max_entries``.

    Policy: LRU (as PyTorch's cuDNN plan cache became after unbounded growth was reported).
    Evicting drops labkit's reference; the frontend frees the plans when nothing else holds them.

    With ``saved_plans`` (the default), a miss for a graph holding only the heuristic's pick
    (``all_plans=False``) loads that plan from disk when it was saved before (`load_plan`), and a
    graph built for such a miss is saved (`save_plan`): a later process deserializes instead of
    building. ``stats.loads`` counts the loads; ``stats.misses`` counts builds only.
    """

    def __init__(self, max_entries: int = 64, saved_plans: bool = True):
        if isinstance(max_entries, bool) or not isinstance(max_entries, int) or max_entries < 1:
            raise InvalidSpec("max_entries", max_entries, "must be an int >= 1")
        self.max_entries = max_entries
        self.saved_plans = bool(saved_plans)
        self._entries: "collections.OrderedDict[tuple, ConvGraph]" = collections.OrderedDict()
        self.stats = CacheStats()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key) -> bool:
        return key in self._entries

    def get(self, spec: ConvSpec, epilogue: str = "none", workspace_cap: Optional[int] = None,
            all_plans: bool = True, build_budget_s: Optional[float] = None) -> ConvGraph:
        """The graph for these arguments: cached, loaded (a one-plan graph saved before) or built
        (within ``build_budget_s``, see `ConvGraph`; a graph cut short is cached as it is)."""
        t0 = time.perf_counter()
        key = graph_key(_check_spec(spec), _check_epilogue(spec, epilogue), _check_cap(workspace_cap), all_plans)
        with self._lock:
            g = self._entries.get(key)
            if g is not None:
                self._entries.move_to_end(key)
                self.stats.hits += 1
                self.stats.hit_seconds.append(time.perf_counter() - t0)
                return g
        checkpoint()  # a build is 0.5-10 s: let the foreground have the GPU first
        saved = self.saved_plans and not all_plans  # a one-plan graph: its plan can come from disk
        g = load_plan(spec, epilogue, workspace_cap, "heuristic") if saved else None
        built = g is None
        if built:
            g = ConvGraph(spec, epilogue, workspace_cap, all_plans, build_budget_s=build_budget_s)
            if saved:
                save_plan(g, g.default_plan.index, "heuristic", dict(build_seconds=round(g.build_seconds, 6)))
        with self._lock:
            if built:
                self.stats.misses += 1
                self.stats.build_seconds.append(g.build_seconds)
            else:
                self.stats.loads += 1
                self.stats.load_seconds.append(g.build_seconds)
            self._entries[key] = g
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)
                self.stats.evictions += 1
        return g

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


#: the process-wide cache the experiments and strategies use
graphs = GraphCache()


def get_graph(spec: ConvSpec, epilogue: str = "none", workspace_cap: Optional[int] = None,
              all_plans: bool = True, build_budget_s: Optional[float] = None) -> ConvGraph:
    """A built graph from the process-wide cache (built on first use: 0.5-1.3 s cold; fused or
    fp8 graphs with runtime-compiled engines take several seconds when ``all_plans``; at most
    ``build_budget_s``, `BUILD_BUDGET_S` by default, before the plans left are cut)."""
    return graphs.get(spec, epilogue, workspace_cap, all_plans, build_budget_s)


# ---- operands ---------------------------------------------------------------------------------
class Operands:
    """Device tensors for a spec: seeded random inputs (``exact``: their float64 values, logical
    NCHW, as cuDNN reads them) and a poisoned output (NaN bit patterns, so an unwritten element
    cannot pass a check)."""

    def __init__(self, spec: ConvSpec, epilogue: str = "none", seed: int = 0):
        from . import numerics

        self.spec, self.epilogue = spec, _check_epilogue(spec, epilogue)
        self.output_role = OUTPUT_ROLE[spec.direction]
        self.arrays: Dict[str, cupy.ndarray] = {}
        self.exact: Dict[str, cupy.ndarray] = {}
        self.seeds: Dict[str, int] = {}
        failed = None
        try:
            for i, (role, shape) in enumerate(role_shapes(spec, epilogue).items()):
                dtype = role_dtype(spec, role)
                sshape = storage_shape(shape, spec.layout)
                if role == self.output_role:
                    arr = memory.empty(sshape, numerics.storage_dtype(dtype), f"{role} tensor")
                    arr.view(cupy.uint8)[...] = 0xFF  # NaN in every float format
                    self.arrays[role] = arr
                    continue
                self.seeds[role] = seed * 16 + i
                storage, exact = numerics.random_inputs(sshape, dtype, cupy, self.seeds[role])
                self.arrays[role] = storage
                self.exact[role] = logical_view(exact, spec.layout)
        except cupy.cuda.memory.OutOfMemoryError:
            failed = (role, 8 * int(numpy.prod(sshape)))  # the float64 copy is the largest part
        except OutOfMemory as exc:
            failed = (role, exc.requested_bytes)
        except Exception:
            self._drop()
            raise
        if failed is not None:  # raised outside the except block: no traceback keeps tensors alive
            self._drop()
            raise OutOfMemory(f"{failed[0]} tensor of {spec.label}", failed[1], memory.free_bytes())

    def _drop(self) -> None:
        self.arrays.clear()
        self.exact.clear()
        cupy.get_default_memory_pool().free_all_blocks()

    def unrounded(self, role: str) -> cupy.ndarray:
        """A role's input before rounding to the dtype (float64, logical NCHW): what an ideal
        infinitely precise convolution would have been given. Regenerated from its seed."""
        from . import numerics

        storage_shape_ = self.arrays[role].shape
        values = numerics.unrounded_values(storage_shape_, self.seeds[role])
        return logical_view(cupy.asarray(values), self.spec.layout)

    @property
    def nbytes(self) -> int:
        return sum(int(a.nbytes) for a in self.arrays.values())

    def output(self) -> cupy.ndarray:
        """The written tensor as float64, logical NCHW."""
        from . import numerics

        arr = self.arrays[self.output_role]
        return logical_view(numerics.decode(arr, role_dtype(self.spec, self.output_role)), self.spec.layout)

    def poison_output(self) -> None:
        self.arrays[self.output_role].view(cupy.uint8)[...] = 0xFF
