"""Unit tests of worker.py's formatting and stream helpers (run by
worker_test.go with FORKBOX_WORKER_PY pointing at the worker)."""

import base64
import importlib.util
import json
import math
import os
import unittest

_spec = importlib.util.spec_from_file_location("worker", os.environ["FORKBOX_WORKER_PY"])
worker = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(worker)


class FakeChannel:
    def __init__(self):
        self.events = []
        self.main_busy = False
        self.interrupt_pending = False

    def send(self, event):
        self.events.append(event)


class Rich:
    def __repr__(self):
        return "Rich()"

    def _repr_html_(self):
        return "<i>r</i>"

    def _repr_png_(self):
        return b"\x89PNG\r\n\x1a\n"

    def _repr_svg_(self):
        return ("<svg/>", {"isolated": True})

    def _repr_latex_(self):
        return None

    def _repr_json_(self):
        return '{"a": 1}'


class Bundle:
    def _repr_mimebundle_(self, include=None, exclude=None):
        return {"text/plain": "ignored", "text/markdown": "# t", "image/jpeg": b"\xff\xd8"}


class Broken:
    def _repr_html_(self):
        raise RuntimeError("no html")


class FormatTest(unittest.TestCase):
    def test_plain_text(self):
        cases = [("abc", "abc"), ('say "hi"', "say \"hi\""), (42, "42"), ([1, "a"], "[1, 'a']"), ("'", '"\'"'[1:-1])]
        for value, want in cases:
            with self.subTest(value=value):
                self.assertEqual(worker.plain_text(value), want)

    def test_repr_methods(self):
        out = worker.format_value(Rich())
        self.assertEqual(out["text"], "Rich()")
        self.assertEqual(out["html"], "<i>r</i>")
        self.assertEqual(base64.b64decode(out["png"]), b"\x89PNG\r\n\x1a\n")
        self.assertEqual(out["svg"], "<svg/>")
        self.assertEqual(out["json"], {"a": 1})
        self.assertNotIn("latex", out)

    def test_mimebundle(self):
        out = worker.format_value(Bundle())
        self.assertEqual(out["markdown"], "# t")
        self.assertEqual(base64.b64decode(out["jpeg"]), b"\xff\xd8")

    def test_broken_repr_is_skipped(self):
        out = worker.format_value(Broken())
        self.assertNotIn("html", out)
        self.assertIn("Broken object", out["text"])

    def test_classes_are_not_rendered(self):
        self.assertEqual(set(worker.format_value(Rich)), {"text"})

    def test_sanitize(self):
        got = worker._sanitize({"a": [1.0, math.nan, math.inf], 2: (True, None)})
        self.assertEqual(got, {"a": [1.0, None, None], "2": [True, None]})
        json.dumps(got, allow_nan=False)


class StreamTest(unittest.TestCase):
    def test_line_buffering(self):
        ch = FakeChannel()
        s = worker.EventStream(ch, "stdout")
        s.write("a")
        s.write("b\nc")
        self.assertEqual([e["text"] for e in ch.events], ["ab\n"])
        s.flush()
        self.assertEqual([e["text"] for e in ch.events], ["ab\n", "c"])
        self.assertTrue(all(e["type"] == "stdout" and e["timestamp"] for e in ch.events))

    def test_partial_suffix(self):
        self.assertEqual(worker._partial_suffix(b"xx\x00fb", b"\x00fbsync"), 3)
        self.assertEqual(worker._partial_suffix(b"xx", b"\x00fbsync"), 0)


if __name__ == "__main__":
    unittest.main()
