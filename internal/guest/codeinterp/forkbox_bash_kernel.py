"""forkbox's Bash kernel: the thinnest Jupyter kernel over one bash.

ipykernel's Kernel base class speaks the protocol; metakernel's replwrap
(Debian's python3-metakernel) drives an interactive bash on a pty, as
E2B's bash_kernel does with pexpect's: one shell per kernel, so cd,
variables and functions persist across cells, stderr arrives merged into
stdout, and a non-zero exit status of the cell is an error whose value is
the status. Unlike there, a cell's stdin is /dev/null (the API has no
input, so a command reading stdin gets EOF instead of waiting forever) and
an incomplete cell is a syntax error instead of a hung prompt: each cell is
read whole into a variable by a here-document and eval'd by the shell. MetaKernel itself is not used: its %magic, !shell and ?help
parsing would change what those characters mean to bash.
"""
import os
import secrets
import signal
import subprocess
import sys

sys.modules['jedi'] = sys.modules['debugpy'] = None

from ipykernel.kernelapp import IPKernelApp  # noqa: E402
from ipykernel.kernelbase import Kernel  # noqa: E402
from metakernel import pexpect, replwrap  # noqa: E402

BASH = os.environ.pop('FORKBOX_BASH', 'bash')
# Ends the here-document a cell is passed in; no cell contains it.
END = 'FORKBOX_CELL_' + secrets.token_hex(8)


def start_bash():
    """Start bash on a pty with metakernel's prompts, no colours and no
    pager."""
    # bash must not inherit ipykernel's SIGINT handling.
    old = signal.signal(signal.SIGINT, signal.SIG_DFL)
    try:
        rc = os.path.join(os.path.dirname(pexpect.PEXPECT_DIR), 'bashrc.sh')
        child = pexpect.spawn(BASH, ['--rcfile', rc], echo=False, encoding='utf-8',
                              codec_errors='replace')
        # pexpect sleeps 50 ms before each line it sends by default; a cell
        # is sent line by line.
        child.delaybeforesend = None
        ps1 = replwrap.PEXPECT_PROMPT[:5] + r'\[\]' + replwrap.PEXPECT_PROMPT[5:]
        ps2 = replwrap.PEXPECT_CONTINUATION_PROMPT[:5] + r'\[\]' + replwrap.PEXPECT_CONTINUATION_PROMPT[5:]
        return replwrap.REPLWrapper(
            child, '[$#]', "PS1='{0}' PS2='{1}' PROMPT_COMMAND=''".format(ps1, ps2),
            extra_init_cmd='export TERM=dumb PAGER=cat')
    finally:
        signal.signal(signal.SIGINT, old)


class BashKernel(Kernel):
    implementation = 'forkbox-bash'
    implementation_version = '1'
    language = 'bash'
    language_info = {'name': 'bash', 'mimetype': 'text/x-sh', 'file_extension': '.sh',
                     'codemirror_mode': 'shell', 'pygments_lexer': 'bash'}

    @property
    def language_version(self):
        return subprocess.run([BASH, '-c', 'echo $BASH_VERSION'], capture_output=True, text=True).stdout.strip()

    @property
    def banner(self):
        return 'GNU bash ' + self.language_version

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.bash = start_bash()

    def _stream(self, text):
        # replwrap streams up to each CR, so the pty's CR LF pairs stay in
        # one piece; a lone CR (a progress bar) is the program's.
        self.send_response(self.iopub_socket, 'stream', {'name': 'stdout', 'text': text.replace('\r\n', '\n')})

    def _error(self, name, value, traceback):
        content = {'ename': name, 'evalue': value, 'traceback': traceback}
        self.send_response(self.iopub_socket, 'error', content)
        return dict(content, status='error', execution_count=self.execution_count)

    def _interrupt(self, signum, frame):
        """SIGINT becomes a ^C on the shell's terminal, which interrupts
        the running command; the shell then prompts again."""
        self.interrupted = True
        self.bash.child.sendintr()

    @staticmethod
    def _wrap(code):
        return "IFS= read -r -d '' __fb_cell <<'%s'\n%s\n%s\neval \"$__fb_cell\" </dev/null" % (
            END, code.rstrip('\n'), END)

    def do_execute(self, code, silent, store_history=True, user_expressions=None, allow_stdin=False, **kwargs):
        if not code.strip():
            return {'status': 'ok', 'execution_count': self.execution_count, 'payload': [], 'user_expressions': {}}
        self.interrupted = False
        saved = signal.signal(signal.SIGINT, self._interrupt)
        try:
            self.bash.run_command(self._wrap(code), timeout=None, stream_handler=None if silent else self._stream)
        except pexpect.EOF:
            # The cell ended the shell (exit): this kernel exits too, so the
            # client starts a fresh one as Jupyter restarts dead kernels.
            os._exit(1)
        finally:
            signal.signal(signal.SIGINT, saved)
        if self.interrupted:
            return self._error('KeyboardInterrupt', 'interrupted', [])
        try:
            status = int(self.bash.run_command('echo $?').strip())
        except (ValueError, pexpect.EOF):
            status = 1
        if status:
            return self._error('', str(status), [])
        return {'status': 'ok', 'execution_count': self.execution_count, 'payload': [], 'user_expressions': {}}


if __name__ == '__main__':
    IPKernelApp.launch_instance(kernel_class=BashKernel)
