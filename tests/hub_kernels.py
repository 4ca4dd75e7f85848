"""Run a notebook's code cells in a kernel of a Jupyter server reached through a URL (a learner's
server behind JupyterHub's proxy): the server's REST API starts and deletes the kernel, its
websocket (``/api/kernels/<id>/channels``) carries the Jupyter messages. Used by
tests/test_class_hub.py."""

from __future__ import annotations

import json
import time
import uuid
from typing import Dict, List

import requests
import websocket


class RemoteKernel:
    """One kernel on the server at ``base`` (e.g. ``http://127.0.0.1:8000/user/ada/``), reached
    with ``token`` (the learner's API token)."""

    def __init__(self, base: str, token: str, *, timeout_s: float = 120.0):
        self.base = base.rstrip("/") + "/"
        self.headers = {"Authorization": f"token {token}"}
        self.timeout_s = timeout_s
        self.session = uuid.uuid4().hex
        r = requests.post(
            self.base + "api/kernels", json={"name": "python3"}, headers=self.headers, timeout=60
        )
        r.raise_for_status()
        self.id = r.json()["id"]
        ws_url = self.base.replace("http", "ws", 1) + f"api/kernels/{self.id}/channels"
        self.ws = websocket.create_connection(
            ws_url, header=[f"{k}: {v}" for k, v in self.headers.items()], timeout=timeout_s
        )

    def execute(self, code: str) -> Dict[str, object]:
        """Run ``code``; returns ``status`` (``ok``/``error``), ``outputs`` (the iopub outputs:
        stream text, display data, errors) and ``seconds``."""
        msg_id = uuid.uuid4().hex
        self.ws.send(
            json.dumps(
                {
                    "header": {
                        "msg_id": msg_id,
                        "msg_type": "execute_request",
                        "session": self.session,
                        "username": "test",
                        "version": "5.3",
                        "date": "",
                    },
                    "parent_header": {},
                    "metadata": {},
                    "content": {"code": code, "silent": False, "store_history": True, "allow_stdin": False},
                    "channel": "shell",
                    "buffers": [],
                }
            )
        )
        t0 = time.monotonic()
        outputs: List[dict] = []
        status, idle = None, False
        while status is None or not idle:
            if time.monotonic() - t0 > self.timeout_s:
                raise TimeoutError(f"cell did not finish in {self.timeout_s:.0f} s: {code[:80]!r}")
            raw = self.ws.recv()
            if not isinstance(raw, str):
                continue  # a binary frame (widget buffers): nothing this check reads
            msg = json.loads(raw)
            if msg.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            kind = msg["header"]["msg_type"]
            if msg["channel"] == "shell" and kind == "execute_reply":
                status = msg["content"]["status"]
            elif kind == "status" and msg["content"]["execution_state"] == "idle":
                idle = True
            elif kind in ("stream", "display_data", "execute_result", "error"):
                outputs.append(dict(msg["content"], output_type=kind))
        return dict(status=status, outputs=outputs, seconds=time.monotonic() - t0)

    def close(self, *, delete: bool = True) -> None:
        """Close the websocket; ``delete``: shut the kernel down too."""
        try:
            self.ws.close()
        finally:
            if delete:
                requests.delete(self.base + f"api/kernels/{self.id}", headers=self.headers, timeout=30)


def text_of(outputs: List[dict]) -> str:
    """Every stream's text and every display's ``text/plain``/``text/markdown`` joined."""
    parts = []
    for o in outputs:
        if o["output_type"] == "stream":
            parts.append(o["text"])
        elif o["output_type"] in ("display_data", "execute_result"):
            data = o.get("data", {})
            parts.append(data.get("text/markdown") or data.get("text/plain") or "")
        elif o["output_type"] == "error":
            parts.append(f"{o['ename']}: {o['evalue']}")
    return "".join(parts)
