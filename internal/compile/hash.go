package compile

import (
	"crypto/sha256"
	"encoding/hex"
	"os"

	"github.com/sturdyproxy/sturdy/internal/config"
)

// contentHash is the config's hash with the content of the files it names
// (read again: the compile has read each a moment ago, and they are small).
// A file that cannot be read counts as such; compile reports it elsewhere.
func contentHash(cfg *config.Config) string {
	h := sha256.New()
	h.Write([]byte(cfg.Hash))
	for _, f := range cfg.Files() {
		h.Write([]byte{0})
		h.Write([]byte(f))
		h.Write([]byte{0})
		if b, err := os.ReadFile(f); err == nil {
			h.Write(b)
		} else {
			h.Write([]byte("\x00unreadable"))
		}
	}
	return hex.EncodeToString(h.Sum(nil)[:8])
}
