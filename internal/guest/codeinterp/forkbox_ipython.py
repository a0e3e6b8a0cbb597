"""forkbox_ipython: the display behaviour of E2B's code interpreter, set up
in every IPython kernel at start (by startup.py, through
IPKernelApp.exec_files): a pandas DataFrame's "e2b/data", a matplotlib
figure's "e2b/chart", and PIL images that are shown or saved to a path
coming back as png."""

import importlib.util
import os
import sys


def setup(ip, here):
    """Registers the formatters on IPython shell ip; here is the directory
    holding forkbox_charts.py."""
    from IPython.core.formatters import BaseFormatter
    from traitlets import ObjectName, Unicode

    # Nothing heavy is imported here: matplotlib, pandas and PIL are only
    # looked at once the user's code has imported them.
    def charts():
        mod = sys.modules.get("forkbox_charts")
        if mod is None:
            spec = importlib.util.spec_from_file_location("forkbox_charts", os.path.join(here, "forkbox_charts.py"))
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
            sys.modules["forkbox_charts"] = mod
        return mod

    def _plain(v, pandas):
        # Timestamps in ISO form (as E2B); NaN/NaT as null, so the data is
        # strict JSON a JavaScript client can parse.
        if isinstance(v, pandas.Timestamp):
            return v.isoformat()
        try:
            if pandas.isna(v):
                return None
        except (TypeError, ValueError):
            pass
        return v

    class DataFormatter(BaseFormatter):
        format_type = Unicode("e2b/data")
        print_method = ObjectName("_repr_e2b_data_")
        _return_type = (dict, str)

        def __call__(self, obj):
            # Only a DataFrame has data, and one can exist only if pandas
            # was imported: never import it here.
            pandas = sys.modules.get("pandas")
            if pandas is None or not isinstance(obj, pandas.DataFrame):
                return super().__call__(obj)
            out = obj.to_dict(orient="list")
            for key, values in out.items():
                out[key] = [_plain(v, pandas) for v in values]
            return out

    class ChartFormatter(BaseFormatter):
        format_type = Unicode("e2b/chart")
        print_method = ObjectName("_repr_e2b_chart_")
        _return_type = (dict, str)

        def __call__(self, obj):
            if "matplotlib" not in sys.modules:
                return super().__call__(obj)
            from matplotlib.figure import Figure

            if not isinstance(obj, Figure):
                return super().__call__(obj)
            try:
                return charts().chart_figure_to_dict(obj)
            except Exception:  # a chart we cannot read still shows its png
                return {}

    formatters = ip.display_formatter.formatters
    formatters["e2b/data"] = DataFormatter(parent=ip.display_formatter)
    formatters["e2b/chart"] = ChartFormatter(parent=ip.display_formatter)

    sys.meta_path.insert(0, _PILHook())


class _PILHook:
    """Patches PIL.Image when the user's code first imports it: Image.show()
    has no screen to open, so it displays the image, and Image.save() to a
    path displays it too (as in E2B's interpreter)."""

    def find_spec(self, name, path=None, target=None):
        if name != "PIL.Image":
            return None
        import sys
        import importlib.util

        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return spec
        loader = spec.loader
        hook = self

        class Loader:
            def create_module(self, spec):
                return loader.create_module(spec)

            def exec_module(self, module):
                loader.exec_module(module)
                if hook in sys.meta_path:
                    sys.meta_path.remove(hook)
                _patch_pil(module)

        spec.loader = Loader()
        return spec


def _patch_pil(image_module):
    import os

    from IPython.display import display

    Image = image_module.Image
    original_save = Image.save

    def show(image, title=None):
        display(image)

    def save(image, fp, format=None, **params):
        if isinstance(fp, (str, os.PathLike)):
            display(image)
        return original_save(image, fp, format, **params)

    Image.show = show
    Image.save = save
