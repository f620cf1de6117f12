package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/sturdyproxy/sturdy/internal/adapt/nginx"
	"github.com/sturdyproxy/sturdy/internal/adapt/nginx/doctor"
	"github.com/sturdyproxy/sturdy/internal/adapt/nginx/translate"
	"github.com/sturdyproxy/sturdy/internal/config"
)

// defaultNginxConf is where distributions keep nginx's main config.
const defaultNginxConf = "/etc/nginx/nginx.conf"

// listFlag collects a repeatable flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// parseSubject parses flags around the "nginx" subject, which may come
// first ("doctor nginx -c x") or after the flags ("doctor -c x nginx").
func parseSubject(fs *flag.FlagSet, args []string) error {
	seen := false
	if len(args) > 0 && args[0] == "nginx" {
		seen, args = true, args[1:]
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	rest := fs.Args()
	if !seen && len(rest) > 0 && rest[0] == "nginx" {
		seen = true
		if err := fs.Parse(rest[1:]); err != nil {
			return err
		}
		rest = fs.Args()
	}
	switch {
	case !seen && len(rest) == 0:
		return errors.New("missing what to read; the only source supported is nginx")
	case !seen:
		return fmt.Errorf("unknown source %q; the only source supported is nginx", rest[0])
	case len(rest) > 0:
		return fmt.Errorf("unexpected argument %q", rest[0])
	}
	return nil
}

func (p *program) cmdDoctor(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := p.newFlags("doctor", stderr)
	conf := fs.String("c", defaultNginxConf, "nginx main config `FILE`; includes are read relative to its directory")
	var errorLogs, accessLogs listFlag
	fs.Var(&errorLogs, "error-log", "nginx error log `FILE` (plain or .gz); repeat for rotated logs, oldest first")
	fs.Var(&accessLogs, "access-log", "nginx access log `FILE` (combined format with extra fields, or JSON lines; plain or .gz); repeatable")
	asJSON := fs.Bool("json", false, "print the report as JSON (for CI)")
	if err := parseSubject(fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		fmt.Fprintf(stderr, "sturdy doctor: %v\n", err)
		fs.Usage()
		return exitUsage
	}
	in := doctor.Input{Config: *conf, ErrorLogs: errorLogs, AccessLogs: accessLogs}
	if !flagSet(fs, "c") && len(errorLogs)+len(accessLogs) > 0 {
		if _, err := os.Stat(*conf); err != nil {
			fmt.Fprintf(stderr, "sturdy doctor: %s not found; analysing the logs without a config (pass -c for config findings)\n", *conf)
			in.Config = ""
		}
	}
	rep, err := doctor.Run(ctx, in)
	if err != nil {
		fmt.Fprintf(stderr, "sturdy doctor: %v\n", err)
		if !flagSet(fs, "c") && errors.Is(err, os.ErrNotExist) {
			fmt.Fprintln(stderr, "Pass the nginx config with -c, e.g. sturdy doctor nginx -c ./nginx/nginx.conf")
		}
		return exitFail
	}
	if *asJSON {
		err = rep.WriteJSON(stdout)
	} else {
		err = rep.WriteText(stdout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "sturdy doctor: cannot write the report: %v\n", err)
		return exitFail
	}
	if rep.HasHigh() {
		return exitFail
	}
	return exitOK
}

func (p *program) cmdImport(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := p.newFlags("import", stderr)
	conf := fs.String("c", defaultNginxConf, "nginx main config `FILE`; includes are read relative to its directory")
	out := fs.String("o", "-", "write the sturdy config to `FILE` (\"-\": standard output)")
	if err := parseSubject(fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		fmt.Fprintf(stderr, "sturdy import: %v\n", err)
		fs.Usage()
		return exitUsage
	}
	cfg, err := nginx.ParseFile(*conf, nginx.Options{})
	if err != nil {
		fmt.Fprintf(stderr, "sturdy import: %v\n", err)
		return exitFail
	}
	for _, n := range cfg.Notes {
		fmt.Fprintf(stderr, "sturdy import: note: %s\n", n)
	}
	res, err := translate.Translate(nginx.NewSite(cfg), translate.Options{})
	if err != nil {
		fmt.Fprintf(stderr, "sturdy import: %s: %v\n", *conf, err)
		return exitFail
	}
	name := *out
	if name == "-" {
		name = "sturdy.yaml"
	}
	// The translation must pass `sturdy check`; certificates that exist
	// only on the nginx host are the one expected exception.
	if _, err := config.Parse(res.YAML, name); err != nil {
		var list config.ErrorList
		if !errors.As(err, &list) || !onlyTLS(list) {
			fmt.Fprintf(stderr, "sturdy import: the translation does not pass sturdy check; please report this with your nginx config:\n%v\n", err)
			return exitFail
		}
	}
	if *out == "-" {
		if _, err := stdout.Write(res.YAML); err != nil {
			fmt.Fprintf(stderr, "sturdy import: %v\n", err)
			return exitFail
		}
	} else if err := writeFileAtomic(*out, res.YAML); err != nil {
		fmt.Fprintf(stderr, "sturdy import: %v\n", err)
		return exitFail
	}
	for _, w := range res.Warnings {
		fmt.Fprintf(stderr, "sturdy import: warning: %s\n", w)
	}
	counts := map[translate.Status]int{}
	for _, b := range res.Blocks {
		counts[b.Status]++
		if b.Status == translate.NotTranslated || b.Status == translate.Refused {
			fmt.Fprintf(stderr, "sturdy import: %s\n", b.String())
		}
	}
	fmt.Fprintf(stderr, "sturdy import: translated %s: of %d server blocks and locations, %d translated, %d with differences, %d refused (access rules kept closed), %d not translated; %d nginx directives not translated (all listed at the top of the output)\n",
		*conf, len(res.Blocks), counts[translate.Translated], counts[translate.TranslatedDiffers], counts[translate.Refused], counts[translate.NotTranslated], len(res.NotTranslated))
	return exitOK
}

func onlyTLS(list config.ErrorList) bool {
	for _, e := range list {
		if !strings.Contains(e.Path, ".tls") {
			return false
		}
	}
	return len(list) > 0
}

func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) {
		if f.Name == name {
			set = true
		}
	})
	return set
}

// writeFileAtomic writes data to a temporary file next to name and renames
// it into place, so a failed write never leaves half a config.
func writeFileAtomic(name string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(name), "."+filepath.Base(name)+".tmp*")
	if err != nil {
		return fmt.Errorf("cannot write %s: %w", name, err)
	}
	tmp := f.Name()
	_, werr := f.Write(data)
	cerr := f.Close()
	if werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Chmod(tmp, 0o644)
	}
	if werr == nil {
		werr = os.Rename(tmp, name)
	}
	if werr != nil {
		os.Remove(tmp)
		return fmt.Errorf("cannot write %s: %w", name, werr)
	}
	return nil
}
