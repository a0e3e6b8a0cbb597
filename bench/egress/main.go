// Command egress measures what the egress proxy costs a sandbox: the
// throughput of a 100 MiB download and the time to the first byte of a
// small GET on a fresh connection (connect, TLS handshake for HTTPS,
// request, answer), over HTTP and HTTPS, direct (address rules only),
// through the proxy (the sandbox's policy names a host, so its ports 80
// and 443 are redirected; HTTPS stays end to end) and intercepted (a rules
// header: the proxy terminates TLS with the egress CA and re-encrypts),
// and with a rule header filled in per request from a secret or a
// workload token (placeholders.go), medians printed as a markdown section
// for docs/benchmarks.md.
//
// With -ca it measures instead what trusting the egress CA adds to
// create → first command (ca.go).
//
// It uses the real kernel path — a sandbox network from internal/netns
// with its nftables rules and redirect, the proxy of internal/egress, an
// outside server on TEST-NET-2 in a namespace of its own, a DNS server on
// loopback — with the client running in the sandbox's namespace (no
// runsc: gVisor's netstack adds the same cost to both paths). Run as root;
// everything it makes is removed at the end.
//
//	go run ./bench/egress >> docs/benchmarks.md
package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/miekg/dns"
	vnetns "github.com/vishvananda/netns"

	"github.com/forkbox/forkbox/bench/benchd"
	"github.com/forkbox/forkbox/internal/egress"
	"github.com/forkbox/forkbox/internal/netns"
	"github.com/forkbox/forkbox/internal/netpolicy"
)

const (
	outNS    = "egb-out"
	outHost  = "egb-h"
	outPeer  = "egb-n"
	hostIP   = "198.51.100.1"
	serverIP = "198.51.100.20"
	name     = "bench.egress.test"
)

func main() {
	var o benchd.Options
	o.Flags(11)
	sizeMiB := flag.Int("size", 100, "download size in MiB")
	runs := flag.Int("runs", 5, "downloads per path")
	pings := flag.Int("pings", 200, "small GETs per path for the first-byte latency")
	ca := flag.Bool("ca", false, "measure instead what trusting the egress CA adds to create → first command (starts a daemon from -bin)")
	creates := flag.Int("creates", 15, "with -ca: creates per measurement")
	baseBin := flag.String("base-bin", "", "with -ca: also measure a daemon from this bin dir (a build without the egress CA) for comparison")
	flag.Parse()
	if *ca {
		benchd.Main("egress-ca", func(ctx context.Context) error { return runCA(ctx, o, *baseBin, *creates) })
		return
	}
	if err := run(*sizeMiB, *runs, *pings); err != nil {
		fmt.Fprintln(os.Stderr, "egress bench:", err)
		os.Exit(1)
	}
}

// path is one way a sandbox's request goes out.
type path struct {
	label string
	pol   netpolicy.Policy
	tls   bool           // HTTPS on 443, else HTTP on 80
	roots *x509.CertPool // what the client trusts (HTTPS)
}

func run(sizeMiB, runs, pings int) error {
	ctx := context.Background()
	cleanup()
	defer cleanup()
	if err := setupOutside(); err != nil {
		return err
	}
	cas, err := newCAs()
	if err != nil {
		return err
	}
	if err := startServer(int64(sizeMiB)<<20, cas.server); err != nil {
		return err
	}
	res, stopDNS, err := startDNS()
	if err != nil {
		return err
	}
	defer stopDNS()
	fill, err := newFilling(ctx)
	if err != nil {
		return err
	}
	defer fill.close()
	m, p, stop, err := startProxy(ctx, res, cas, fill.expander())
	if err != nil {
		return err
	}
	defer stop()
	lease, err := m.Allocate(ctx, "egbench0", true)
	if err != nil {
		return err
	}
	var rows [][4]string
	for _, pth := range append(paths(cas), placeholderPaths(cas)...) {
		if err := m.SetPolicy(ctx, lease.ID, pth.pol); err != nil {
			return err
		}
		mbps, ttfb, err := measure(lease.NSPath, pth, sizeMiB, runs, pings)
		if err != nil {
			return fmt.Errorf("%s: %w", pth.label, err)
		}
		rows = append(rows, [4]string{pth.label, fmt.Sprintf("%.0f", mbps), fmt.Sprintf("%.3f", ttfb[0]), fmt.Sprintf("%.3f", ttfb[1])})
	}
	if st := p.Stats(); st.Allowed == 0 || st.Denied != 0 {
		return fmt.Errorf("the proxied runs did not go through the proxy: %+v", st)
	}
	alone, err := fill.costs(ctx, 1000)
	if err != nil {
		return err
	}
	report(sizeMiB, runs, pings, rows)
	fmt.Printf("\n%s\n", alone)
	return nil
}

