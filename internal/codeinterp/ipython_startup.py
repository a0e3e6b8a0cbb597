# forkbox: run once in every IPython kernel at start (IPKernelApp.exec_files).
# It adds the display behaviour E2B's code interpreter has: a pandas
# DataFrame's "e2b/data", a matplotlib figure's "e2b/chart", and PIL images
# that are shown or saved to a path coming back as png. Everything is
# defined inside a function so the user's namespace stays clean.


def __forkbox_setup(startup_file):
    import importlib.util
    import os
    import sys

    import IPython
    from IPython.core.formatters import BaseFormatter
    from traitlets import ObjectName, Unicode

    here = os.path.dirname(os.path.abspath(startup_file))
    spec = importlib.util.spec_from_file_location("forkbox_charts", os.path.join(here, "forkbox_charts.py"))
    charts = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(charts)
    sys.modules["forkbox_charts"] = charts

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
                return charts.chart_figure_to_dict(obj)
            except Exception:  # a chart we cannot read still shows its png
                return {}

    ip = IPython.get_ipython()
    formatters = ip.display_formatter.formatters
    formatters["e2b/data"] = DataFormatter(parent=ip.display_formatter)
    formatters["e2b/chart"] = ChartFormatter(parent=ip.display_formatter)

    try:
        from PIL.Image import Image
        from PIL.ImageShow import UnixViewer
    except ImportError:
        return
    from IPython.display import display

    # Image.show() has no screen to open: display the image instead.
    def show_file(self, path, **options):
        return 0

    UnixViewer.show_file = show_file
    original_show = Image.show
    original_save = Image.save

    def show(image, title=None):
        display(image)

    def save(image, fp, format=None, **params):
        if isinstance(fp, (str, os.PathLike)):
            display(image)
        return original_save(image, fp, format, **params)

    Image.show = show
    Image.save = save
    Image._forkbox_original = (original_show, original_save)


__forkbox_setup(__file__)
del __forkbox_setup
