"""forkbox_kernel: starts Debian's ipykernel as ipykernel_launcher does,
with two changes for the code interpreter.

- jedi (IPython's completer) and debugpy (ipykernel's debugger) are kept
  out: E2B's API has neither completion nor debugging, and the two cost
  about 18 MB of every kernel's memory. IPython and ipykernel fall back by
  themselves when the imports fail.
- OutStream.flush hands its IOPub thread one task instead of two.
  ipykernel flushes stdout and stderr around every result and before every
  reply; each flush asks that thread to send the buffered text and then,
  as a second task, to set the event it waits on. Each task is a message
  on a ZeroMQ pipe, dear under gVisor; one task that does both keeps the
  order and the wait (which also gives the thread that reads a
  subprocess's output time to pass it on) and costs one message.
"""

import sys
import threading

sys.modules["jedi"] = sys.modules["debugpy"] = None

from ipykernel import iostream, kernelapp  # noqa: E402


def _flush(self):
    t = self.pub_thread
    if t and t.thread is not None and t.thread.is_alive() and t.thread.ident != threading.current_thread().ident:
        done = threading.Event()

        def flush_and_signal():
            try:
                self._flush()
            finally:
                done.set()

        t.schedule(flush_and_signal)
        if not done.wait(self.flush_timeout):
            print("IOStream.flush timed out", file=sys.__stderr__)
    else:
        self._flush()


iostream.OutStream.flush = _flush

if __name__ == "__main__":
    kernelapp.launch_new_instance()
