package main

import "testing"

// h2loadOutput is the tail of an h2load 1.52 run against sturdy.
const h2loadOutput = `Main benchmark duration is over for thread #0. Stopping all clients.
Stopped all clients for thread #0

finished in 2.00s, 3490.50 req/s, 3.49MB/s
requests: 6981 total, 7493 started, 6981 done, 6979 succeeded, 2 failed, 0 errored, 0 timeout
status codes: 7033 2xx, 0 3xx, 1 4xx, 0 5xx
traffic: 6.97MB (7312395) total, 35.89KB (36749) headers (space savings 95.25%), 6.82MB (7148544) data
                     min         max         mean         sd        +/- sd
time for request:     5.37ms    511.66ms    139.42ms    107.74ms    80.60%
time for connect:     5.34ms     16.98ms      9.92ms      3.93ms    68.75%
`

func TestParseH2load(t *testing.T) {
	got, err := parseH2load(h2loadOutput)
	if err != nil {
		t.Fatal(err)
	}
	// succeeded, req/s, mean time per request in µs, no p99, failed + 4xx.
	if want := "6979 3490.50 139420.0 - 3"; got != want {
		t.Errorf("parseH2load = %q, want %q", got, want)
	}
	if _, err := parseH2load("finished in 2.00s, 3490.50 req/s\n"); err == nil {
		t.Error("a cut-off output was accepted")
	}
}
