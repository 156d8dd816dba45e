// Package freeport picks TCP ports for servers that tests start as
// separate processes (SeaweedFS, a private PostgreSQL, ChromeDriver),
// which must be told a port before they bind it.
//
// A port the kernel hands out for "127.0.0.1:0" lies inside its ephemeral
// range, and so does the local port of every outbound connection: between
// the probe and the server's bind, a connection of this or a parallel test
// process may claim it. Seen on CI: SeaweedFS's admin server failed with
// "bind: address already in use" and its table bucket never appeared.
// Ports drawn at random from below that range can be taken only by another
// listener, which is rare; callers whose server reports a lost bind start
// it again on new ports.
//
// It is for tests only. It must not be imported by production code.
package freeport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

// lowest is the first port Pick draws from: above the well-known and most
// registered service ports.
const lowest = 10000

// Pick returns n distinct ports on 127.0.0.1, free when it returns, drawn
// at random from [10000, the first ephemeral port).
func Pick(n int) ([]int, error) {
	hi := ephemeralFloor()
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	var ports []int
	for tries := 0; len(ports) < n; tries++ {
		if tries > 100*n {
			return nil, fmt.Errorf("freeport: no %d free ports in [%d, %d)", n, lowest, hi)
		}
		port := lowest + rand.IntN(hi-lowest)
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			continue
		}
		ls = append(ls, l)
		ports = append(ports, port)
	}
	return ports, nil
}

// One is Pick(1).
func One() (int, error) {
	ports, err := Pick(1)
	if err != nil {
		return 0, err
	}
	return ports[0], nil
}

// ephemeralFloor is the first port of the kernel's ephemeral range
// (Linux's default when it cannot be read), raised so that at least
// 10,000 ports lie below it.
func ephemeralFloor() int {
	floor := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if v, err := strconv.Atoi(f[0]); err == nil {
				floor = v
			}
		}
	}
	return max(floor, lowest+10000)
}
