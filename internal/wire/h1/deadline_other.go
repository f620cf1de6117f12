//go:build !linux

package h1

// writeLazily puts the deadline on at once off Linux.
func (d *writeDeadline) writeLazily(b []byte) (int, error) {
	d.apply()
	return d.nc.Write(b)
}
