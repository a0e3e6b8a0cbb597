"""Jupyter protocol conformance of forkbox's kernels, with Debian's
python3-jupyter-kernel-test. The kernelspecs (forkbox-<language>) come
from codeinterp.KernelSpecs, the command lines the server starts kernels
with; kerneltest runs this file on the host (TestKernelConformance) and in
a code-interpreter sandbox against the template's own kernels
(TestKernelConformanceInTemplate). FORKBOX_TS_SAMPLES names the TypeScript
samples as the server hands them to the TypeScript kernel (transpiled)."""
import json
import os
import unittest
from queue import Empty

from jupyter_client.utils import run_sync

import jupyter_kernel_test as jkt
from jupyter_kernel_test.msgspec_v5 import validate_message


class Python(jkt.KernelTests):
    kernel_name = 'forkbox-python'
    language_name = 'python'
    file_extension = '.py'
    code_hello_world = "print('hello, world')"
    code_stderr = "import sys; print('test', file=sys.stderr)"
    code_execute_result = [{'code': '6*7', 'result': '42'}]
    code_generate_error = "raise ValueError('bad')"
    code_display_data = [{'code': "from IPython.display import HTML, display; display(HTML('<b>x</b>'))", 'mime': 'text/html'}]
    complete_code_samples = ['1', 'def f():\n    pass\n']
    incomplete_code_samples = ['def f(', 'for i in x:']
    # No history samples: the server turns IPython's history off (no SQLite
    # file that clones would share).


class JavaScript(jkt.KernelTests):
    kernel_name = 'forkbox-javascript'
    language_name = 'javascript'
    code_hello_world = "console.log('hello, world')"
    code_stderr = "console.error('test')"
    code_execute_result = [{'code': '6*7', 'result': '42'}]
    code_generate_error = "throw new Error('bad')"

    def _undeviate_kernel_info(self, reply):
        """ijavascript 5.2.1's kernel_info_reply deviates in two ways that
        clients (and forkbox) ignore: it repeats its header's msg_id and
        msg_type at the top level and has no content.status. This checks
        exactly those two and puts the reply in the standard's shape."""
        for k in ('msg_id', 'msg_type'):
            self.assertEqual(reply.pop(k), reply['header'][k])
        self.assertNotIn('status', reply['content'])
        reply['content']['status'] = 'ok'
        return reply

    def flush_channels(self):
        """The start-up handshake asks for kernel_info until one is
        answered, so a slow start leaves late kernel_info_replies queued;
        the first test's flush must read them with their known deviation
        and everything else as the base class does."""
        for channel in (self.kc.shell_channel, self.kc.iopub_channel):
            while True:
                try:
                    msg = run_sync(channel.get_msg)(timeout=0.1)
                except Empty:
                    break
                if msg.get('header', {}).get('msg_type') == 'kernel_info_reply':
                    msg = self._undeviate_kernel_info(msg)
                validate_message(msg)

    def test_kernel_info(self):
        """The rest of ijavascript's kernel_info_reply must conform."""
        self.flush_channels()
        msg_id = self.kc.kernel_info()
        reply = self.kc.get_shell_msg(timeout=jkt.TIMEOUT)
        validate_message(self._undeviate_kernel_info(reply), 'kernel_info_reply', msg_id)


def _typescript_samples():
    with open(os.environ["FORKBOX_TS_SAMPLES"]) as f:
        return json.load(f)


class TypeScript(JavaScript):
    """The TypeScript kernel is a second ijavascript kernel; the server
    transpiles each cell first, so these samples are TypeScript as the
    server turned it into JavaScript (typescript_samples.json holds the
    sources). ijavascript reports its language as javascript."""
    kernel_name = 'forkbox-typescript'
    _samples = _typescript_samples()
    code_hello_world = _samples['code_hello_world']
    code_stderr = _samples['code_stderr']
    code_execute_result = [{'code': _samples['code_execute_result'], 'result': '42'},
                           {'code': _samples['code_await_result'], 'result': '42'}]
    code_generate_error = _samples['code_generate_error']


class R(jkt.KernelTests):
    kernel_name = 'forkbox-r'
    language_name = 'R'
    file_extension = '.r'
    code_hello_world = "cat('hello, world\\n')"
    code_stderr = "message('test')"
    code_generate_error = "stop('bad')"
    # IRkernel shows values as display_data, never execute_result.
    code_display_data = [{'code': '6*7', 'mime': 'text/plain'}]
    complete_code_samples = ['1', 'f <- function() {}']
    incomplete_code_samples = ['f <- function() {']


class Bash(jkt.KernelTests):
    kernel_name = 'forkbox-bash'
    language_name = 'bash'
    file_extension = '.sh'
    code_hello_world = "echo 'hello, world'"
    code_generate_error = 'false'


class Java(jkt.KernelTests):
    kernel_name = 'forkbox-java'
    language_name = 'java'
    file_extension = '.jshell'
    code_hello_world = 'System.out.println("hello, world");'
    code_stderr = 'System.err.println("test");'
    code_execute_result = [{'code': '6*7', 'result': '42'}]
    code_generate_error = 'throw new RuntimeException("bad");'


if __name__ == '__main__':
    unittest.main(verbosity=2)
