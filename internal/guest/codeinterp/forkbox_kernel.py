"""forkbox_kernel: starts Debian's ipykernel as ipykernel_launcher does,
with two changes for the code interpreter.

- jedi (IPython's completer) and debugpy (ipykernel's debugger) are kept
  out: E2B's API has neither completion nor debugging, and the two cost
  about 18 MB of every kernel's memory. IPython and ipykernel fall back by
  themselves when the imports fail.
- OutStream.flush returns at once when the stream holds nothing to send.
  ipykernel flushes stdout and stderr around every result and before every
  reply, and each flush is a round trip to its IOPub thread (two thread
  wake-ups), which gVisor makes slow; with nothing buffered there is
  nothing for it to wait for. Everything sent on IOPub still goes out in
  order through that thread, and the code interpreter waits for the
  kernel's idle status, which comes after all of it.
"""

import sys

sys.modules["jedi"] = sys.modules["debugpy"] = None

from ipykernel import iostream, kernelapp  # noqa: E402

_flush = iostream.OutStream.flush


def _flush_if_pending(self):
    if self.echo is None and not self._flush_pending and not self._subprocess_flush_pending:
        with self._buffer_lock:
            if self._buffer.tell() == 0:
                return
    _flush(self)


iostream.OutStream.flush = _flush_if_pending

if __name__ == "__main__":
    kernelapp.launch_new_instance()
