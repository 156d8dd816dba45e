package freeport

import (
	"net"
	"strconv"
	"testing"
)

// Pick returns distinct ports below the ephemeral range that can be bound.
func TestPick(t *testing.T) {
	ports, err := Pick(20)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if p < lowest || p >= ephemeralFloor() {
			t.Fatalf("port %d outside [%d, %d)", p, lowest, ephemeralFloor())
		}
		if seen[p] {
			t.Fatalf("port %d twice", p)
		}
		seen[p] = true
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			t.Fatalf("port %d cannot be bound: %v", p, err)
		}
		_ = l.Close()
	}
}
