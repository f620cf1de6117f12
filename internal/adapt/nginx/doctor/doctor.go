// Package doctor diagnoses an nginx setup against the five incidents sturdy
// was built from: it checks the config for the settings that turned a
// local problem into site-wide 502s, reads the error and access logs to
// explain an outage (which client, route or request ejected the servers),
// and reports each finding with its evidence, the nginx fix and what sturdy
// does instead.
package doctor

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/sturdyproxy/sturdy/internal/adapt/nginx"
	"github.com/sturdyproxy/sturdy/internal/adapt/nginx/accesslog"
	"github.com/sturdyproxy/sturdy/internal/adapt/nginx/errlog"
)

// Input names what to diagnose.
type Input struct {
	// Config is the main nginx config file; "" skips the config checks.
	Config string
	// ErrorLogs and AccessLogs are log files, plain or gzip, oldest first.
	ErrorLogs  []string
	AccessLogs []string
	// Open opens a log file; nil means os.Open.
	Open func(name string) (io.ReadCloser, error)
}

// Report is the doctor's answer.
type Report struct {
	// Config is the main config file, Files every config file read.
	Config string   `json:"config,omitempty"`
	Files  []string `json:"config_files,omitempty"`
	// Notes are problems met while reading the config (missing includes).
	Notes    []string  `json:"notes,omitempty"`
	Findings []Finding `json:"findings"`
	// ErrorLog and AccessLog summarise the logs, nil when none was given.
	ErrorLog  *errlog.Result    `json:"error_log,omitempty"`
	AccessLog *accesslog.Result `json:"access_log,omitempty"`
	Summary   Summary           `json:"summary"`
}

// Summary counts findings by severity.
type Summary struct {
	High   int `json:"high"`
	Medium int `json:"medium"`
	Low    int `json:"low"`
}

// HasHigh reports whether any finding is of high severity.
func (r *Report) HasHigh() bool { return r.Summary.High > 0 }

// Run reads the config and logs and returns the findings. It fails only
// when an input cannot be read or the config cannot be parsed.
func Run(ctx context.Context, in Input) (*Report, error) {
	open := in.Open
	if open == nil {
		open = func(name string) (io.ReadCloser, error) { return os.Open(name) }
	}
	rep := &Report{Config: in.Config}
	var site *nginx.Site
	if in.Config != "" {
		cfg, err := nginx.ParseFile(in.Config, nginx.Options{})
		if err != nil {
			return nil, err
		}
		rep.Files = cfg.Files
		for _, n := range cfg.Notes {
			rep.Notes = append(rep.Notes, n.String())
		}
		site = nginx.NewSite(cfg)
		rep.Findings = append(rep.Findings, checkConfig(site)...)
	}
	if len(in.ErrorLogs) > 0 {
		a := errlog.New(errlog.Options{UpstreamOf: upstreamOf(site)})
		for _, name := range in.ErrorLogs {
			if err := readLog(ctx, open, name, a.Read); err != nil {
				return nil, err
			}
		}
		rep.ErrorLog = a.Result()
	}
	if len(in.AccessLogs) > 0 {
		a := accesslog.New(0)
		for _, name := range in.AccessLogs {
			if err := readLog(ctx, open, name, a.Read); err != nil {
				return nil, err
			}
		}
		rep.AccessLog = a.Result()
	}
	rep.Findings = append(rep.Findings, logFindings(site, rep.ErrorLog, rep.AccessLog)...)
	sortFindings(rep.Findings)
	for _, f := range rep.Findings {
		switch f.Severity {
		case High:
			rep.Summary.High++
		case Medium:
			rep.Summary.Medium++
		case Low:
			rep.Summary.Low++
		}
	}
	if rep.Findings == nil {
		rep.Findings = []Finding{}
	}
	return rep, nil
}

func readLog(ctx context.Context, open func(string) (io.ReadCloser, error), name string, read func(context.Context, io.Reader, string) error) error {
	f, err := open(name)
	if err != nil {
		return fmt.Errorf("cannot open log: %w", err)
	}
	defer f.Close()
	return read(ctx, f, name)
}

// upstreamOf maps backend addresses to the upstream blocks holding them.
// An address in several blocks maps to none (ambiguous).
func upstreamOf(site *nginx.Site) func(string) string {
	if site == nil {
		return nil
	}
	m := map[string]string{}
	for _, u := range site.Upstreams {
		for _, s := range u.Servers {
			if prev, ok := m[s.Addr]; ok && prev != u.Name {
				m[s.Addr] = ""
				continue
			}
			m[s.Addr] = u.Name
		}
	}
	return func(addr string) string { return m[addr] }
}

// checkConfig runs every config check.
func checkConfig(site *nginx.Site) []Finding {
	u := newUsage(site)
	var out []Finding
	out = append(out, checkPassive5xx(u)...)
	out = append(out, checkSlowRoute(u)...)
	out = append(out, checkRequestEjection(u)...)
	out = append(out, checkNonIdempotent(u)...)
	out = append(out, checkNoZone(u)...)
	out = append(out, checkIPHash(u)...)
	out = append(out, checkDefaultServer(u)...)
	out = append(out, checkActiveCheck(u)...)
	out = append(out, checkSSL(u)...)
	out = append(out, checkKeepalive(u)...)
	out = append(out, checkDNS(u)...)
	out = append(out, checkCache(u)...)
	return out
}
