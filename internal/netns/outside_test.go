package netns

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/forkbox/forkbox/internal/netns/testnet"
)

// The "outside world" of the policy tests: a namespace this test creates,
// joined to the host by its own veth, holding addresses of TEST-NET-2
// (198.51.100.0/24, not private, so no rule treats it specially) and, for
// the metadata check, 169.254.169.254 through a /32 route that exists only
// while the test runs. Tests send traffic nowhere else.
const (
	outNS       = "egpol-out"
	outHostLink = "egpol-h"
	outNSLink   = "egpol-n"
	outHostIP   = "198.51.100.1"
	metadataIP  = "169.254.169.254"
)

// outAddrs are the outside namespace's servers.
var outAddrs = []string{"198.51.100.7", "198.51.100.8", "198.51.100.9"}

func ipRun(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func outsideCleanup() {
	exec.Command("ip", "route", "del", metadataIP+"/32", "dev", outHostLink).Run()
	exec.Command("ip", "link", "del", outHostLink).Run()
	exec.Command("ip", "netns", "del", outNS).Run()
}

// setupOutside creates the outside namespace, routes TEST-NET-2 and the
// metadata address through the test's veth and checks with `ip route get`
// that they go nowhere else before any traffic. It returns the path of
// the namespace.
func setupOutside(t *testing.T) string {
	t.Helper()
	testnet.Lock(t)
	outsideCleanup() // leftovers of an interrupted run
	t.Cleanup(outsideCleanup)
	ipRun(t, "netns", "add", outNS)
	ipRun(t, "link", "add", outHostLink, "type", "veth", "peer", "name", outNSLink, "netns", outNS)
	ipRun(t, "addr", "add", outHostIP+"/24", "dev", outHostLink)
	ipRun(t, "link", "set", outHostLink, "up")
	for _, a := range append(outAddrs, metadataIP) {
		bits := "/24"
		if a == metadataIP {
			bits = "/32"
		}
		ipRun(t, "-n", outNS, "addr", "add", a+bits, "dev", outNSLink)
	}
	ipRun(t, "-n", outNS, "link", "set", outNSLink, "up")
	ipRun(t, "-n", outNS, "link", "set", "lo", "up")
	ipRun(t, "-n", outNS, "route", "add", "default", "via", outHostIP)
	ipRun(t, "route", "add", metadataIP+"/32", "dev", outHostLink)
	for _, a := range append(outAddrs, metadataIP) {
		if got := ipRun(t, "route", "get", a); !strings.Contains(got, "dev "+outHostLink+" ") {
			t.Fatalf("route to %s does not use %s: %s", a, outHostLink, got)
		}
	}
	return "/var/run/netns/" + outNS
}
