"""JupyterHub for a class on the cuDNN workspace workbook: `make hub` starts it (class/README.md).

Every setting has a default; change one with its environment variable, or with
``c.LabkitClass.<name> = ...`` in a configuration of your own that loads this one after it
(``load_subconfig("class/jupyterhub_config.py")``):

    LABKIT_CLASS_DIR       /srv/labkit-class   the class folder: the shared recording
                                               (`python -m labkit fill --into` it), the hub's files,
                                               the GPU locks, learners.txt (who may log in)
    LABKIT_CLASS_IP        (every interface)   the address the hub listens on
    LABKIT_CLASS_PORT      8000                its port
    LABKIT_CLASS_PINS      ""                  learners who always get one GPU: "ada=0,alan=3"
    LABKIT_CLASS_RESERVED  ""                  GPUs only pinned learners get: "7"
    LABKIT_CLASS_ADMINS    ""                  hub administrators: "teacher"

What it sets up is described in labkit/cli/classroom.py (`labkit.cli.classroom.configure`).
"""

from labkit.cli import classroom

c = get_config()  # noqa: F821  (JupyterHub defines get_config for its configuration files)
classroom.configure(c)
