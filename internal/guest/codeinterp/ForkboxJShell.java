// forkbox's Java engine: runs cells with the JDK's jdk.jshell API in this
// JVM and speaks a small framed protocol with forkbox_java_kernel.py.
//
// In (stdin):  "X <n>\n" + n bytes of a cell; "S\n" stops the running cell;
//              "N|P <n>\n" + n bytes "k\0v\0..." sets environment variables
//              for good (N) or for one cell (P); "Q\n" restores them (P's undo).
// Out (stdout): "<tag> <n>\n" + n bytes, tags O (stdout), E (stderr),
//              V (the last expression's value), F (an error: name\0value\0traceback),
//              D (the command is done).
import java.io.*;
import java.lang.reflect.Field;
import java.nio.charset.StandardCharsets;
import java.util.*;
import java.util.concurrent.*;
import jdk.jshell.*;

public class ForkboxJShell {
    static final OutputStream proto = new BufferedOutputStream(new FileOutputStream(FileDescriptor.out));
    static final Deque<Map<String, String>> saved = new ArrayDeque<>();

    static synchronized void frame(char tag, byte[] b, int off, int len) {
        try {
            proto.write((tag + " " + len + "\n").getBytes(StandardCharsets.US_ASCII));
            proto.write(b, off, len);
            proto.flush();
        } catch (IOException e) {
            System.exit(1);
        }
    }

    static void frame(char tag, String s) {
        byte[] b = s.getBytes(StandardCharsets.UTF_8);
        frame(tag, b, 0, b.length);
    }

    /** An OutputStream whose every write becomes one frame. */
    static PrintStream stream(char tag) {
        return new PrintStream(new OutputStream() {
            public void write(int b) { frame(tag, new byte[] {(byte) b}, 0, 1); }
            public void write(byte[] b, int off, int len) { if (len > 0) frame(tag, b, off, len); }
        }, true, StandardCharsets.UTF_8);
    }

    public static void main(String[] args) throws Exception {
        PrintStream out = stream('O'), err = stream('E');
        System.setOut(out);
        System.setErr(err);
        JShell js = JShell.builder().executionEngine("local").out(out).err(err).build();
        BlockingQueue<String[]> work = new LinkedBlockingQueue<>();
        Thread reader = new Thread(() -> readCommands(js, work));
        reader.setDaemon(true);
        reader.start();
        while (true) {
            String[] cmd = work.take();
            switch (cmd[0]) {
                case "X" -> { run(js, cmd[1]); }
                case "N" -> setEnv(cmd[1], false);
                case "P" -> setEnv(cmd[1], true);
                case "Q" -> restoreEnv();
                case "EOF" -> System.exit(0);
            }
            out.flush();
            err.flush();
            frame('D', "");
        }
    }

    static void readCommands(JShell js, BlockingQueue<String[]> work) {
        DataInputStream in = new DataInputStream(new BufferedInputStream(System.in));
        try {
            while (true) {
                String line = readLine(in);
                if (line == null) break;
                String[] f = line.split(" ", 2);
                if (f[0].equals("S")) {
                    js.stop();
                    continue;
                }
                String body = "";
                if (f.length > 1) {
                    byte[] b = new byte[Integer.parseInt(f[1])];
                    in.readFully(b);
                    body = new String(b, StandardCharsets.UTF_8);
                }
                work.add(new String[] {f[0], body});
            }
        } catch (IOException e) {
            // stdin closed: the kernel is gone.
        }
        work.add(new String[] {"EOF", ""});
    }

    static String readLine(DataInputStream in) throws IOException {
        StringBuilder sb = new StringBuilder();
        for (int c; (c = in.read()) != '\n'; ) {
            if (c < 0) return null;
            sb.append((char) c);
        }
        return sb.toString();
    }

