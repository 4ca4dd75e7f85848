"""JupyterHub for a class on the cuDNN workspace workbook: `make hub` (``python -m labkit class
start``) checks everything, then starts it (class/README.md).

Every setting has a default; change one with its environment variable, or with
``c.LabkitClass.<name> = ...`` in a configuration of your own that loads this one after it
(``load_subconfig("class/jupyterhub_config.py")``). Every value is checked as the hub starts: a
mistake is one line naming it, and the hub exits with status 2.

    LABKIT_CLASS_DIR             /srv/labkit-class  the class folder: the shared recording
                                                    (`python -m labkit fill --into` it), the hub's
                                                    files, the GPU locks, learners.txt
    LABKIT_CLASS_OPEN            no                 no: only learners.txt's names (and the admins) log
                                                    in; anyone: whoever reaches the hub makes an account
    LABKIT_CLASS_ADMINS          ""                 hub administrators: "teacher"
    LABKIT_CLASS_IP              (every interface)  the address the hub listens on
    LABKIT_CLASS_PORT            8000               its port (the next two: its API and its proxy's,
                                                    on 127.0.0.1)
    LABKIT_CLASS_TLS_CERT/_KEY   ""                 HTTPS: a certificate and its key (PEM files)
    LABKIT_CLASS_IDLE_SECONDS    1800               stop a server idle this long (its GPU goes back); 0: never
    LABKIT_CLASS_PINS            ""                 learners who always get one GPU: "ada=0,alan=3"
    LABKIT_CLASS_RESERVED        ""                 GPUs only pinned learners get: "7"
    as root only:
    LABKIT_CLASS_ACCOUNT_PREFIX  jupyter-           learner ada runs as the Unix account jupyter-ada
    LABKIT_CLASS_HOMES           /home              where those accounts' private homes go
    LABKIT_CLASS_ENV             /opt/labkit-class  where the learner environment is built when
                                                    learners cannot run this checkout's Python
    LABKIT_CLASS_PYTHON          (decided at start) the interpreter learners' servers run

What it sets up is described in labkit/cli/classroom.py (`labkit.cli.classroom.configure`).
"""

from labkit.cli import classroom

c = get_config()  # noqa: F821  (JupyterHub defines get_config for its configuration files)
classroom.configure(c)