// paths are the measured ways out: plain HTTP direct and through the
// proxy; HTTPS direct, through the proxy end to end (an allowed name), and
// intercepted (a rule sets a header: the proxy terminates TLS with the
// egress CA and re-encrypts).
func paths(cas *benchCAs) []path {
	rule := netpolicy.Rules{AllowOut: []string{name}, Rules: map[string][]netpolicy.Rule{
		name: {{Transform: &netpolicy.Transform{Headers: map[string]string{"Authorization": "Bearer bench"}}}}}}
	return []path{
		{label: "HTTP direct (address rules)", pol: policy(netpolicy.Rules{})},
		{label: "HTTP through the egress proxy (allowOut name)", pol: policy(netpolicy.Rules{AllowOut: []string{name}})},
		{label: "HTTPS direct (address rules)", pol: policy(netpolicy.Rules{}), tls: true, roots: cas.serverPool},
		{label: "HTTPS through the proxy, end to end (allowOut name)", pol: policy(netpolicy.Rules{AllowOut: []string{name}}), tls: true, roots: cas.serverPool},
		{label: "HTTPS intercepted (a rules header: egress CA, re-encrypted)", pol: policy(rule), tls: true, roots: cas.egressPool},
	}
}

// startProxy makes the sandbox network manager and the proxy its
// redirect points at; stop removes both.
func startProxy(ctx context.Context, res *net.Resolver, cas *benchCAs, fill egress.Expander) (*netns.Manager, *egress.Proxy, func(), error) {
	ln, err := net.Listen("tcp4", "0.0.0.0:0")
	if err != nil {
		return nil, nil, nil, err
	}
	m, err := netns.New(ctx, netns.Config{
		Subnet: netip.MustParsePrefix("10.250.0.0/16"), NamePrefix: "egbsb-", LinkPrefix: "egbs",
		Table: "forkbox_egbench", ResolvConf: "/nonexistent",
		EgressPort: uint16(ln.Addr().(*net.TCPAddr).Port),
		Logger:     slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		ln.Close()
		return nil, nil, nil, err
	}
	p, err := egress.New(egress.Config{
		Policies: egress.PolicyFunc(func(src netip.Addr) (netpolicy.Policy, bool) {
			l, ok := m.LeaseByAddr(src)
			return l.Policy, ok
		}),
		Resolver: res, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		CA: cas.egress, RootCAs: cas.serverPool, Placeholders: fill,
	})
	if err != nil {
		ln.Close()
		m.Close(ctx)
		return nil, nil, nil, err
	}
	go p.Serve(ln)
	return m, p, func() { p.Close(); m.Close(ctx) }, nil
}

func policy(r netpolicy.Rules) netpolicy.Policy {
	_, p, err := netpolicy.Compile(r, true, nil)
	if err != nil {
		panic(err)
	}
	return p
}

// measure runs, inside nsPath, the downloads (median MiB/s) and the small
// GETs (median and p90 ms to the first byte, fresh connection and, for
// HTTPS, a full handshake each). Every socket is made on the namespace's
// locked thread.
func measure(nsPath string, pth path, sizeMiB, runs, pings int) (float64, [2]float64, error) {
	var mbps []float64
	var ttfb []float64
	err := inNS(nsPath, func() error {
		for i := 0; i < runs; i++ {
			start := time.Now()
			n, err := fetch(pth, "/big")
			if err != nil {
				return err
			}
			if n != int64(sizeMiB)<<20 {
				return fmt.Errorf("downloaded %d bytes", n)
			}
			mbps = append(mbps, float64(sizeMiB)/time.Since(start).Seconds())
		}
		for i := 0; i < pings; i++ {
			start := time.Now()
			if _, err := fetch(pth, "/small"); err != nil {
				return err
			}
			ttfb = append(ttfb, float64(time.Since(start).Microseconds())/1000)
		}
		return nil
	})
	sort.Float64s(mbps)
	sort.Float64s(ttfb)
	if err != nil || len(mbps) == 0 || len(ttfb) == 0 {
		return 0, [2]float64{}, err
	}
	return mbps[len(mbps)/2], [2]float64{ttfb[len(ttfb)/2], ttfb[len(ttfb)*9/10]}, nil
}

// fetch GETs path from the server by name on a new connection.
func fetch(pth path, urlPath string) (int64, error) {
	port := "80"
	if pth.tls {
		port = "443"
	}
	raw, err := net.DialTimeout("tcp4", serverIP+":"+port, 5*time.Second)
	if err != nil {
		return 0, err
	}
	defer raw.Close()
	raw.SetDeadline(time.Now().Add(time.Minute))
	c := raw
	if pth.tls {
		tc := tls.Client(raw, &tls.Config{ServerName: name, RootCAs: pth.roots, NextProtos: []string{"http/1.1"}})
		if err := tc.Handshake(); err != nil {
			return 0, err
		}
		c = tc
	}
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", urlPath, name)
	resp, err := http.ReadResponse(bufio.NewReaderSize(c, 64<<10), nil)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return 0, fmt.Errorf("status %d", resp.StatusCode)
	}
	return io.Copy(io.Discard, resp.Body)
}

