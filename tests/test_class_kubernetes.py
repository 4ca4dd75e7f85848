"""A class on Kubernetes without a cluster: the shipped Zero to JupyterHub values
(``class/kubernetes/values.yaml``) pass the chart's schema, are merged over the chart's defaults as
helm merges them, and the chart's own hub configuration (chart 4.4.0, tests/data/z2jh) turns them
into KubeSpawner's settings; KubeSpawner then makes the pod a learner would get for each GPU kind
of the profile list. The pod is checked: the image and command, one GPU (``nvidia.com/gpu``), the
node it asks for, the home volume and the class's recording mounted read-only, the environment,
the user it runs as. The fill job and the recording's claim agree with the values. The image's
Dockerfile is built where a docker engine answers (skipped, with the reason, elsewhere).
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import shlex
import shutil
import subprocess
import sys
import types
from collections.abc import Mapping
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
KUBE = ROOT / "class" / "kubernetes"
CHART = ROOT / "tests" / "data" / "z2jh"


def _needed(module: str, *, load: bool = True):
    """``module`` imported (``load``), or only found installed; a skip of this file when it is not."""
    try:
        if load:
            return __import__(module)
        if importlib.util.find_spec(module) is None:
            raise ImportError(f"No module named {module!r}")
    except ImportError:
        if os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no"):
            raise  # the test extra installs it: in CI a missing one fails
        pytest.skip(f"{module} is not installed (the test extra has it: make setup)", allow_module_level=True)


yaml = _needed("yaml")
jsonschema = _needed("jsonschema")
# found here, imported by `pod_for` (its import takes a second and a half of every test process's
# collection; an install that is there but broken fails the tests that make a pod)
_needed("kubespawner", load=False)
from traitlets.config import Config  # noqa: E402

from labkit.cli import classroom  # noqa: E402
from labkit.cli.main import parser  # noqa: E402


def helm_merge(defaults: dict, values: dict) -> dict:
    """Values over a chart's defaults as helm merges them: maps key by key, anything else replaced,
    a null removing the default."""
    out = dict(defaults)
    for key, value in values.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = helm_merge(out[key], value)
        else:
            out[key] = value
    return out


def load(path: Path):
    return yaml.safe_load(path.read_text())


def chart_values() -> dict:
    return helm_merge(load(CHART / "values.yaml"), load(KUBE / "values.yaml"))


def fake_z2jh(values: dict) -> types.ModuleType:
    """The chart's helper module (files/hub/z2jh.py), reading the merged values instead of the
    hub pod's mounted secret; names and ports as the chart's services would have them."""
    z2jh = types.ModuleType("z2jh")
    tree = {
        **values,
        "Chart": {"Name": "jupyterhub", "Version": "4.4.0"},
        "Release": {"Name": "labkit-class"},
    }

    def get_config(key, default=None):
        value = tree
        for level in key.split("."):
            if not isinstance(value, dict) or level not in value:
                return default
            value = value[level]
        return value

    def set_config_if_not_none(cparent, name, key):
        data = get_config(key)
        if data is not None:
            setattr(cparent, name, data)

    secrets = {"hub.config.JupyterHub.cookie_secret": "00" * 32, "hub.config.CryptKeeper.keys": "11" * 32}
    z2jh.get_config = get_config
    z2jh.set_config_if_not_none = set_config_if_not_none
    z2jh.get_name = lambda name: name
    z2jh.get_name_env = lambda name, suffix="": {"proxy-api": "8001", "hub": "8081"}[name]
    z2jh.get_secret_value = lambda key, default=None: secrets.get(key, default)
    return z2jh


#: a cluster KubeSpawner is told of and never reaches (making a pod's manifest asks it nothing)
KUBECONFIG = """
apiVersion: v1
kind: Config
clusters: [{name: none, cluster: {server: "https://127.0.0.1:9"}}]
users: [{name: none, user: {token: none}}]
contexts: [{name: none, context: {cluster: none, user: none}}]
current-context: none
"""


@pytest.fixture
def hub_config(monkeypatch, tmp_path) -> Config:
    """JupyterHub's config as the chart's hub pod builds it from the shipped values."""
    from tornado.httpclient import AsyncHTTPClient

    (tmp_path / "kubeconfig").write_text(KUBECONFIG)
    from kubernetes_asyncio.config import kube_config

    monkeypatch.setattr(kube_config, "KUBE_CONFIG_DEFAULT_LOCATION", str(tmp_path / "kubeconfig"))

    monkeypatch.setitem(sys.modules, "z2jh", fake_z2jh(chart_values()))
    monkeypatch.setattr(sys, "path", list(sys.path))  # the chart's file puts its folder first
    # the chart's hub image has pycurl for this; the pod's manifest does not depend on it
    monkeypatch.setattr(AsyncHTTPClient, "configure", classmethod(lambda cls, *a, **k: None))
    c = Config()
    source = CHART / "jupyterhub_config.py.txt"
    code = compile(source.read_text(), str(source), "exec")
    exec(code, {"get_config": lambda: c, "__file__": str(source), "__name__": "__main__"})
    return c


def pod_for(c: Config, profile: str, name: str = "ada"):
    """The pod KubeSpawner makes for learner ``name`` who picked ``profile`` (no cluster asked)."""
    from kubernetes_asyncio.client import ApiClient  # heavy: kubespawner's API client (a second)
    from kubespawner import KubeSpawner  # heavy: KubeSpawner and JupyterHub's spawner, as above

    user = types.SimpleNamespace(name=name, id=7, url=f"/user/{name}/", escaped_name=name)

    async def make():
        spawner = KubeSpawner(config=c, user=user, _mock=True)  # its API client wants a running loop
        spawner.user_options = {"profile": profile}
        await spawner.load_user_options()
        pod = await spawner.get_pod_manifest()
        async with ApiClient() as api:
            return spawner, api.sanitize_for_serialization(pod)  # the manifest as sent to the cluster

    return asyncio.run(make())


def test_the_values_pass_the_charts_schema():
    schema = load(CHART / "values.schema.yaml")
    jsonschema.validate(chart_values(), schema)
    broken = helm_merge(chart_values(), {"singleuser": {"storage": {"extraVolumeMount": []}}})  # a typo
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, schema)


def test_the_hub_lets_nobody_in_until_named_and_culls_idle_servers(hub_config):
    c = hub_config
    assert c.JupyterHub.authenticator_class == "firstuseauthenticator"
    assert c.Authenticator.allow_all is False and c.Authenticator.allow_existing_users is False
    assert c.Authenticator.allowed_users == [] and c.Authenticator.username_pattern == classroom.NAME.pattern
    (culler,) = [s for s in c.JupyterHub.services if s["name"] == "jupyterhub-idle-culler"]
    assert "--timeout=1800" in culler["command"] and "jupyterhub_idle_culler" in culler["command"]
    assert c.JupyterHub.spawner_class == "kubespawner.KubeSpawner"


@pytest.mark.parametrize(
    "profile, gpus, product",
    [("h100", "1", "NVIDIA-H100-80GB-HBM3"), ("h200", "1", "NVIDIA-H200"), ("recorded", None, None)],
)
def test_the_pod_a_learner_gets(hub_config, profile, gpus, product):
    values = chart_values()["singleuser"]
    spawner, pod = pod_for(hub_config, profile)
    spec = pod["spec"]
    (box,) = [k for k in spec["containers"] if k["name"] == "notebook"]
    # the workbook's image, started by labkit's learner command
    assert box["image"] == f"{values['image']['name']}:{values['image']['tag']}"
    assert box["args"][:5] == ["python", "-m", "labkit", "class", "server"]
    assert parser().parse_args(["class", "server"]).class_command == "server"
    # one GPU of the kind picked, on a node that has it; none for recorded mode
    assert box["resources"].get("limits", {}).get("nvidia.com/gpu") == gpus
    assert spec.get("nodeSelector", {}).get("nvidia.com/gpu.product") == product
    tolerations = [(x["key"], x["operator"], x["effect"]) for x in spec["tolerations"]]
    assert ("nvidia.com/gpu", "Exists", "NoSchedule") in tolerations, tolerations
    # the learner's home on their own claim; the class's recording read-only
    mounts = {m["mountPath"]: m for m in box["volumeMounts"]}
    volumes = {v["name"]: v for v in spec["volumes"]}
    home = mounts["/home/jovyan"]
    assert volumes[home["name"]]["persistentVolumeClaim"]["claimName"] == spawner.pvc_name == "claim-ada"
    recording = mounts["/srv/labkit-class"]
    assert recording["readOnly"] is True
    claim = volumes[recording["name"]]["persistentVolumeClaim"]
    assert claim == {"claimName": "labkit-class-recording", "readOnly": True}
    # the environment labkit reads; the hub's own variables beside it
    env = {e["name"]: e.get("value") for e in box["env"]}
    assert env["LABKIT_SHARED_CACHE"] == "/srv/labkit-class"
    assert env["LABKIT_CLASS_LESSONS"] == "/home/jovyan/labkit-lessons"
    assert (
        env["JUPYTERHUB_USER"] == "ada" and env["JUPYTERHUB_DEFAULT_URL"] == "/lab/tree/00_start_here.ipynb"
    )
    # run as the image's learner account, never root, no way up
    assert box["securityContext"]["runAsUser"] == 1000 and spec["securityContext"]["fsGroup"] == 100
    assert box["securityContext"]["allowPrivilegeEscalation"] is False


def test_the_fill_job_writes_the_claim_the_pods_read():
    claim, job = load(KUBE / "recording-pvc.yaml"), load(KUBE / "fill-job.yaml")
    values = load(KUBE / "values.yaml")["singleuser"]
    (volume,) = values["storage"]["extraVolumes"]
    assert claim["kind"] == "PersistentVolumeClaim" and "ReadWriteMany" in claim["spec"]["accessModes"]
    assert volume["persistentVolumeClaim"]["claimName"] == claim["metadata"]["name"]
    spec = job["spec"]["template"]["spec"]
    (box,) = spec["containers"]
    assert spec["volumes"][0]["persistentVolumeClaim"]["claimName"] == claim["metadata"]["name"]
    assert box["volumeMounts"][0]["mountPath"] == values["extraEnv"]["LABKIT_SHARED_CACHE"]
    assert "readOnly" not in box["volumeMounts"][0]  # the job writes it
    assert box["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert box["command"][:3] == ["python", "-m", "labkit"]
    args = parser().parse_args(box["command"][3:])
    assert args.command == "fill" and args.into == values["extraEnv"]["LABKIT_SHARED_CACHE"]
    assert box["image"].split(":")[0] == values["image"]["name"]
    assert spec["nodeSelector"] == values["profileList"][0]["kubespawner_override"]["node_selector"]


def test_the_readme_installs_the_chart_version_the_test_reads():
    readme = (KUBE / "README.md").read_text()
    assert "--version 4.4.0" in readme and "4.4.0" in (CHART / "README.md").read_text()
    for line in map(str.strip, readme.splitlines()):
        if line.startswith(("docker build", "kubectl", "sed", "helm upgrade")):
            for word in shlex.split(line.split(" #")[0]):
                if word.startswith("class/"):
                    assert (ROOT / word).exists(), line


def _docker_answers() -> bool:
    if not shutil.which("docker"):
        return False
    try:
        return subprocess.run(["docker", "info"], capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


@pytest.mark.skipif(not _docker_answers(), reason="no docker engine answers here: the image is not built")
def test_the_image_builds_and_holds_the_workbook():
    tag = "labkit-class-test:latest"
    built = subprocess.run(
        ["docker", "build", "-f", str(KUBE / "Dockerfile"), "--build-arg", "EXTRAS=", "-t", tag, str(ROOT)],
        capture_output=True, text=True, timeout=1800,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr[-3000:]
    try:
        probe = "import labkit.cli.classroom as c, jupyterhub; print(c.ROOT, jupyterhub.__version__)"
        ran = subprocess.run(
            ["docker", "run", "--rm", tag, "python", "-c", probe], capture_output=True, text=True, timeout=300
        )
        assert ran.returncode == 0 and ran.stdout.split()[0] == "/opt/labkit", ran.stderr
        assert ran.stdout.split()[1].startswith("5.5."), ran.stdout
    finally:
        subprocess.run(["docker", "rmi", "-f", tag], capture_output=True)
