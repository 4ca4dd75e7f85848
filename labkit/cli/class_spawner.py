"""The class hub's login and spawner: who may log in, and (as root) one Unix account per learner.

JupyterHub imports these by name (``c.JupyterHub.authenticator_class``, ``spawner_class``) from
`labkit.cli.classroom.configure`; nothing else imports this module, so labkit runs without
JupyterHub installed.

* `LearnerAuthenticator`: a learner picks a password at their first login (JupyterHub's
  FirstUseAuthenticator); only the names in the class's learners.txt (read again at every login, so
  a name added during class works at once) and the admins may log in, unless the teacher opened
  the hub to anyone (``LABKIT_CLASS_OPEN=anyone``).
* `LearnerSpawner` (the hub runs as root): learner ``ada``'s server runs as the Unix account
  ``<prefix>ada`` (``jupyter-ada`` by default), which the hub makes at ada's first start with a
  private home (mode 0700) and no password: learners cannot read each other's work.
"""

from __future__ import annotations

import os
import pwd
import subprocess
from pathlib import Path

from firstuseauthenticator import FirstUseAuthenticator
from jupyterhub.spawner import LocalProcessSpawner, set_user_setuid
from traitlets import Unicode

from .class_settings import BadSettings, allowed


class LearnerAuthenticator(FirstUseAuthenticator):
    """FirstUseAuthenticator that lets in the names listed in the class's learners.txt now."""

    class_folder = Unicode("", help="the class folder, whose learners.txt lists who may log in").tag(
        config=True
    )

    def check_allowed(self, username, authentication=None):
        """Whether ``username`` may log in: an admin, or listed in learners.txt at this moment.

        Args:
            username: the normalised name.
            authentication: JupyterHub's authentication model (unused).

        Returns:
            True to let them in.
        """
        if self.allow_all or username in self.admin_users:
            return True
        try:
            names = allowed(Path(self.class_folder)) or []
        except BadSettings as exc:
            self.log.error("labkit class: learners.txt: %s", "; ".join(exc.lines))
            return False
        return username in names


def ensure_account(account: str, home: Path) -> pwd.struct_passwd:
    """The Unix account a learner's server runs as, made when missing.

    Args:
        account: its name (the class's prefix and the learner's name).
        home: its home folder (made with mode 0700: no other learner can read it).

    Returns:
        Its password-file entry.
    """
    try:
        entry = pwd.getpwnam(account)
    except KeyError:
        home.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            ["useradd", "--create-home", "--home-dir", str(home), "--shell", "/bin/bash", "--user-group",
             "--comment", "labkit class learner", account],
            check=True, capture_output=True, text=True,
        )  # fmt: skip
        entry = pwd.getpwnam(account)
    os.chmod(entry.pw_dir, 0o700)
    return entry


class LearnerSpawner(LocalProcessSpawner):
    """LocalProcessSpawner that runs each learner as an account of their own, made by the hub."""

    account_prefix = Unicode("jupyter-", help="learner ada runs as the Unix account <prefix>ada").tag(
        config=True
    )
    homes = Unicode("/home", help="where the learners' accounts get their homes").tag(config=True)

    @property
    def account(self) -> str:
        """The Unix account this learner's server runs as."""
        return self.account_prefix + self.user.name

    async def start(self):
        """Make the learner's account if needed, then start the server as it.

        Returns:
            The server's (ip, port).
        """
        try:
            ensure_account(self.account, Path(self.homes) / self.account)
        except subprocess.CalledProcessError as exc:
            raise RuntimeError(f"labkit class: useradd {self.account} failed: {exc.stderr.strip()}") from exc
        return await super().start()

    def make_preexec_fn(self, name):
        """Run the server as the learner's account (not the hub's name for them).

        Args:
            name: the hub's name for the learner (unused: the account is this spawner's).

        Returns:
            The function the server's process runs before it starts.
        """
        return set_user_setuid(self.account)

    def user_env(self, env):
        """The account's USER, HOME and SHELL for the server's environment.

        Args:
            env: the environment JupyterHub made.

        Returns:
            ``env``, updated.
        """
        entry = pwd.getpwnam(self.account)
        env.update(USER=self.account, HOME=entry.pw_dir, SHELL=entry.pw_shell or "/bin/bash")
        return env
