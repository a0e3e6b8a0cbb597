package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// hostMem is what one sandbox costs the host, measured from outside: the
// proportional set size of its runsc processes (sentry, its systrap stub
// children, gofer) and the allocated blocks of the sentry's memory file.
type hostMem struct {
	SandboxPID int
	PIDs       []int
	PSS        int64 // bytes, summed over PIDs
	PSSFile    int64 // part of PSS backed by files (runsc binary, rootfs files)
	PSSMemFile int64 // part of PSS that maps the runsc-memory memfd
	MemFile    int64 // allocated bytes of the runsc-memory memfd
}

// Total is the sandbox's host memory with every page counted once: PSS
// (pages shared with other sandboxes, such as runsc's text, split among
// them) without its runsc-memory mappings, plus the memfd's allocated
// blocks, which include every page those mappings map (the memfd is the
// sandbox's own; guest memory the sentry has not mapped is only there).
func (m hostMem) Total() int64 { return m.PSS - m.PSSMemFile + m.MemFile }

// Naive is PSS + memory-file blocks: the mapped memfd pages count twice.
func (m hostMem) Naive() int64 { return m.PSS + m.MemFile }

// proc is one /proc entry.
type proc struct {
	pid, ppid int
	argv0     string
	cmdline   string
}

// measureHost finds the runsc processes of container id (the same id
// appears in the command line of its runsc-sandbox and runsc-gofer, like
// `pgrep -f <id>` finds them) and measures them.
func measureHost(id string) (hostMem, error) {
	procs, err := listProcs()
	if err != nil {
		return hostMem{}, err
	}
	var m hostMem
	roots := map[int]bool{}
	for _, p := range procs {
		if strings.Contains(p.cmdline, id) && strings.HasPrefix(p.argv0, "runsc-") {
			roots[p.pid] = true
			if strings.HasPrefix(p.argv0, "runsc-sandbox") {
				m.SandboxPID = p.pid
			}
		}
	}
	if m.SandboxPID == 0 {
		return hostMem{}, fmt.Errorf("no runsc-sandbox process for %s", id)
	}
	m.PIDs = withDescendants(procs, roots)
	for _, pid := range m.PIDs {
		pss, file, err := readPSS(pid)
		if err != nil {
			continue // exited meanwhile
		}
		m.PSS += pss
		m.PSSFile += file
		m.PSSMemFile += mappedPSS(pid, "/memfd:runsc-memory")
	}
	m.MemFile, err = memfdBytes(m.SandboxPID, "runsc-memory")
	return m, err
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i < 0 || i+2 >= len(b) || (b[i+2] != 'Z' && b[i+2] != 'X')
}

func listProcs() ([]proc, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var out []proc
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
		out = append(out, proc{pid: pid, ppid: ppidOf(pid), argv0: args[0], cmdline: strings.Join(args, " ")})
	}
	return out, nil
}

func ppidOf(pid int) int {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}

// withDescendants returns roots and all their descendants.
func withDescendants(procs []proc, roots map[int]bool) []int {
	in := map[int]bool{}
	for pid := range roots {
		in[pid] = true
	}
	for changed := true; changed; {
		changed = false
		for _, p := range procs {
			if !in[p.pid] && in[p.ppid] {
				in[p.pid], changed = true, true
			}
		}
	}
	out := make([]int, 0, len(in))
	for pid := range in {
		out = append(out, pid)
	}
	return out
}

// readPSS returns Pss and Pss_File of pid in bytes.
func readPSS(pid int) (pss, file int64, err error) {
	f, err := os.Open(filepath.Join("/proc", strconv.Itoa(pid), "smaps_rollup"))
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) < 2 {
			continue
		}
		kb, _ := strconv.ParseInt(fs[1], 10, 64)
		switch fs[0] {
		case "Pss:":
			pss = kb << 10
		case "Pss_File:":
			file = kb << 10
		}
	}
	return pss, file, sc.Err()
}

// mappedPSS sums the Pss of pid's mappings whose path starts with name.
func mappedPSS(pid int, name string) int64 {
	f, err := os.Open(filepath.Join("/proc", strconv.Itoa(pid), "smaps"))
	if err != nil {
		return 0
	}
	defer f.Close()
	var total int64
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		switch {
		case len(fs) >= 5 && strings.Contains(fs[0], "-") && !strings.HasSuffix(fs[0], ":"):
			in = len(fs) >= 6 && strings.HasPrefix(fs[5], name) // a mapping's header line
		case in && len(fs) >= 2 && fs[0] == "Pss:":
			kb, _ := strconv.ParseInt(fs[1], 10, 64)
			total += kb << 10
		}
	}
	return total
}

// memfdBytes sums the allocated blocks of pid's memfds called name.
func memfdBytes(pid int, name string) (int64, error) {
	dir := filepath.Join("/proc", strconv.Itoa(pid), "fd")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	var total int64
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		l, err := os.Readlink(p)
		if err != nil || !strings.HasPrefix(l, "/memfd:"+name) {
			continue
		}
		var st syscall.Stat_t
		if err := syscall.Stat(p, &st); err != nil {
			continue
		}
		total += st.Blocks * 512
	}
	return total, nil
}

// dirBytes is the allocated size of the files under dir.
func dirBytes(dir string) int64 {
	var total int64
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		var st syscall.Stat_t
		if syscall.Stat(p, &st) == nil {
			total += st.Blocks * 512
		}
		return nil
	})
	return total
}

// memSamples accumulates hostMem readings for the memory rows.
type memSamples struct{ host, naive, pss, file, memfd samples }

func (s *memSamples) add(m hostMem) {
	s.host.add(mib(m.Total()))
	s.naive.add(mib(m.Naive()))
	s.pss.add(mib(m.PSS))
	s.file.add(mib(m.PSSFile))
	s.memfd.add(mib(m.MemFile))
}

// set records the readings on side in the memory section's rows.
func (s *memSamples) set(res *Results, side Side) { s.setAs(res, side, "memory") }

// setAs records the readings on side in the rows <prefix>.host, .naive,
// .pss, .pssfile and .memfd.
func (s *memSamples) setAs(res *Results, side Side, prefix string) {
	res.Set(prefix+".host", side, s.host)
	res.Set(prefix+".naive", side, s.naive)
	res.Set(prefix+".pss", side, s.pss)
	res.Set(prefix+".pssfile", side, s.file)
	res.Set(prefix+".memfd", side, s.memfd)
}

// memoryConcurrent is how many idle sandboxes are measured at once: PSS
// splits shared pages (runsc text, rootfs files) among the processes
// mapping them, so a lone sandbox would be charged all of them.
const memoryConcurrent = 5
