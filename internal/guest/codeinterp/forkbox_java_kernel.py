"""forkbox's Java kernel: the thinnest Jupyter kernel over the JDK's jshell.

ipykernel's Kernel base class speaks the protocol; ForkboxJShell.java runs
the cells with the jdk.jshell API in one JVM (declarations, imports and
objects persist across cells) and reports output, the last expression's
value and errors as frames on a pipe. An interrupt stops the running
snippet (JShell.stop) and keeps the state.
"""
import json
import os
import signal
import subprocess
import sys

sys.modules['jedi'] = sys.modules['debugpy'] = None

from ipykernel.kernelapp import IPKernelApp  # noqa: E402
from ipykernel.kernelbase import Kernel  # noqa: E402

JAVA = os.environ.pop('FORKBOX_JAVA', 'java')
HERE = os.path.dirname(os.path.abspath(__file__))
# forkbox's bookkeeping: set, set for one cell, restore environment variables.
ENV_COMMANDS = {'%forkbox_env_set ': b'N', '%forkbox_env_push ': b'P'}


def java_version():
    out = subprocess.run([JAVA, '-version'], capture_output=True, text=True).stderr
    return out.split('"')[1] if '"' in out else ''


class JavaKernel(Kernel):
    implementation = 'forkbox-jshell'
    implementation_version = '1'
    language = 'java'
    language_version = java_version()
    language_info = {'name': 'java', 'version': language_version, 'mimetype': 'text/x-java-source',
                     'file_extension': '.jshell', 'codemirror_mode': 'java', 'pygments_lexer': 'java'}
    banner = 'Java ' + language_version + ' (jdk.jshell)'

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        # The JVM ignores SIGINT (sent to the whole process group on an
        # interrupt); this process turns it into a stop of the snippet.
        self.jvm = subprocess.Popen(
            [JAVA, '--add-opens', 'java.base/java.util=ALL-UNNAMED', '-XX:+UseSerialGC',
             '-XX:TieredStopAtLevel=1', '-Xss16m', os.path.join(HERE, 'ForkboxJShell.java')],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))

    def _send(self, tag, body=None):
        if body is None:
            self.jvm.stdin.write(tag + b'\n')
        else:
            data = body.encode('utf-8')
            self.jvm.stdin.write(tag + b' %d\n' % len(data) + data)
        self.jvm.stdin.flush()

    def _frames(self):
        """Yields (tag, text) until the command is done."""
        while True:
            head = self.jvm.stdout.readline()
            if not head:
                os._exit(1)  # the JVM died: so does the kernel, to be restarted
            tag, n = head.decode('ascii').split()
            data = self.jvm.stdout.read(int(n)).decode('utf-8', 'replace')
            if tag == 'D':
                return
            yield tag, data

    def _interrupt(self, signum, frame):
        """SIGINT stops the running snippet; the cell then ends as usual."""
        self.interrupted = True
        self._send(b'S')

    def _env(self, line):
        """Runs one of forkbox's environment commands."""
        if line.strip() == '%forkbox_env_pop':
            self._send(b'Q')
        else:
            prefix = next((p for p in ENV_COMMANDS if line.startswith(p)), None)
            if prefix is None:
                return
            env = json.loads(line[len(prefix):])
            self._send(ENV_COMMANDS[prefix], ''.join(k + '\0' + v + '\0' for k, v in env.items()))
        list(self._frames())

    def do_execute(self, code, silent, store_history=True, user_expressions=None, allow_stdin=False, **kwargs):
        ok = {'status': 'ok', 'execution_count': self.execution_count, 'payload': [], 'user_expressions': {}}
        lines = code.strip().split('\n')
        if all(line.startswith('%forkbox_env') for line in lines):
            for line in lines:
                self._env(line)
            return ok
        self.interrupted = False
        self._send(b'X', code)
        error = None
        saved = signal.signal(signal.SIGINT, self._interrupt)
        try:
            for tag, data in self._frames():
                error = self._output(tag, data, silent) or error
        finally:
            signal.signal(signal.SIGINT, saved)
        if self.interrupted and not error:
            error = {'ename': 'KeyboardInterrupt', 'evalue': 'interrupted', 'traceback': []}
        if error:
            self.send_response(self.iopub_socket, 'error', error)
            return dict(error, status='error', execution_count=self.execution_count)
        return ok

    def _output(self, tag, data, silent):
        """Publishes one frame; an error frame is returned instead."""
        if tag in ('O', 'E') and not silent:
            self.send_response(self.iopub_socket, 'stream',
                               {'name': 'stdout' if tag == 'O' else 'stderr', 'text': data})
        elif tag == 'V' and not silent:
            self.send_response(self.iopub_socket, 'execute_result', {
                'execution_count': self.execution_count, 'data': {'text/plain': data}, 'metadata': {}})
        elif tag == 'F':
            name, value, tb = data.split('\0', 2)
            return {'ename': name, 'evalue': value, 'traceback': tb.rstrip('\n').split('\n')}
        return None

    def do_shutdown(self, restart):
        self.jvm.kill()
        return {'status': 'ok', 'restart': restart}


if __name__ == '__main__':
    IPKernelApp.launch_instance(kernel_class=JavaKernel)
