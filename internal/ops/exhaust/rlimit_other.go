//go:build !unix

package exhaust

import "errors"

var errNoLimit = errors.New("no file-descriptor limit on this system")

// FileLimit is not available here.
func FileLimit() (soft, hard uint64, err error) { return 0, 0, errNoLimit }

// RaiseFileLimit is not available here.
func RaiseFileLimit() (soft, hard uint64, raised bool, err error) { return 0, 0, false, errNoLimit }
