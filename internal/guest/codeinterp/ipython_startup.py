# forkbox: run in every IPython kernel at start (IPKernelApp.exec_files), in
# the user's namespace, so it only loads forkbox_ipython.py from its own
# directory and leaves no name behind.


def __forkbox_setup(startup_file):
    import importlib.util
    import os
    import sys

    here = os.path.dirname(os.path.abspath(startup_file))
    spec = importlib.util.spec_from_file_location("forkbox_ipython", os.path.join(here, "forkbox_ipython.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    sys.modules["forkbox_ipython"] = mod
    mod.setup(get_ipython(), here)  # noqa: F821 (IPython's builtin)


__forkbox_setup(__file__)
del __forkbox_setup
