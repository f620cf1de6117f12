// Package dist holds the tests of what a sturdy release ships: the
// LICENSE and NOTICE, the default configs, the systemd unit, and the .deb
// built by scripts/release.sh, installed and removed for real. It has no
// code of its own; the release is built by scripts/release.sh.
package dist
