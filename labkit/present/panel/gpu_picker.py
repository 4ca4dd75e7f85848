"""Which GPU answers a panel: this GPU, live, or a shipped recording (the panel's "GPU" dropdown).
No widget here: the choices and what a choice means."""

from __future__ import annotations

from typing import List, Optional, Tuple

from ... import env
from ...env import gpu_label
from ...errors import InvalidSpec
from ...store import recordings


class GPUPicker:
    """Which GPU answers a panel: this GPU live, or a shipped recording.

    Args:
        can_measure: whether this machine can measure live.
        gpu: a shipped recording's name (``name``); None for this GPU live, or recorded mode's
            default recording for the experiment. `InvalidSpec` names the recordings.
    """

    def __init__(self, can_measure: bool, gpu: Optional[str] = None):
        self.can_measure = can_measure
        self.name: Optional[str] = (
            recordings.named(gpu).name if gpu is not None else None
        )  # InvalidSpec names them

    @property
    def live(self) -> bool:
        """The panel measures on this GPU now."""
        return self.can_measure and self.name is None

    def options(self, experiment: str) -> List[Tuple[str, str]]:
        """The dropdown's (label, value) pairs.

        Args:
            experiment: the panel's experiment.

        Returns:
            Live, "this GPU" first (value ""); then every shipped recording that has ``experiment``, the
            default one first.
        """
        opts = []
        if self.can_measure:
            opts.append((f"this GPU, live ({gpu_label(env.environment().gpu_name)})", ""))
        for r in recordings.shipped():
            m = r.metadata
            if experiment not in (m.get("experiments") or {}):
                continue  # nothing to draw from that GPU for this panel
            quick = "" if m.get("complete", True) else ", quick: base calls"
            when = r.provenance(experiment)["date"]  # this chart's measurement, as its subtitle says
            opts.append((f"{gpu_label(m.get('gpu'))} (recorded {when}{quick})", r.name))
        return opts

    def value(self, experiment: str) -> str:
        """The dropdown's value now.

        Args:
            experiment: the panel's experiment.

        Returns:
            The recording's name; "" for this GPU live.
        """
        return self.name or ("" if self.can_measure else self.recording(experiment).name)

    def recording(self, experiment: str) -> Optional[recordings.Recording]:
        """The recording that answers an experiment.

        Args:
            experiment: the experiment.

        Returns:
            The `Recording`; None live on this GPU.
        """
        if self.live:
            return None
        return recordings.named(self.name) if self.name else recordings.for_experiment(experiment)

    def pick(self, experiment: str, recording: Optional[str]) -> bool:
        """Answer an experiment from a shipped recording, or from this GPU live.

        Args:
            experiment: the panel's experiment.
            recording: a shipped recording's name (e.g. ``"h200"``); None for this GPU live (recorded
                mode: the default recording).

        Returns:
            True when that changed the answer; `InvalidSpec` for a recording without ``experiment``.
        """
        picked = recordings.named(recording) if recording else None
        name = picked.name if picked else None
        if picked is not None and experiment not in (picked.metadata.get("experiments") or {}):
            offers = ", ".join(v or "this GPU" for _, v in self.options(experiment))
            raise InvalidSpec(
                "gpu", recording, f"that recording has no {experiment!r}; this panel offers {offers}"
            )
        if not self.can_measure and name is None:
            name = recordings.for_experiment(experiment).name
        if name == self.name:
            return False
        self.name = name
        return True
