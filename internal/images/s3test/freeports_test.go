package s3test

import "testing"

// The ports of one server and their gRPC companions are all distinct: CI
// once got one port twice and the volume server could not listen.
func TestFreePortsDistinct(t *testing.T) {
	for range 50 {
		ports, err := freePorts(4)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[int]bool{}
		for _, p := range ports {
			for _, q := range []int{p, p + 10000} {
				if seen[q] || q > 65535 {
					t.Fatalf("ports %v: %d twice or out of range", ports, q)
				}
				seen[q] = true
			}
		}
	}
}
