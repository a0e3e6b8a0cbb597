package main

// sections are the report's tables, in order. Row keys are filled by the
// forkbox (FB) and raw runsc (Raw) measurements.
var sections = []sectionDef{
	{name: "create", title: "Create → first command output",
		intro: "forkbox (daemon defaults, `--pool-size 2`): `CreateSandbox(base)` — a hand-over of a sandbox the daemon restored ahead of time from the warm, booted base image when its pool has one (~10 ms), else that restore itself (~250–300 ms): the p50 is the pooled case, the p90 the restore — then `Exec(/bin/echo hi)` " +
			"through the data-plane proxy until the output arrives. Raw runsc: `runsc create` + `runsc start` of a bundle whose " +
			"process is `/bin/echo hi`, stdout a pipe read until \"hi\" (namespace prepared beforehand, not timed). " +
			"The forkbox create is a restore, so `resume` below (raw restore → first output) is the closer floor. " +
			"A first, untimed iteration on each side warms the page cache.",
		rows: []rowDef{
			{"create.total", "create → first output (tiny)", "ms", createTarget},
			{"create.api", "create call alone (forkbox `POST /sandboxes`; raw `runsc create`)", "ms", nil},
		}},
	{name: "echo", title: "`echo` round trip",
		intro: "forkbox: `Exec` on a warm sandbox through the proxy, call to return; first what the E2B SDKs send for " +
			"`commands.run(\"echo hi\")` — `/bin/bash -l -c \"echo hi\"`, a login shell that reads /etc/profile — then `/bin/echo hi` " +
			"in argv form (no shell). Raw runsc: `runsc exec <id>` of the same argv, process start to exit. 3 warm-up calls are dropped. " +
			"The `Stat` row is the same path without starting a process, i.e. what the proxy and agent themselves cost. " +
			"The first row sends its calls back to back, faster than the agent's command pool refills its ready login shell " +
			"(it starts one 10 ms after a command ends, ~20 ms of work), so most of them start a fresh shell; the paced row waits " +
			"100 ms between calls, as a client that reads each answer before the next does, and every call finds a ready shell.",
		rows: []rowDef{
			{"echo.sdk", "commands.run(\"echo hi\") round trip (`bash -l -c`), back to back", "ms", nil},
			{"echo.sdk.paced", "commands.run(\"echo hi\") round trip (`bash -l -c`), 100 ms apart", "ms", atMost(10, "p50 ≤ 10 ms (issue 22)")},
			{"echo.rtt", "`/bin/echo hi` round trip (argv form)", "ms", nil},
			{"echo.stat", "proxy + agent RPC without a process: `Stat(\"/\")`", "ms", nil},
		}},
	{name: "burst", title: "One command in each of many sandboxes at once",
		intro: "forkbox only (daemon defaults: the agent gate lets as many requests to agents in at once as the host has CPUs). " +
			"`-burst-n` (100) live base sandboxes, each created, given one `commands.run(\"echo hi\")` (`bash -l -c`) and left idle " +
			"3 s, then one more `commands.run(\"echo hi\")` sent to every one of them at the same moment from as many goroutines: " +
			"each call's latency from that common start until it returned with `hi`. One round (the p90 column of the first row " +
			"is its p90; the p99 has a row of its own). Host CPU: every process's busy time in `/proc/stat` from the start until the " +
			"last call returned, divided by the calls. Run after every other section, on the same daemon.",
		rows: []rowDef{
			{"burst.each", "each call, from the common start", "ms", atMost(1000, "p50 ≤ 1 s (issue 22)")},
			{"burst.p99", "  p99 of the calls", "ms", atMost(2000, "p99 ≤ 2 s (issue 22)")},
			{"burst.all", "  until the last returned", "ms", nil},
			{"burst.cpu", "host CPU per call in the burst", "ms", nil},
		}},
	{name: "memory", title: "Idle sandbox memory",
		intro: "5 sandboxes idle at the same time, each measured 2 s after the last was created (forkbox: after a first echo); " +
			"PSS splits shared pages (runsc text, rootfs files such as the agent binary) among the sandboxes mapping them, so a " +
			"lone sandbox is charged more and each further one less. Host view: PSS (`/proc/<pid>/smaps_rollup`) of the " +
			"container's runsc-sandbox (sentry) with its systrap stub children and runsc-gofer, plus the allocated blocks of the " +
			"sentry's `runsc-memory` memfd (PSS alone misses guest memory nobody maps), minus the PSS of the mappings of that memfd " +
			"(`/proc/<pid>/smaps`), whose pages the blocks already count: the sentry and the stubs map guest memory from it. " +
			"Raw runsc runs `/bin/sleep`; " +
			"forkbox runs its agent. The daemon's figure is `memUsed` of `GET /sandboxes/{id}/metrics`.",
		rows: []rowDef{
			{"memory.host", "host, every page once: PSS − PSS of the memfd mappings + memory-file blocks", "MiB", atMost(22, "≤ 22 MiB (issue 22)")},
			{"memory.naive", "PSS + memory-file blocks (mapped memfd pages counted twice; the headline of earlier reports)", "MiB", nil},
			{"memory.pss", "  PSS part (sentry + stubs + gofer)", "MiB", nil},
			{"memory.pssfile", "  of which file-backed (Pss_File)", "MiB", nil},
			{"memory.memfd", "  memory-file allocated blocks", "MiB", nil},
			{"memory.daemon", "daemon-reported memUsed (cgroup memory.usage_in_bytes)", "MiB", nil},
		}},
	{name: "pause", title: "Pause",
		intro: "Time from the pause request until the sandbox's runsc-sandbox process has exited (memory image written, memory " +
			"released). forkbox: `Pause` (the call itself returns at once, the pause finishes in the background). Raw: " +
			"`runsc checkpoint` (no --leave-running). 256 MiB: a python process holding 256 MiB of touched pages. " +
			"s/GiB divides the pause time by the sandbox's host memory (PSS + memory file) measured just before.",
		rows: []rowDef{
			{"pause.tiny", "pause, tiny", "ms", nil},
			{"pause.256", "pause, 256 MiB resident", "ms", nil},
			{"pause.tiny.rate", "pause, tiny, per GiB of sandbox memory", "s/GiB", nil},
			{"pause.256.rate", "pause, 256 MiB, per GiB of sandbox memory", "s/GiB", atMost(1, "≤ 1 s per GiB")},
			{"pause.ack", "pause API call returns (tiny)", "ms", nil},
		}},
	{name: "resume", title: "Resume → first command output",
		intro: "forkbox: `Connect` of the paused sandbox then `Exec(echo hi)` until output. Raw: `runsc restore --detach` of the " +
			"pause image as a new container (its namespace prepared beforehand) then `runsc exec echo hi`.",
		rows: []rowDef{
			{"resume.tiny", "resume → first output, tiny", "ms", atMost(250, "≤ 250 ms")},
			{"resume.256", "resume → first output, 256 MiB", "ms", atMost(150, "≤ 150 ms (issue 22)")},
			{"resume.api", "Connect call alone, tiny", "ms", nil},
		}},
	{name: "snapshot", title: "Live snapshot: how long the source is frozen",
		intro: "The sandbox runs a python ticker (`time.sleep(0.001)` in a loop) that prints every gap between two ticks longer " +
			"than 3 ms with its CLOCK_REALTIME end time. A frozen sandbox cannot tick, so the longest gap that ended during the " +
			"snapshot call (+0.5 s slack) is the freeze as the sandbox itself saw it; \"3\" means no gap above the 3 ms threshold. " +
			"This is clearer than timing echo round trips from outside, whose own 10–30 ms latency and queueing blur the freeze. " +
			"forkbox: `Snapshot` (then the snapshot is deleted); raw: `runsc checkpoint --leave-running`.",
		rows: []rowDef{
			{"snapshot.freeze.tiny", "freeze, tiny (ticker only)", "ms", atMost(100, "≤ 100 ms")},
			{"snapshot.freeze.256", "freeze, 256 MiB resident", "ms", nil},
			{"snapshot.call.tiny", "snapshot call wall time, tiny", "ms", nil},
			{"snapshot.call.256", "snapshot call wall time, 256 MiB", "ms", nil},
			{"snapshot.image.tiny", "image size on disk, tiny", "MiB", nil},
			{"snapshot.image.256", "image size on disk, 256 MiB", "MiB", nil},
		}},
	{name: "clone", title: "Clone ×k → every clone answers",
		intro: "forkbox: `Clone(count=k, strict)` of a running source, then `Exec(echo hi)` in every clone concurrently; wall " +
			"time until all answered (includes the source's snapshot). Raw: one `checkpoint --leave-running` of the source " +
			"(not timed), then k concurrent `runsc restore --detach` into k prepared namespaces, each followed by `runsc exec " +
			"echo hi`. Fewer rounds (see header) because each is expensive. Memory (one reading): the 256 MiB source, then its " +
			"10 clones after they answered and idled 3 s, each counted as in the memory section, plus the page cache of the " +
			"pages.img files under the image directory (restores that load pages on demand read them from there, shared).",
		rows: []rowDef{
			{"clone.tiny.1", "clone ×1, tiny", "ms", nil},
			{"clone.tiny.4", "clone ×4, tiny", "ms", nil},
			{"clone.tiny.10", "clone ×10, tiny", "ms", nil},
			{"clone.256.1", "clone ×1, 256 MiB", "ms", nil},
			{"clone.256.4", "clone ×4, 256 MiB", "ms", nil},
			{"clone.256.10", "clone ×10, 256 MiB", "ms", atMost(2000, "≤ 2 s (issue 22)")},
			{"clone.256.mem.src", "host memory of the 256 MiB source, every page once", "MiB", nil},
			{"clone.256.mem.10", "host memory of its 10 clones, every page once, + page cache of the pages.img files", "MiB", nil},
			{"clone.256.mem.ratio", "  10 clones ÷ one source", "×", atMost(4, "< 4× (issue 22)")},
		}},
	{name: "rollback", title: "Rollback → first command output",
		intro: "forkbox: `Rollback(id, snapshot)` then `Exec(echo hi)` until output (same sandbox id). Raw (recipe): `runsc " +
			"delete --force`, re-add eth0's address and route, `runsc restore --detach` under the same id, `runsc exec echo hi`. " +
			"Samples 0.5 s apart (an agent thinks between calls; forkbox's background work — refilling its standby containers, " +
			"removing the replaced container — is done by the next), then the same number back to back, where that work competes " +
			"with the next rollback for the 2 CPUs.",
		rows: []rowDef{
			{"rollback.tiny", "rollback → first output, tiny", "ms", atMost(250, "≤ 250 ms")},
			{"rollback.256", "rollback → first output, 256 MiB", "ms", nil},
			{"rollback.tiny.b2b", "  back to back, tiny", "ms", nil},
			{"rollback.256.b2b", "  back to back, 256 MiB", "ms", nil},
		}},
	{name: "codeinterp", title: "Code interpreter (`code-interpreter-v1`)",
		intro: "The E2B code-interpreter SDK's `runCode` as it sends it: `POST /execute` with `{\"code\": …}` to port 49999 " +
			"through the daemon's data plane (headers `E2b-Sandbox-Id`, `E2b-Sandbox-Port: 49999`, `X-Access-Token` when the " +
			"create response has an `envdAccessToken`), reading the newline-delimited JSON events until " +
			"`{\"type\":\"end_of_execution\"}`; a `result` event with the expected text must have arrived. " +
			"Round trip: `1+1` (result `2`) on one warm sandbox, 3 warm-up calls dropped, n = echo round trips. " +
			"First runCode: `POST /sandboxes {\"templateID\":\"code-interpreter-v1\"}` then `x = 1\\nx + 1` until its end " +
			"(includes the interpreter's start, if it was not already running in the template's image); a first, untimed " +
			"iteration is dropped. Memory: as in the idle memory section (5 sandboxes at once, 2 s idle, same host view and " +
			"daemon `memUsed`), each sandbox after one `1+1`. No raw runsc counterpart: with `-prev-bin`, the second " +
			"column is an earlier build's interpreter measured the same way in the same run by a daemon of that build " +
			"(its notes say which).",
		vs: prevColumn,
		rows: []rowDef{
			{"codeinterp.rtt", "`runCode('1+1')` round trip", "ms", atMost(20, "p50 ≤ 20 ms")},
			{"codeinterp.first", "create → first runCode (`x = 1\\nx + 1`) ends", "ms", atMost(400, "p50 ≤ 400 ms")},
			{"codeinterp.create", "  of which the create call", "ms", nil},
			{"codeinterp.memory.host", "idle memory, host, every page once (as in the memory section)", "MiB", nil},
			{"codeinterp.memory.naive", "  PSS + memory-file blocks (mapped memfd pages counted twice)", "MiB", nil},
			{"codeinterp.memory.pss", "  PSS part (sentry + stubs + gofer)", "MiB", nil},
			{"codeinterp.memory.pssfile", "  of which file-backed (Pss_File)", "MiB", nil},
			{"codeinterp.memory.memfd", "  memory-file allocated blocks", "MiB", nil},
			{"codeinterp.memory.daemon", "idle memory, daemon-reported memUsed", "MiB", nil},
		}},
}
