"""forkbox code-interpreter worker: one long-lived Python process per context.

The Go side talks to this process over its original stdin/stdout with one JSON
object per line. At start the worker moves those two descriptors out of the
way and points fds 0, 1 and 2 at /dev/null and at pipes it reads itself, so
neither the user's prints nor a subprocess's output can corrupt the protocol.

Requests (Go -> worker):
  {"type": "execute", "id": N, "code": "...", "env_vars": {...}, "base_env": {...}}
Events (worker -> Go), all but the last in the E2B wire format:
  {"type": "ready"}                        once, after start-up
  {"type": "number_of_executions", "execution_count": N}
  {"type": "stdout"|"stderr", "text": "...", "timestamp": "..."}
  {"type": "result", "text": ..., "html": ..., "png": ..., "is_main_result": bool}
  {"type": "error", "name": ..., "value": ..., "traceback": ...}
  {"type": "done", "id": N}                the request is finished
"""

import ast
import asyncio
import base64
import codecs
import datetime
import importlib.abc
import importlib.util
import inspect
import io
import json
import linecache
import math
import os
import signal
import sys
import threading
import time
import traceback

_WORKER_FILE = os.path.abspath(__file__)
_FLUSH_INTERVAL = 0.1


def _now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class Channel:
    """Writes protocol events, one JSON line each, to the Go side."""

    def __init__(self, fd):
        self.fd = fd
        self.lock = threading.Lock()
        # An interrupt that arrives while the main thread is mid-line is
        # deferred until the line is complete, so no event is ever torn.
        self.main_busy = False
        self.interrupt_pending = False

    def send(self, event):
        data = (json.dumps(_sanitize(event), ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8", "replace")
        main = threading.current_thread() is threading.main_thread()
        if main:
            self.main_busy = True
        try:
            with self.lock:
                view = memoryview(data)
                while view:
                    n = os.write(self.fd, view)
                    view = view[n:]
        finally:
            if main:
                self.main_busy = False
        if main and self.interrupt_pending:
            self.interrupt_pending = False
            raise KeyboardInterrupt


def _sanitize(value):
    """Makes value strict-JSON: NaN and infinities become None, numpy and
    other foreign scalars become plain Python values."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): _sanitize(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_sanitize(v) for v in value]
    if value is None or isinstance(value, (str, int, bool)):
        return value
    item = getattr(value, "item", None)
    if callable(item):
        try:
            return _sanitize(item())
        except Exception:
            pass
    return str(value)


class EventStream(io.TextIOBase):
    """sys.stdout/sys.stderr replacement: complete lines are sent at once,
    a trailing partial line after _FLUSH_INTERVAL or on flush()."""

    def __init__(self, channel, name):
        super().__init__()
        self.channel = channel
        self.name = name
        self.buf = []
        self.lock = threading.RLock()

    @property
    def encoding(self):
        return "utf-8"

    def writable(self):
        return True

    def isatty(self):
        return False

    def fileno(self):
        return 1 if self.name == "stdout" else 2

    def write(self, s):
        if not isinstance(s, str):
            raise TypeError("write() argument must be str, not %s" % type(s).__name__)
        with self.lock:
            self.buf.append(s)
            if "\n" in s:
                text = "".join(self.buf)
                cut = text.rindex("\n") + 1
                self.buf = [text[cut:]] if cut < len(text) else []
                self.channel.send({"type": self.name, "text": text[:cut], "timestamp": _now()})
        return len(s)

    def flush(self):
        with self.lock:
            text = "".join(self.buf)
            self.buf = []
            if text:
                self.channel.send({"type": self.name, "text": text, "timestamp": _now()})


class FdCapture:
    """Reads what subprocesses and C code write to fd 1 or fd 2 and forwards
    it as stream events. sync() makes sure everything written before it was
    forwarded, using a marker written through the pipe itself."""

    def __init__(self, fd, stream):
        self.stream = stream
        self.marker = ("\x00fbsync%s\x00" % os.urandom(8).hex()).encode()
        self.synced = threading.Event()
        r, w = os.pipe()
        os.dup2(w, fd)
        os.close(w)
        self.fd = fd
        self.rfd = r
        threading.Thread(target=self._loop, daemon=True).start()

    def _loop(self):
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        pending = b""
        while True:
            try:
                chunk = os.read(self.rfd, 65536)
            except InterruptedError:
                continue
            if not chunk:
                return
            pending += chunk
            while True:
                idx = pending.find(self.marker)
                if idx < 0:
                    break
                self._forward(decoder.decode(pending[:idx]))
                self.stream.flush()
                pending = pending[idx + len(self.marker):]
                self.synced.set()
            keep = _partial_suffix(pending, self.marker)
            self._forward(decoder.decode(pending[: len(pending) - keep]))
            pending = pending[len(pending) - keep:]

    def _forward(self, text):
        if text:
            self.stream.write(text)

    def sync(self, timeout=2.0):
        self.synced.clear()
        try:
            os.write(self.fd, self.marker)
        except OSError:
            return  # the cell closed or replaced the descriptor
        self.synced.wait(timeout)


def _partial_suffix(data, marker):
    """Length of the longest suffix of data that is a proper prefix of marker."""
    for n in range(min(len(data), len(marker) - 1), 0, -1):
        if data.endswith(marker[:n]):
            return n
    return 0


# --- Formatting -----------------------------------------------------------

_TEXT_MIMES = {
    "text/html": "html",
    "text/markdown": "markdown",
    "image/svg+xml": "svg",
    "text/latex": "latex",
    "application/javascript": "javascript",
}
_BINARY_MIMES = {"image/png": "png", "image/jpeg": "jpeg", "application/pdf": "pdf"}
_REPR_METHODS = [
    ("_repr_html_", "html"),
    ("_repr_markdown_", "markdown"),
    ("_repr_svg_", "svg"),
    ("_repr_png_", "png"),
    ("_repr_jpeg_", "jpeg"),
    ("_repr_pdf_", "pdf"),
    ("_repr_latex_", "latex"),
    ("_repr_json_", "json"),
    ("_repr_javascript_", "javascript"),
]


def _unwrap(value):
    # _repr_*_ methods may return (data, metadata).
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[1], dict):
        return value[0]
    return value


def _encode(field, value):
    """Converts a representation to its wire form, or None to drop it."""
    value = _unwrap(value)
    if value is None:
        return None
    if field in ("png", "jpeg", "pdf"):
        if isinstance(value, str):
            return value  # already base64, as IPython allows
        return base64.b64encode(bytes(value)).decode("ascii")
    if field == "json":
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except ValueError:
                return None
        return _sanitize(value)
    return value if isinstance(value, str) else str(value)


def plain_text(obj):
    """repr(obj) as E2B reports it: a quoted string loses its quotes."""
    text = repr(obj)
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        text = text[1:-1]
    return text


def _figure_png(fig):
    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight")
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _is_figure(obj):
    mpl_figure = sys.modules.get("matplotlib.figure")
    return mpl_figure is not None and isinstance(obj, mpl_figure.Figure)


def _dataframe_data(obj):
    pandas = sys.modules.get("pandas")
    if pandas is None or not isinstance(obj, pandas.DataFrame):
        return None
    data = obj.to_dict(orient="list")
    for key, column in data.items():
        data[key] = [v.isoformat() if isinstance(v, pandas.Timestamp) else v for v in column]
    return _sanitize(data)


def format_value(obj):
    """Returns the E2B result fields (without type) for obj."""
    out = {"text": plain_text(obj)}
    if _is_figure(obj):
        out["png"] = _figure_png(obj)
        return out
    bundle = getattr(obj, "_repr_mimebundle_", None)
    if callable(bundle) and not isinstance(obj, type):
        try:
            data = _unwrap(bundle(include=None, exclude=None)) or {}
            for mime, field in list(_TEXT_MIMES.items()) + list(_BINARY_MIMES.items()):
                if mime in data:
                    out[field] = _encode(field, data[mime])
            if "application/json" in data:
                out["json"] = _encode("json", data["application/json"])
        except Exception:
            pass
    for method, field in _REPR_METHODS:
        fn = getattr(obj, method, None)
        if field in out or not callable(fn) or isinstance(obj, type):
            continue
        try:
            value = _encode(field, fn())
        except Exception:
            value = None
        if value is not None:
            out[field] = value
    try:
        data = _dataframe_data(obj)
    except Exception:
        data = None
    if data is not None:
        out["data"] = data
    return {k: v for k, v in out.items() if v is not None}


# --- matplotlib -------------------------------------------------------------


class _PyplotHook(importlib.abc.MetaPathFinder):
    """Patches matplotlib.pyplot.show when pyplot is first imported, so that
    plt.show() sends the open figures instead of warning about Agg."""

    def __init__(self, kernel):
        self.kernel = kernel

    def find_spec(self, name, path=None, target=None):
        if name != "matplotlib.pyplot":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        original = spec.loader.exec_module
        kernel = self.kernel

        def show(*args, **kwargs):
            """Sends every open figure as a result and closes it."""
            kernel.show_figures()

        def exec_module(module):
            original(module)
            module.show = show

        spec.loader.exec_module = exec_module
        return spec


# --- Execution --------------------------------------------------------------


class Kernel:
    """Runs cells in one persistent namespace."""

    def __init__(self, channel, stdout, stderr):
        self.channel = channel
        self.stdout = stdout
        self.stderr = stderr
        self.count = 0
        self.ns = {"__name__": "__main__", "__builtins__": __builtins__, "display": self.display}
        self.in_user_code = False
        self.loop = None
        sys.meta_path.insert(0, _PyplotHook(self))

    def on_sigint(self, signum, frame):
        # Interrupts that arrive between cells (a race with the Go side) are
        # dropped instead of killing the protocol loop.
        if not self.in_user_code:
            return
        if self.channel.main_busy:
            self.channel.interrupt_pending = True
            return
        raise KeyboardInterrupt

    def emit_result(self, obj, main):
        self.flush_streams()
        event = {"type": "result"}
        event.update(format_value(obj))
        event["is_main_result"] = main
        self.channel.send(event)

    def display(self, *objs, **kwargs):
        """IPython-style display(): each object becomes a non-main result."""
        for obj in objs:
            self.emit_result(obj, False)

    def show_figures(self, *args, **kwargs):
        plt = sys.modules.get("matplotlib.pyplot")
        if plt is None:
            return
        for num in plt.get_fignums():
            fig = plt.figure(num)
            self.emit_result(fig, False)
        plt.close("all")

    def flush_streams(self):
        self.stdout.flush()
        self.stderr.flush()

    def report_error(self, exc):
        tb = exc.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename == _WORKER_FILE:
            tb = tb.tb_next
        if isinstance(exc, SyntaxError):
            lines = traceback.format_exception_only(type(exc), exc)
        else:
            lines = traceback.format_exception(type(exc), exc, tb)
        self.flush_streams()
        self.channel.send({
            "type": "error",
            "name": type(exc).__name__,
            "value": str(exc),
            "traceback": "".join(lines),
        })

    def run(self, code, filename):
        """Runs all statements; a final expression's value is the main result."""
        tree = ast.parse(code, filename, "exec")
        last = None
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            last = ast.Expression(tree.body.pop().value)
        linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
        flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
        self._run_code(compile(tree, filename, "exec", flags=flags))
        if last is None:
            return
        value = self._run_code(compile(last, filename, "eval", flags=flags))
        if value is None:
            return
        self.ns["_"] = value
        main_fig = _is_figure(value)
        self.emit_result(value, True)
        if main_fig:
            plt = sys.modules.get("matplotlib.pyplot")
            if plt is not None:
                plt.close(value)

    def _run_code(self, code):
        self.in_user_code = True
        try:
            value = eval(code, self.ns)
            if code.co_flags & inspect.CO_COROUTINE:
                if self.loop is None:
                    self.loop = asyncio.new_event_loop()
                value = self.loop.run_until_complete(value)
            return value
        finally:
            self.in_user_code = False

    def execute(self, req):
        self.count += 1
        self.channel.interrupt_pending = False
        self.channel.send({"type": "number_of_executions", "execution_count": self.count})
        for key, value in (req.get("base_env") or {}).items():
            os.environ[key] = value
        saved = {k: os.environ.get(k) for k in (req.get("env_vars") or {})}
        try:
            os.environ.update(req.get("env_vars") or {})
            self.run(req.get("code", ""), "<cell-%d>" % self.count)
        except BaseException as exc:  # noqa: B036 - user code may raise anything
            self.in_user_code = False
            self.channel.interrupt_pending = False
            self.report_error(exc)
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
            self.finish()

    def finish(self):
        try:
            self.show_figures()
        except Exception as exc:
            self.report_error(exc)
        self.flush_streams()
        for capture in _captures:
            capture.sync()
        self.flush_streams()


_captures = []


def main():
    proto_in = os.fdopen(os.dup(0), "r", encoding="utf-8")
    channel = Channel(os.dup(1))
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    stdout = EventStream(channel, "stdout")
    stderr = EventStream(channel, "stderr")
    _captures.append(FdCapture(1, stdout))
    _captures.append(FdCapture(2, stderr))
    sys.stdin = open(os.devnull, "r")
    sys.stdout, sys.stderr = stdout, stderr
    os.environ.setdefault("MPLBACKEND", "Agg")
    # Like IPython: import from the working directory, not the script's.
    if sys.path and sys.path[0] == os.path.dirname(_WORKER_FILE):
        sys.path[0] = ""
    kernel = Kernel(channel, stdout, stderr)
    signal.signal(signal.SIGINT, kernel.on_sigint)
    threading.Thread(target=_flusher, args=(stdout, stderr), daemon=True).start()
    channel.send({"type": "ready", "pid": os.getpid()})
    serve(proto_in, channel, kernel)


def serve(proto_in, channel, kernel):
    while True:
        try:
            line = proto_in.readline()
            if not line:
                return
            req = json.loads(line)
            if req.get("type") == "execute":
                kernel.execute(req)
            channel.send({"type": "done", "id": req.get("id")})
        except KeyboardInterrupt:
            continue


def _flusher(*streams):
    while True:
        time.sleep(_FLUSH_INTERVAL)
        for s in streams:
            try:
                s.flush()
            except Exception:
                pass


if __name__ == "__main__":
    main()