func report(sizeMiB, runs, pings int, rows [][4]string) {
	fmt.Printf("\n## Egress proxy: throughput and first-byte latency\n\n")
	fmt.Printf("`go run ./bench/egress` (root; %d MiB download ×%d, %d small GETs on fresh connections, per path).\n", sizeMiB, runs, pings)
	fmt.Printf("A sandbox network from internal/netns (nftables rules and redirect, no runsc), an outside\n")
	fmt.Printf("server on TEST-NET-2 in its own namespace (HTTP on 80, HTTPS on 443 with a test CA's\n")
	fmt.Printf("certificate), the proxy resolving the allowed name through a DNS server on loopback. Medians;\n")
	fmt.Printf("the first-byte time includes connect, the TLS handshake (HTTPS), request and answer.\n\n")
	fmt.Printf("| path | download MiB/s | first byte ms (median) | first byte ms (p90) |\n|---|---|---|---|\n")
	for _, r := range rows {
		fmt.Printf("| %s | %s | %s | %s |\n", r[0], r[1], r[2], r[3])
	}
}

// startServer serves /big (size bytes) and /small in the outside
// namespace, over HTTP on 80 and HTTPS on 443 (cert).
func startServer(size int64, cert tls.Certificate) error {
	var ln, lnTLS net.Listener
	err := inNS("/var/run/netns/"+outNS, func() (err error) {
		if ln, err = net.Listen("tcp4", serverIP+":80"); err != nil {
			return err
		}
		lnTLS, err = net.Listen("tcp4", serverIP+":443")
		return err
	})
	if err != nil {
		return err
	}
	chunk := make([]byte, 1<<20)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/small" {
			io.WriteString(w, "ok")
			return
		}
		w.Header().Set("Content-Length", fmt.Sprint(size))
		for left := size; left > 0; left -= int64(len(chunk)) {
			if _, err := w.Write(chunk[:min(left, int64(len(chunk)))]); err != nil {
				return
			}
		}
	})
	go http.Serve(ln, h)
	srv := &http.Server{Handler: h, TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}}}
	go srv.ServeTLS(lnTLS, "", "")
	return nil
}

func startDNS() (*net.Resolver, func(), error) {
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		return nil, nil, err
	}
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		if q := r.Question[0]; strings.EqualFold(q.Name, name+".") && q.Qtype == dns.TypeA {
			m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 5}, A: net.ParseIP(serverIP)})
		}
		w.WriteMsg(m)
	})}
	go srv.ActivateAndServe()
	addr := pc.LocalAddr().String()
	res := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "udp4", addr)
	}}
	return res, func() { srv.Shutdown() }, nil
}

// setupOutside creates the server's namespace and checks the route to it
// goes through the bench's own veth before any traffic.
func setupOutside() error {
	for _, args := range [][]string{
		{"netns", "add", outNS},
		{"link", "add", outHost, "type", "veth", "peer", "name", outPeer, "netns", outNS},
		{"addr", "add", hostIP + "/24", "dev", outHost},
		{"link", "set", outHost, "up"},
		{"-n", outNS, "addr", "add", serverIP + "/24", "dev", outPeer},
		{"-n", outNS, "link", "set", outPeer, "up"},
		{"-n", outNS, "link", "set", "lo", "up"},
		{"-n", outNS, "route", "add", "default", "via", hostIP},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	out, err := exec.Command("ip", "route", "get", serverIP).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "dev "+outHost+" ") {
		return fmt.Errorf("route to %s not through %s: %s", serverIP, outHost, out)
	}
	return nil
}

func cleanup() {
	exec.Command("ip", "link", "del", outHost).Run()
	exec.Command("ip", "netns", "del", outNS).Run()
}

// inNS runs f on a locked thread inside the namespace at path; the thread
// is discarded afterwards.
func inNS(path string, f func() error) error {
	ch := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		ns, err := vnetns.GetFromPath(path)
		if err != nil {
			ch <- err
			return
		}
		defer ns.Close()
		if err := vnetns.Set(ns); err != nil {
			ch <- err
			return
		}
		ch <- f()
	}()
	return <-ch
}
