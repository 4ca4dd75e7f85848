"""Which fp8 plans disagree with the float64 reference, and is it the plan or the inputs?"""

from labkit import ConvSpec
from labkit.gpu import engine, verify

for layout in ("NCHW", "NHWC"):
    for shape in (dict(N=2, C=32, H=12, W=12, K=32), dict(N=4, C=64, H=28, W=28, K=64)):
        spec = ConvSpec(**shape, dtype="fp8_e4m3", layout=layout)
        g = engine.get_graph(spec)
        for p in g.runnable:
            errs = [verify.check_plan(spec, plan_index=p.index, seed=s, graph=g).rel_error for s in range(3)]
            flag = "BAD" if max(errs) > 1e-2 else "ok "
            print(
                f"{flag} {spec.label:50s} plan {p.index:2d} {p.name:22s} ws={p.workspace_bytes:8d} rel={['%.2e' % e for e in errs]}"
            )
