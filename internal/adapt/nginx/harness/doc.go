// Package harness measures how closely `sturdy import nginx` reproduces
// nginx: for every configuration of the corpus (../testdata/corpus) its
// tests start Debian's nginx with the configuration and sturdy with its
// translation, both in front of one recording backend on loopback, send both
// the same requests, and compare what the client got and what the backend
// received. The package holds only tests; see docs/migrating-from-nginx.md.
package harness
