package compile

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
)

// contentHash is the config's hash with the content of the files it names
// and of those the compile read: the bytes it compiled, not a second read
// that may see a newer file. A file that cannot be read counts as such;
// compile reports it elsewhere.
func (c *compiler) contentHash() string {
	h := sha256.New()
	h.Write([]byte(c.cfg.Hash))
	names := c.cfg.Files()
	for _, f := range c.read1 {
		if !slices.Contains(names, f) {
			names = append(names, f) // error pages, ...
		}
	}
	for _, f := range names {
		h.Write([]byte{0})
		h.Write([]byte(f))
		h.Write([]byte{0})
		if b, err := c.read(f); err == nil {
			h.Write(b)
		} else {
			h.Write([]byte("\x00unreadable"))
		}
	}
	return hex.EncodeToString(h.Sum(nil)[:8])
}
