"""Storage: what was measured and built, on disk.

* `keys`: request keys (which fields make two workspace requests the same);
* `recordings`: the shipped recordings in data/recordings/ (read-only, one folder per GPU);
* `machine`: which machine this is (the identity every saved file is keyed by) and its one store per process;
* `frozen`: read-only dicts and lists for a table's attrs (pandas copies attrs on every operation);
* `localcache`: this GPU's own recording (a user cache; atomic, two writers, keyed by identity);
* `plan_store`: saved cuDNN execution plans beside it.

Never imports a session, a panel or the command line (tests/test_layers.py)."""
