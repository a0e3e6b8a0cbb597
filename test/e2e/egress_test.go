package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"golang.org/x/sys/unix"

	"github.com/forkbox/forkbox/internal/netns/testnet"
)

// The outside world of the egress test: namespace egr-out, joined to the
// host by the test's own veth, with servers on TEST-NET-2 addresses (not
// private, so no rule treats them specially) and on 169.254.169.254 (the
// metadata address, routed into the namespace only while the test runs);
// names come from a DNS server the test runs on loopback, which the
// daemon's egress proxy is pointed at. Traffic goes nowhere else.
const (
	egrNS       = "egr-out"
	egrHostLink = "egr-h"
	egrNSLink   = "egr-n"
	egrHostIP   = "198.51.100.1"
	egrWebA     = "198.51.100.10" // allowed names live here
	egrWebB     = "198.51.100.11" // another server
	egrWebC     = "198.51.100.12" // a third, for CIDR rules
	egrMetadata = "169.254.169.254"
)

// egrNames is the test zone: two names on one address (one allowed, one
// not), a wildcard zone, and names that resolve to forbidden addresses.
var egrNames = map[string]string{
	"allowed.egress.test.":  egrWebA,
	"other.egress.test.":    egrWebA,
	"a.wild.egress.test.":   egrWebA,
	"x.y.wild.egress.test.": egrWebA,
	"wild.egress.test.":     egrWebA,
	"b.egress.test.":        egrWebB,
	"private.egress.test.":  "10.9.9.9",
	"metadata.egress.test.": egrMetadata,
	"loopback.egress.test.": "127.0.0.1",
	"socks.egress.test.":    egrSocks,
}

func egrCleanup() {
	exec.Command("ip", "route", "del", egrMetadata+"/32", "dev", egrHostLink).Run()
	exec.Command("ip", "link", "del", egrHostLink).Run()
	exec.Command("ip", "netns", "del", egrNS).Run()
}

// setupEgressOutside creates the namespace and routes, and checks with
// `ip route get` that every server address goes through the test's veth.
func setupEgressOutside(t *testing.T) {
	t.Helper()
	testnet.Lock(t)
	egrCleanup()
	t.Cleanup(egrCleanup)
	ipCmd(t, "netns", "add", egrNS)
	ipCmd(t, "link", "add", egrHostLink, "type", "veth", "peer", "name", egrNSLink, "netns", egrNS)
	ipCmd(t, "addr", "add", egrHostIP+"/24", "dev", egrHostLink)
	ipCmd(t, "link", "set", egrHostLink, "up")
	for _, a := range []string{egrWebA + "/24", egrWebB + "/24", egrWebC + "/24", egrSocks + "/24", egrMetadata + "/32"} {
		ipCmd(t, "-n", egrNS, "addr", "add", a, "dev", egrNSLink)
	}
	ipCmd(t, "-n", egrNS, "link", "set", egrNSLink, "up")
	ipCmd(t, "-n", egrNS, "link", "set", "lo", "up")
	ipCmd(t, "-n", egrNS, "route", "add", "default", "via", egrHostIP)
	ipCmd(t, "route", "add", egrMetadata+"/32", "dev", egrHostLink)
	for _, a := range []string{egrWebA, egrWebB, egrWebC, egrSocks, egrMetadata} {
		out, err := exec.Command("ip", "route", "get", a).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "dev "+egrHostLink+" ") {
			t.Fatalf("route to %s does not use %s: %s %v", a, egrHostLink, out, err)
		}
	}
}

// inEgressNS runs f on a thread in the outside namespace; the thread is
// never returned to the runtime.
func inEgressNS(t *testing.T, f func() error) {
	t.Helper()
	ch := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		fd, err := os.Open("/var/run/netns/" + egrNS)
		if err != nil {
			ch <- err
			return
		}
		defer fd.Close()
		if err := unix.Setns(int(fd.Fd()), unix.CLONE_NEWNET); err != nil {
			ch <- err
			return
		}
		ch <- f()
	}()
	if err := <-ch; err != nil {
		t.Fatalf("in %s: %v", egrNS, err)
	}
}

