package cli

import (
	"fmt"
	"time"

	"github.com/sturdyproxy/sturdy/internal/acme"
	"github.com/sturdyproxy/sturdy/internal/certs"
	"github.com/sturdyproxy/sturdy/internal/config"
)

// checkTLS reads every certificate, key and CA file of the TLS settings
// through packages certs and acme (until the compile step does), so that
// check reports a file that cannot load as an error, and returns the
// certificate warnings. It orders nothing and creates no directory.
func checkTLS(cfg *config.Config) (warnings []config.Error, err error) {
	if _, err := acme.Compile(cfg); err != nil {
		return nil, err
	}
	var src certs.Source
	if cfg.ACME != nil {
		src = acme.New(acme.Options{}) // never run: compile only needs a source to point at
	}
	ls, err := certs.Compile(cfg, src)
	if err != nil {
		return nil, err
	}
	for i, p := range cfg.Pools {
		if p.TLS != nil {
			path := fmt.Sprintf("pools[%d].tls", i)
			if _, err := certs.UpstreamConfig(p.TLS, path); err != nil {
				// The message starts with the key path.
				return nil, config.ErrorList{{File: cfg.File, Line: cfg.Line(path), Msg: err.Error()}}
			}
		}
	}
	return append(certs.Warnings(cfg, ls, time.Now()), acme.Warnings(cfg)...), nil
}
