package daemon

import (
	"net"
	"strings"
	"testing"
)

// TestAdvertiseURL: the default is the bound address (with the host name
// for an unspecified one, which no other host can dial); a given URL
// must be http(s) with a host.
func TestAdvertiseURL(t *testing.T) {
	for _, tc := range []struct {
		flag  string
		bound string
		want  string
	}{
		{"", "127.0.0.1:3000", "http://127.0.0.1:3000"},
		{"", "[::1]:41234", "http://[::1]:41234"},
		{"", "0.0.0.0:3000", "http://" + net.JoinHostPort(hostname(), "3000")},
		{"https://node-b.internal:443", "0.0.0.0:3000", "https://node-b.internal:443"},
	} {
		addr, err := net.ResolveTCPAddr("tcp", tc.bound)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := advertiseURL(tc.flag, addr); err != nil || got != tc.want {
			t.Errorf("advertiseURL(%q, %s) = %q, %v; want %q", tc.flag, tc.bound, got, err, tc.want)
		}
	}
	for _, bad := range []string{"node-b:3000", "ftp://node-b", "http://", "://x"} {
		if err := checkAdvertiseURL(bad); err == nil || !strings.Contains(err.Error(), "--advertise-url") {
			t.Errorf("checkAdvertiseURL(%q) = %v, want an error naming the flag", bad, err)
		}
	}
}