// startEgressServers starts, in the outside namespace, HTTP on 80 and
// HTTPS on 443 on A, B, C and the metadata address (each answering its
// own name and the Host, never the other headers, which seen keeps for
// /rec/ paths), a TCP server that speaks first on A:7000 and a UDP echo on
// A:7001.
func startEgressServers(t *testing.T, cert tls.Certificate, seen *seenLog) {
	t.Helper()
	for name, ip := range map[string]string{"A": egrWebA, "B": egrWebB, "C": egrWebC, "M": egrMetadata} {
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			seen.record(name, r)
			fmt.Fprintf(w, "%s host=%s", name, r.Host)
		})
		var plain, secure net.Listener
		inEgressNS(t, func() (err error) {
			if plain, err = net.Listen("tcp4", ip+":80"); err != nil {
				return err
			}
			secure, err = net.Listen("tcp4", ip+":443")
			return err
		})
		s1 := &http.Server{Handler: h}
		s2 := &http.Server{Handler: h, TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}}}
		go s1.Serve(plain)
		go s2.ServeTLS(secure, "", "")
		t.Cleanup(func() { s1.Close(); s2.Close() })
	}
	var tcp net.Listener
	var udp net.PacketConn
	inEgressNS(t, func() (err error) {
		if tcp, err = net.Listen("tcp4", egrWebA+":7000"); err != nil {
			return err
		}
		udp, err = net.ListenPacket("udp4", egrWebA+":7001")
		return err
	})
	t.Cleanup(func() { tcp.Close(); udp.Close() })
	go func() {
		for {
			c, err := tcp.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("tcp-echo\n"))
			c.Close()
		}
	}()
	go func() {
		b := make([]byte, 512)
		for {
			n, from, err := udp.ReadFrom(b)
			if err != nil {
				return
			}
			udp.WriteTo(append([]byte("udp-echo "), b[:n]...), from)
		}
	}()
}

// startEgressDNS serves egrNames on 127.0.0.1 and returns its address.
func startEgressDNS(t *testing.T) string {
	t.Helper()
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mux := dns.NewServeMux()
	mux.HandleFunc(".", func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		q := r.Question[0]
		ip, ok := egrNames[strings.ToLower(q.Name)]
		switch {
		case !ok:
			m.Rcode = dns.RcodeNameError
		case q.Qtype == dns.TypeA:
			m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 5}, A: net.ParseIP(ip)})
		}
		w.WriteMsg(m)
	})
	srv := &dns.Server{PacketConn: pc, Handler: mux}
	go srv.ActivateAndServe()
	t.Cleanup(func() { srv.Shutdown() })
	return pc.LocalAddr().String()
}

// egressCert issues a self-signed CA certificate valid for every test name
// and returns it with its PEM (which the sandbox trusts via curl --cacert).
func egressCert(t *testing.T) (tls.Certificate, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for n := range egrNames {
		names = append(names, strings.TrimSuffix(n, "."))
	}
	tpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "forkbox egress e2e"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		DNSNames: names, IsCA: true, BasicConstraintsValid: true,
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tpl, tpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key},
		string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

// TestEgressRules runs test/e2e/js/egress.mjs with the npm e2b client
// against a daemon whose egress proxy resolves through the test's DNS.
func TestEgressRules(t *testing.T) {
	dir := jsDir(t)
	setupEgressOutside(t)
	seen, socks, caPEM := startEgressWorld(t)
	control := startControl(t, seen, socks)
	innerCert, innerKey := selfSigned(t)
	// The host reaches every server: the plumbing works, so what a
	// sandbox cannot reach below is the rules' doing.
	hc := &http.Client{Timeout: 3 * time.Second}
	for _, ip := range []string{egrWebA, egrWebB, egrWebC, egrMetadata} {
		resp, err := hc.Get("http://" + ip + "/")
		if err != nil {
			t.Fatalf("host → %s: %v (test setup broken)", ip, err)
		}
		resp.Body.Close()
	}
	dnsAddr := startEgressDNS(t)
	d := startDaemon(t, "--egress-dns", dnsAddr, "--egress-ca-file", writeCAFile(t, caPEM))
	env := append(clientEnv(d),
		"EGRESS_WEB_A="+egrWebA, "EGRESS_WEB_B="+egrWebB, "EGRESS_WEB_C="+egrWebC,
		"EGRESS_METADATA="+egrMetadata, "EGRESS_CA_PEM="+caPEM, "FORKBOX_API_HOST_PORT="+strings.TrimPrefix(d.URL, "http://"),
		"EGRESS_CONTROL="+control, "EGRESS_SOCKS="+fmt.Sprintf("socks.egress.test:%d", egrSocksPort),
		"EGRESS_SOCKS_IP="+egrSocks, "EGRESS_SOCKS_USER="+egrSocksUser, "EGRESS_SOCKS_PASS="+egrSocksPass,
		"EGRESS_INNER_CERT="+innerCert, "EGRESS_INNER_KEY="+innerKey)
	runNode(t, dir, env, "--test", "--test-concurrency=1", "--test-reporter=spec", "egress.mjs")
	if ids := d.SandboxIDs(); len(ids) > 0 {
		t.Errorf("egress.mjs left sandboxes behind: %v", ids)
		d.KillAll()
	}
}
