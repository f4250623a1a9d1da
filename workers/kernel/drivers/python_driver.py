# toolvisor's Python kernel driver, embedded in the daemon and run as `python -u -c <this>`.
#
# The daemon speaks length-prefixed JSON frames (4-byte big-endian length, UTF-8 JSON) over
# this process's own stdin and stdout. At start the driver moves the protocol to private
# duplicates of fds 0 and 1, points fd 0 at /dev/null and fd 1 at fd 2, so nothing a cell or
# its subprocesses write at the file-descriptor level can corrupt the protocol: such output
# reaches the daemon through stderr. Python-level output (print, sys.stdout, sys.stderr,
# display) travels as frames, in order.
#
# Threads: the main thread runs cells (so SIGINT raises KeyboardInterrupt in the cell); a
# reader thread takes frames from the daemon (exec requests, bridge results); a writer thread
# owns the protocol output, so a signal can never cut a frame in half.
import os
import sys


def _boot():
    import builtins
    import json
    import queue
    import signal
    import struct
    import threading
    import time

    proto_in = os.dup(0)
    proto_out = os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    # Figures render off-screen and come back as PNG; see the backend module below.
    os.environ["MPLBACKEND"] = "module://toolvisor_inline"
    if sys.path and sys.path[0] != "":
        sys.path.insert(0, "")

    CHART_MIME = "application/vnd.toolvisor.chart+json"
    out_q = queue.SimpleQueue()
    exec_q = queue.Queue()
    results = {}
    results_cond = threading.Condition()
    cancelled = set()
    state = {"cell": None, "interruptible": False, "rows": 50, "loop": None}

    # How many frames were queued and how many the writer has written: `drain` waits for the
    # second to reach the first, so a flush (or an exit) sees its output on the pipe first.
    counts = {"queued": 0, "written": 0}
    counts_cond = threading.Condition()
    real_exit = os._exit

    def send(msg):
        with counts_cond:
            counts["queued"] += 1
            out_q.put(msg)

    def drain(timeout):
        with counts_cond:
            target = counts["queued"]
            counts_cond.wait_for(lambda: counts["written"] >= target, timeout)

    def writer():
        pack = struct.pack
        while True:
            batch = [out_q.get()]
            while True:
                try:
                    batch.append(out_q.get_nowait())
                except queue.Empty:
                    break
            # Merge consecutive stream frames of one cell and stream into one frame.
            merged = []
            for msg in batch:
                last = merged[-1] if merged else None
                if (
                    last is not None
                    and msg.get("op") == "stream"
                    and last.get("op") == "stream"
                    and last["cell"] == msg["cell"]
                    and last["name"] == msg["name"]
                    and len(last["text"]) < 65536
                ):
                    last["text"] += msg["text"]
                else:
                    merged.append(dict(msg) if msg.get("op") == "stream" else msg)
            chunks = []
            for msg in merged:
                body = json.dumps(msg, ensure_ascii=False, default=repr).encode("utf-8", "surrogatepass")
                chunks.append(pack(">I", len(body)))
                chunks.append(body)
            data = b"".join(chunks)
            view = memoryview(data)
            while view:
                try:
                    n = os.write(proto_out, view)
                except InterruptedError:
                    continue
                except OSError:
                    real_exit(0)
                view = view[n:]
            with counts_cond:
                counts["written"] += len(batch)
                counts_cond.notify_all()

    def read_exact(n):
        parts = []
        while n:
            try:
                chunk = os.read(proto_in, min(n, 1 << 20))
            except InterruptedError:
                continue
            if not chunk:
                return None
            parts.append(chunk)
            n -= len(chunk)
        return b"".join(parts)

    def interrupt_until_done(cell):
        # A SIGINT that lands while the main thread is between its last signal check and a
        # blocking call (waiting for the GIL, say) only takes effect when that call returns:
        # repeat it, aimed at the main thread, until the cell has stopped.
        main = threading.main_thread().ident
        for _ in range(100):
            if state["cell"] != cell or not state["interruptible"]:
                return
            signal.pthread_kill(main, signal.SIGINT)
            time.sleep(0.1)

    def reader():
        while True:
            head = read_exact(4)
            if head is None:
                break
            (length,) = struct.unpack(">I", head)
            body = read_exact(length)
            if body is None:
                break
            msg = json.loads(body)
            op = msg.get("op")
            if op == "exec":
                exec_q.put(msg)
            elif op == "cancel":
                cancelled.add(msg["cell"])
                if state["cell"] == msg["cell"]:
                    threading.Thread(target=interrupt_until_done, args=(msg["cell"],), daemon=True).start()
            elif op == "bridge_result":
                with results_cond:
                    results[msg["id"]] = msg
                    results_cond.notify_all()
        exec_q.put(None)

    class _Stream:
        """sys.stdout / sys.stderr of cells: every write becomes a frame, in order."""

        encoding = "utf-8"
        errors = "replace"
        newlines = None
        line_buffering = True

        def __init__(self, name, fd):
            self.name = name
            self._fd = fd

        def write(self, text):
            if not isinstance(text, str):
                raise TypeError("write() argument must be str, not %s" % type(text).__name__)
            if text:
                send({"op": "stream", "cell": state["cell"], "name": self.name, "text": text})
            return len(text)

        def writelines(self, lines):
            for line in lines:
                self.write(line)

        def flush(self):
            # print(..., flush=True) and sys.stdout.flush(): the text is on the pipe when this
            # returns, so it survives a crash right after (bounded: a daemon that stops reading
            # cannot hang the cell here for long).
            drain(10)

        def isatty(self):
            return False

        def readable(self):
            return False

        def writable(self):
            return True

        def seekable(self):
            return False

        def fileno(self):
            # The fd-level stream, which reaches the daemon through stderr.
            return self._fd

        @property
        def closed(self):
            return False

        @property
        def buffer(self):
            raise AttributeError("toolvisor cell streams have no binary buffer; write text")

    def exit_after_output(code):
        # A cell's os._exit(): what it printed first reaches the daemon before the process ends.
        try:
            drain(2)
        except BaseException:
            pass
        real_exit(code)

    os._exit = exit_after_output
    sys.stdout = _Stream("stdout", 1)
    sys.stderr = _Stream("stderr", 2)
    sys.__stdout__ = sys.stdout
    sys.__stderr__ = sys.stderr

    def on_sigint(signum, frame):
        if state["interruptible"]:
            raise KeyboardInterrupt
        # Between cells an interrupt has nothing to stop.

    signal.signal(signal.SIGINT, on_sigint)

    try:
        import faulthandler

        # Only the crashing thread: the cell's frames, not the driver's reader and writer.
        faulthandler.enable(file=2, all_threads=False)
    except Exception:
        pass

    class ToolError(Exception):
        """A tool() call failed: `kind`, `message` and `hint` as the daemon reported them."""

        def __init__(self, kind, message, hint=""):
            super().__init__("%s: %s" % (kind, message) + (" (hint: %s)" % hint if hint else ""))
            self.kind = kind
            self.message = message
            self.hint = hint

    counter = [0]
    counter_lock = threading.Lock()

    def tool(name, args=None):
        """Call a toolvisor tool from this cell, through the same gates as a model's call."""
        if not isinstance(name, str):
            raise TypeError("tool(name, args): name must be a str")
        if args is None:
            args = {}
        if not isinstance(args, dict):
            raise TypeError("tool(name, args): args must be a dict")
        json.dumps(args)  # Refuse what cannot travel before anything is sent.
        with counter_lock:
            counter[0] += 1
            bid = counter[0]
        send({"op": "bridge", "cell": state["cell"], "id": bid, "tool": name, "args": args})
        with results_cond:
            while bid not in results:
                results_cond.wait()
            msg = results.pop(bid)
        err = msg.get("err")
        if err is not None:
            raise ToolError(err.get("kind", "internal"), err.get("message", ""), err.get("hint", ""))
        return msg.get("ok")

    def _b64(data):
        import base64

        return base64.b64encode(data).decode("ascii")

    def bundle(obj):
        """The MIME bundle of one object, bounded."""
        rows = state["rows"]
        cls = type(obj)
        mod = getattr(cls, "__module__", "") or ""
        if mod.startswith("matplotlib") and hasattr(obj, "savefig") and hasattr(obj, "get_axes"):
            return {"image/png": _b64(figure_png(obj)), "text/plain": repr(obj)}
        data = {}
        mimebundle = getattr(obj, "_repr_mimebundle_", None)
        if callable(mimebundle) and not isinstance(obj, type):
            try:
                got = mimebundle()
                if isinstance(got, tuple):
                    got = got[0]
                for mime, value in (got or {}).items():
                    data[mime] = _b64(value) if isinstance(value, bytes) else value
            except Exception:
                data = {}
        if mod.startswith("pandas") and "pandas" in sys.modules:
            pd = sys.modules["pandas"]
            with pd.option_context(
                "display.max_rows", rows,
                "display.min_rows", min(rows, 20),
                "display.max_columns", 40,
                "display.width", 160,
            ):
                data["text/plain"] = repr(obj)
                html = getattr(obj, "_repr_html_", None)
                if callable(html):
                    value = html()
                    if value is not None:
                        data["text/html"] = value
            return data
        if not isinstance(obj, type):
            for meth, mime in (
                ("_repr_html_", "text/html"),
                ("_repr_markdown_", "text/markdown"),
                ("_repr_svg_", "image/svg+xml"),
                ("_repr_png_", "image/png"),
                ("_repr_jpeg_", "image/jpeg"),
                ("_repr_json_", "application/json"),
                ("_repr_latex_", "text/latex"),
            ):
                if mime in data:
                    continue
                fn = getattr(obj, meth, None)
                if callable(fn):
                    try:
                        value = fn()
                    except Exception:
                        continue
                    if isinstance(value, tuple):
                        value = value[0]
                    if value is None:
                        continue
                    data[mime] = _b64(value) if isinstance(value, bytes) else value
        if "text/plain" not in data:
            if isinstance(obj, (dict, list, tuple, set)) and len(repr(obj)) > 100:
                import pprint

                data["text/plain"] = pprint.pformat(obj, width=100)
            else:
                data["text/plain"] = repr(obj)
        return data

    def display(*objs, **kwargs):
        """Show objects as outputs of this cell, in order (text, HTML, images)."""
        raw = kwargs.pop("raw", False)
        for obj in objs:
            data = dict(obj) if raw else bundle(obj)
            send({"op": "display", "cell": state["cell"], "data": data, "result": False})

    def figure_png(fig):
        import io

        buf = io.BytesIO()
        fig.savefig(buf, format="png", bbox_inches="tight")
        return buf.getvalue()

    CHART_POINTS = 500  # per series; more are cut (`points` keeps the count)
    CHART_SERIES = 20  # per axes

    def chart_of(fig):
        """What a figure shows, as data: titles, axis labels and scales, and each series'
        points (lines, scatters, bars), so a model without vision can read a plot."""

        def num(v):
            try:
                f = float(v)
            except (TypeError, ValueError):
                return str(v)
            return f if f == f and f not in (float("inf"), float("-inf")) else None

        def values(seq):
            seq = list(seq)
            return [num(v) for v in seq[:CHART_POINTS]], len(seq)

        def label(artist):
            text = artist.get_label()
            return None if not text or text.startswith("_") else str(text)

        axes = []
        for ax in fig.get_axes():
            series = []
            for line in ax.get_lines():
                x, n = values(line.get_xdata())
                y, _ = values(line.get_ydata())
                series.append({"type": "line", "label": label(line), "points": n, "x": x, "y": y})
            for coll in ax.collections:
                try:
                    offsets = coll.get_offsets()
                except AttributeError:
                    continue
                if len(offsets) == 0:
                    continue
                x, n = values(p[0] for p in offsets)
                y, _ = values(p[1] for p in offsets)
                series.append({"type": "scatter", "label": label(coll), "points": n, "x": x, "y": y})
            for container in getattr(ax, "containers", []):
                patches = list(getattr(container, "patches", []) or [])
                if not patches or not hasattr(patches[0], "get_height"):
                    continue
                x, n = values(p.get_x() + p.get_width() / 2 for p in patches)
                y, _ = values(p.get_height() for p in patches)
                series.append({"type": "bar", "label": label(container), "points": n, "x": x, "y": y})
            ticks = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
            entry = {
                "title": ax.get_title(),
                "xlabel": ax.get_xlabel(),
                "ylabel": ax.get_ylabel(),
                "xscale": ax.get_xscale(),
                "yscale": ax.get_yscale(),
                "xlim": [num(v) for v in ax.get_xlim()],
                "ylim": [num(v) for v in ax.get_ylim()],
                "series": series[:CHART_SERIES],
            }
            if len(series) > CHART_SERIES:
                entry["series_omitted"] = len(series) - CHART_SERIES
            if ticks and not all(_is_number(t) for t in ticks):
                entry["xticklabels"] = ticks[:CHART_POINTS]
            axes.append(entry)
        title = fig._suptitle.get_text() if getattr(fig, "_suptitle", None) else ""
        return {"title": title, "axes": axes}

    def _is_number(text):
        try:
            float(text.replace("\u2212", "-"))
            return True
        except ValueError:
            return False

    def flush_figures():
        plt = sys.modules.get("matplotlib.pyplot")
        if plt is None:
            return
        from matplotlib._pylab_helpers import Gcf

        try:
            for manager in Gcf.get_all_fig_managers():
                fig = manager.canvas.figure
                data = {"image/png": _b64(figure_png(fig)), "text/plain": repr(fig)}
                try:
                    data[CHART_MIME] = chart_of(fig)
                except Exception as e:  # a figure the extraction does not understand
                    data[CHART_MIME] = {"error": "%s: %s" % (type(e).__name__, e)}
                send({"op": "display", "cell": state["cell"], "data": data, "result": False})
        finally:
            plt.close("all")

    mpl_backend = (
        "from matplotlib.backends.backend_agg import FigureCanvasAgg as FigureCanvas\n"
        "from matplotlib.backend_bases import FigureManagerBase as FigureManager\n"
        "import builtins as _b\n"
        "def show(*args, **kwargs):\n"
        "    _b.__tv__.flush_figures()\n"
    )

    class _Finder:
        """Provides the `toolvisor_inline` matplotlib backend module on first import."""

        @staticmethod
        def find_spec(name, path=None, target=None):
            if name != "toolvisor_inline":
                return None
            import importlib.util

            return importlib.util.spec_from_loader(name, _Loader())

    class _Loader:
        def create_module(self, spec):
            return None

        def exec_module(self, module):
            exec(mpl_backend, module.__dict__)

    sys.meta_path.append(_Finder)

    class Magics:
        """The plain-code targets of the IPython idioms the daemon rewrites."""

        def __init__(self):
            self.flush_figures = flush_figures

        @staticmethod
        def _expand(cmd, depth=2):
            if "{" not in cmd:
                return cmd
            frame = sys._getframe(depth)
            scope = dict(frame.f_globals)
            scope.update(frame.f_locals)
            import string

            out = []
            try:
                for literal, field, spec, conv in string.Formatter().parse(cmd):
                    out.append(literal)
                    if field is None:
                        continue
                    value = eval(field, scope)
                    if conv:
                        value = {"r": repr, "s": str, "a": ascii}[conv](value)
                    out.append(format(value, spec or ""))
            except Exception:
                return cmd
            return "".join(out)

        @staticmethod
        def _shell():
            return "/bin/bash" if os.path.exists("/bin/bash") else "/bin/sh"

        def _run(self, argv, capture):
            import subprocess

            proc = subprocess.Popen(
                argv,
                stdout=subprocess.PIPE,
                stderr=None if capture else subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
            lines = []
            try:
                for raw in iter(proc.stdout.readline, b""):
                    line = raw.decode("utf-8", "replace")
                    if capture:
                        lines.append(line.rstrip("\n"))
                    else:
                        sys.stdout.write(line)
                proc.wait()
            except BaseException:
                proc.kill()
                proc.wait()
                raise
            finally:
                proc.stdout.close()
            builtins._exit_code = proc.returncode
            return lines, proc.returncode

        def sh(self, cmd, capture=False):
            cmd = self._expand(cmd)
            lines, _ = self._run([self._shell(), "-c", cmd], capture)
            return SList(lines) if capture else None

        def bash(self, script):
            self._run([self._shell(), "-c", script], False)

        def pip(self, args):
            import shlex

            args = self._expand(args)
            words = shlex.split(args)
            changes = words and words[0] in ("install", "uninstall")
            before = self._installed() if changes else {}
            argv = [sys.executable, "-m", "pip"] + words
            _, code = self._run(argv, False)
            import importlib

            importlib.invalidate_caches()
            if changes:
                self._forget(words[1:])
                self._forget_changed(before)
            if code != 0:
                print("pip exited with code %d" % code, file=sys.stderr)

        @staticmethod
        def _installed():
            """Each installed distribution's (version, dist-info mtime), by its normalised
            name: what pip changed is what differs afterwards, whatever the arguments named
            (a path, a wheel file, -r requirements.txt, -e .)."""
            out = {}
            try:
                from importlib import metadata

                for d in metadata.distributions():
                    name = (d.metadata.get("Name") or "").lower().replace("-", "_")
                    try:
                        stamp = os.stat(d._path).st_mtime_ns
                    except Exception:
                        stamp = None
                    out[name] = (d.version, stamp, getattr(d, "_path", None))
            except Exception:
                pass
            return out

        @classmethod
        def _forget_changed(cls, before):
            """Drop from sys.modules the modules of every distribution pip installed, changed
            or removed, and every installed module whose file is gone from disk."""
            after = cls._installed()
            changed = {n for n in set(before) | set(after) if before.get(n) != after.get(n)}
            tops = set()
            try:
                from importlib import metadata

                for name in changed:
                    if name not in after:
                        continue
                    try:
                        d = metadata.distribution(name)
                    except Exception:
                        continue
                    text = d.read_text("top_level.txt")
                    if text:
                        tops.update(t.strip() for t in text.split() if t.strip())
                    for f in d.files or []:
                        head = f.parts[0] if f.parts else ""
                        if not head or head == ".." or head.endswith((".dist-info", ".egg-info", ".data")):
                            continue
                        tops.add(head[:-3] if head.endswith(".py") else head)
                    tops.add(name)
            except Exception:
                pass
            for mod in list(sys.modules):
                m = sys.modules.get(mod)
                path = getattr(m, "__file__", None)
                gone = (
                    isinstance(path, str)
                    and ("site-packages" in path or "dist-packages" in path)
                    and not os.path.exists(path)
                )
                if mod != "__main__" and (mod.split(".")[0] in tops or gone):
                    del sys.modules[mod]

        @staticmethod
        def _forget(words):
            """Drop the named distributions' modules from sys.modules, so the next import
            loads what pip just installed (or fails for what it removed)."""
            import re

            names = set()
            for word in words:
                if word.startswith("-") or "/" in word or word.endswith((".whl", ".tar.gz", ".zip")):
                    continue
                name = re.split(r"[\[<>=!~; @]", word, maxsplit=1)[0].strip()
                if name:
                    names.add(name.lower().replace("-", "_"))
            tops = set(names)
            try:
                from importlib import metadata

                for top, dists in metadata.packages_distributions().items():
                    if any(d.lower().replace("-", "_") in names for d in dists):
                        tops.add(top)
            except Exception:
                pass
            for mod in list(sys.modules):
                if mod.split(".")[0].lower() in tops or mod.split(".")[0] in tops:
                    del sys.modules[mod]

        def cd(self, path):
            path = self._expand(path.strip()) or "~"
            if (path.startswith('"') and path.endswith('"')) or (path.startswith("'") and path.endswith("'")):
                path = path[1:-1]
            os.chdir(os.path.expanduser(path))
            print(os.getcwd())

        def matplotlib(self, args):
            # Figures are always returned inline as PNG; `%matplotlib inline` changes nothing.
            return None

        def timeit(self, line, body=None):
            import shlex
            import timeit as _timeit

            frame = sys._getframe(1)
            scope = frame.f_globals
            words = shlex.split(line) if line.strip() else []
            number = None
            repeat = 7
            rest = []
            i = 0
            while i < len(words):
                w = words[i]
                if w in ("-n", "-r") and i + 1 < len(words):
                    value = int(words[i + 1])
                    if w == "-n":
                        number = value
                    else:
                        repeat = value
                    i += 2
                    continue
                if w.startswith("-n") and w[2:].isdigit():
                    number = int(w[2:])
                elif w.startswith("-r") and w[2:].isdigit():
                    repeat = int(w[2:])
                elif w in ("-q", "-o"):
                    pass
                else:
                    rest = words[i:]
                    break
                i += 1
            stmt_from_line = line
            for w in words[: len(words) - len(rest)]:
                stmt_from_line = stmt_from_line.replace(w, "", 1)
            stmt_from_line = stmt_from_line.strip()
            if body is None:
                stmt, setup = stmt_from_line, "pass"
            else:
                stmt, setup = body, stmt_from_line or "pass"
            timer = _timeit.Timer(stmt, setup, globals=scope)
            if number is None:
                number, _ = timer.autorange()
            runs = [t / number for t in timer.repeat(repeat=max(repeat, 1), number=number)]
            mean = sum(runs) / len(runs)
            std = (sum((r - mean) ** 2 for r in runs) / len(runs)) ** 0.5

            def fmt(t):
                for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9)):
                    if t >= scale:
                        return "%.3g %s" % (t / scale, unit)
                return "%.3g ns" % (t * 1e9)

            print(
                "%s ± %s per loop (mean ± std. dev. of %d run%s, %s loop%s each)"
                % (fmt(mean), fmt(std), len(runs), "" if len(runs) == 1 else "s",
                   format(number, ","), "" if number == 1 else "s")
            )

    class SList(list):
        """The lines of `x = !cmd`, with IPython's `.s` (space-joined), `.n` (newline-joined)
        and `.l` (the list) views."""

        @property
        def s(self):
            return " ".join(self)

        @property
        def n(self):
            return "\n".join(self)

        @property
        def l(self):
            return list(self)

    builtins.display = display
    builtins.tool = tool
    builtins.ToolError = ToolError
    builtins.__tv__ = Magics()

    # Cells run in a fresh `__main__` module (pickle and multiprocessing look classes up
    # there); the driver keeps its own globals in the module it started in.
    import types

    main = types.ModuleType("__main__")
    main.__dict__["__builtins__"] = builtins
    sys.modules["__main__"] = main
    ns = main.__dict__

    driver_globals = globals()

    def without_driver(tb):
        # The driver's own frames (running the cell, the SIGINT handler, tool(), display())
        # say nothing about the cell: relink the traceback around them.
        kept = []
        while tb is not None:
            if tb.tb_frame.f_globals is not driver_globals:
                kept.append(tb)
            tb = tb.tb_next
        for a, b in zip(kept, kept[1:]):
            a.tb_next = b
        if kept:
            kept[-1].tb_next = None
        return kept[0] if kept else None

    def format_error(exc):
        import traceback

        tb = without_driver(exc.__traceback__)
        lines = traceback.format_exception(type(exc), exc, tb)
        return {
            "op": "error",
            "cell": state["cell"],
            "ename": type(exc).__name__,
            "evalue": str(exc),
            "traceback": "".join(lines),
        }

    def run_async(coro):
        import asyncio

        loop = state["loop"]
        if loop is None or loop.is_closed():
            loop = state["loop"] = asyncio.new_event_loop()
        return loop.run_until_complete(coro)

    def run_cell(msg):
        import ast
        import linecache

        cell = msg["cell"]
        code = msg["code"]
        state["cell"] = cell
        state["rows"] = int(msg.get("rows", 50))
        name = "<cell %d>" % cell
        linecache.cache[name] = (len(code), None, code.splitlines(True), name)
        flags = getattr(ast, "PyCF_ALLOW_TOP_LEVEL_AWAIT", 0)
        status = "ok"
        try:
            try:
                state["interruptible"] = True
                tree = ast.parse(code, name, "exec")
                last = None
                echo = not code.rstrip().endswith(";")
                if echo and tree.body and isinstance(tree.body[-1], ast.Expr):
                    last = ast.Expression(tree.body.pop().value)
                body = compile(tree, name, "exec", flags=flags)
                if body.co_flags & 0x80:  # CO_COROUTINE: top-level await
                    run_async(eval(body, ns))
                else:
                    exec(body, ns)
                if last is not None:
                    expr = compile(last, name, "eval", flags=flags)
                    value = eval(expr, ns)
                    if expr.co_flags & 0x80:
                        value = run_async(value)
                    if value is not None:
                        ns["_"] = value
                        send({"op": "display", "cell": cell, "data": bundle(value), "result": True})
            finally:
                state["interruptible"] = False
        except KeyboardInterrupt as exc:
            status = "interrupted"
            send(format_error(exc))
        except BaseException as exc:
            status = "error"
            send(format_error(exc))
        try:
            flush_figures()
        except BaseException as exc:
            status = "error"
            send(format_error(exc))
        return status

    def sync_marker(cell):
        # Written to fd 2 after the cell: everything the cell wrote at the fd level is in
        # the stderr pipe before it, so the daemon knows when that output is complete.
        try:
            os.write(2, ("\x1eTVSYNC %d\x1e" % cell).encode())
        except OSError:
            pass

    threading.Thread(target=writer, name="toolvisor-writer", daemon=True).start()
    threading.Thread(target=reader, name="toolvisor-reader", daemon=True).start()
    send(
        {
            "op": "ready",
            "pid": os.getpid(),
            "language": "python",
            "version": sys.version.split()[0],
            "executable": sys.executable,
        }
    )
    while True:
        try:
            msg = exec_q.get()
        except KeyboardInterrupt:
            continue
        if msg is None:
            break
        cell = msg.get("cell", 0)
        try:
            if cell in cancelled:
                cancelled.discard(cell)
                status = "interrupted"
            else:
                status = run_cell(msg)
        except KeyboardInterrupt:
            status = "interrupted"
        sync_marker(cell)
        send({"op": "done", "cell": cell, "status": status})
        state["cell"] = None
    sys.stdout.flush()
    os._exit(0)


_boot()