    /** Runs a cell snippet by snippet; the first failure ends it. */
    static void run(JShell js, String code) {
        SourceCodeAnalysis sca = js.sourceCodeAnalysis();
        String rest = code;
        String value = null;
        while (!rest.isBlank()) {
            SourceCodeAnalysis.CompletionInfo ci = sca.analyzeCompletion(rest);
            String src = ci.source();
            if (src == null || !ci.completeness().isComplete()) {
                src = rest; // incomplete: let the compiler say why
                rest = "";
            } else {
                rest = ci.remaining();
            }
            value = null;
            for (SnippetEvent ev : js.eval(src)) {
                if (ev.causeSnippet() != null) continue;
                if (ev.exception() != null) {
                    exception(ev.exception());
                    return;
                }
                if (ev.status() == Snippet.Status.REJECTED) {
                    rejected(js, ev.snippet());
                    return;
                }
                if (ev.value() != null && isExpression(ev.snippet())) value = ev.value();
            }
        }
        if (value != null) frame('V', unquote(value));
    }

    static boolean isExpression(Snippet s) {
        return s.kind() == Snippet.Kind.EXPRESSION
            || s.subKind() == Snippet.SubKind.TEMP_VAR_EXPRESSION_SUBKIND;
    }

    /** jshell shows a String value quoted and escaped; the text is the string. */
    static String unquote(String v) {
        if (v.length() < 2 || !v.startsWith("\"") || !v.endsWith("\"")) return v;
        StringBuilder sb = new StringBuilder();
        for (int i = 1; i < v.length() - 1; i++) {
            char c = v.charAt(i);
            if (c != '\\' || i + 1 >= v.length() - 1) {
                sb.append(c);
                continue;
            }
            char n = v.charAt(++i);
            switch (n) {
                case 'n' -> sb.append('\n');
                case 't' -> sb.append('\t');
                case 'r' -> sb.append('\r');
                case 'b' -> sb.append('\b');
                case 'f' -> sb.append('\f');
                case 'u' -> {
                    sb.append((char) Integer.parseInt(v.substring(i + 1, i + 5), 16));
                    i += 4;
                }
                default -> sb.append(n);
            }
        }
        return sb.toString();
    }

    static void exception(JShellException e) {
        String name = e.getClass().getSimpleName();
        if (e instanceof EvalException ee) name = ee.getExceptionClassName();
        StringWriter tb = new StringWriter();
        tb.append(name).append(e.getMessage() == null ? "" : ": " + e.getMessage()).append('\n');
        for (StackTraceElement el : e.getStackTrace()) tb.append("\tat ").append(el.toString()).append('\n');
        frame('F', name + "\0" + (e.getMessage() == null ? "" : e.getMessage()) + "\0" + tb);
    }

    static void rejected(JShell js, Snippet s) {
        StringBuilder msg = new StringBuilder();
        js.diagnostics(s).forEach(d -> {
            if (msg.length() > 0) msg.append('\n');
            msg.append(d.getMessage(Locale.ROOT));
        });
        if (msg.length() == 0) msg.append("the snippet was rejected: ").append(s.source().strip());
        frame('F', "CompilationException\0" + msg + "\0" + msg + "\n" + s.source().strip());
    }

    /** System.getenv's map, made writable: ProcessBuilder copies the same one. */
    @SuppressWarnings("unchecked")
    static Map<String, String> env() {
        try {
            Map<String, String> view = System.getenv();
            Field f = view.getClass().getDeclaredField("m");
            f.setAccessible(true);
            return (Map<String, String>) f.get(view);
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException(e);
        }
    }

    static void setEnv(String body, boolean scoped) {
        String[] kv = body.split("\0", -1);
        Map<String, String> env = env(), old = new HashMap<>();
        for (int i = 0; i + 1 < kv.length; i += 2) {
            old.put(kv[i], env.get(kv[i]));
            env.put(kv[i], kv[i + 1]);
        }
        if (scoped) saved.push(old);
    }

    static void restoreEnv() {
        Map<String, String> env = env();
        if (saved.isEmpty()) return;
        saved.pop().forEach((k, v) -> {
            if (v == null) env.remove(k);
            else env.put(k, v);
        });
    }
}
