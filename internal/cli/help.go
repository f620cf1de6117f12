package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

// defaultConfig is where -c looks when it is not given.
const defaultConfig = "./sturdy.yaml"

// configFlag defines the -c flag of the commands that read a sturdy config.
func configFlag(fs *flag.FlagSet) *string {
	return fs.String("c", defaultConfig, "read the sturdy config from `FILE`")
}

// flagCapture is the stderr that describe passes to a command: newFlags
// hands it the command's flag set, and "-h" stops the command before it
// does anything. So help, completions and the man page read the flags
// from the very code that parses them.
type flagCapture struct {
	io.Writer
	fs *flag.FlagSet
}

// describe returns the flags command c defines, without running it.
func describe(c *command) *flag.FlagSet {
	capture := &flagCapture{Writer: io.Discard}
	c.run(context.Background(), []string{"-h"}, io.Discard, capture)
	if capture.fs == nil {
		return flag.NewFlagSet(c.name, flag.ContinueOnError)
	}
	return capture.fs
}

// newFlags returns the flag set of command name, whose -h prints the help
// shape every command shares.
func (p *program) newFlags(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(p.name+" "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	if c, ok := stderr.(*flagCapture); ok {
		c.fs = fs
	}
	fs.Usage = func() {
		if c := p.lookup(name); c != nil {
			p.writeHelp(fs.Output(), c, fs)
		}
	}
	return fs
}

// parseFlags parses args and reports the exit code to use when parsing
// ended the command (help, a bad flag, an argument where none belongs, or
// a missing default config file).
func parseFlags(fs *flag.FlagSet, args []string) (int, bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK, false
		}
		return exitUsage, false
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "%s: unexpected argument %q\n", fs.Name(), fs.Arg(0))
		return exitUsage, false
	}
	if !defaultConfigExists(fs) {
		return exitFail, false
	}
	return 0, true
}

// parseFlagsAndFile is parseFlags for a command that also takes the config
// file as its one argument (sturdy check FILE, as promtool check config
// FILE does): flags may come before or after it, and it sets *file unless
// -c gave one too, which is a usage error.
func parseFlagsAndFile(fs *flag.FlagSet, args []string, file *string) (int, bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK, false
		}
		return exitUsage, false
	}
	if fs.NArg() > 0 {
		arg := fs.Arg(0)
		cSet := false
		fs.Visit(func(f *flag.Flag) { cSet = cSet || f.Name == "c" })
		if cSet {
			fmt.Fprintf(fs.Output(), "%s: the config file is given twice (-c %s and %q); give it once\n", fs.Name(), *file, arg)
			return exitUsage, false
		}
		*file = arg
		return parseFlags(fs, fs.Args()[1:])
	}
	return parseFlags(fs, nil)
}

// defaultConfigExists reports false, and says what to do, when the command
// reads a sturdy config, -c was not given and ./sturdy.yaml does not exist:
// "cannot read config: open sturdy.yaml" would not say where that name came
// from.
func defaultConfigExists(fs *flag.FlagSet) bool {
	f := fs.Lookup("c")
	if f == nil || f.DefValue != defaultConfig || f.Value.String() != defaultConfig {
		return true
	}
	if _, err := os.Stat(defaultConfig); errors.Is(err, os.ErrNotExist) {
		fmt.Fprintf(fs.Output(), "%s: no config file at %s (the default for -c); pass -c FILE\n", fs.Name(), defaultConfig)
		return false
	}
	return true
}

// writeHelp prints the help of command c, whose flags are fs: the usage
// line, the one-line summary, the details, the flags with their defaults,
// and examples.
func (p *program) writeHelp(w io.Writer, c *command, fs *flag.FlagSet) {
	var b strings.Builder
	fmt.Fprintf(&b, "usage: %s\n\n%s.\n", p.usageLine(c), capitalize(c.summary))
	if c.long != "" {
		fmt.Fprintf(&b, "\n%s\n", c.long)
	}
	if c.more != nil {
		fmt.Fprintf(&b, "\n%s", c.more())
	}
	b.WriteString("\nflags:\n")
	for _, f := range flagList(fs) {
		left := "  " + f.synopsis()
		if len(left) > 22 {
			left += "\n" + strings.Repeat(" ", 24)
		} else {
			left += strings.Repeat(" ", 24-len(left))
		}
		b.WriteString(left + f.text() + "\n")
	}
	fmt.Fprintf(&b, "  %-22s%s\n", "-h, --help", "show this help")
	if len(c.aliases) > 0 {
		fmt.Fprintf(&b, "\naliases: %s\n", strings.Join(c.aliases, ", "))
	}
	if len(c.examples) > 0 {
		b.WriteString("\nexamples:\n")
		for _, e := range c.examples {
			fmt.Fprintf(&b, "  %s\n", e)
		}
	}
	io.WriteString(w, b.String())
}

func (p *program) usageLine(c *command) string {
	s := p.name + " " + c.name
	if c.args == "nginx" {
		// The subject comes first: "sturdy doctor nginx [flags]".
		return s + " nginx [flags]"
	}
	s += " [flags]"
	if c.args != "" {
		s += " " + c.args
	}
	return s
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// flagInfo is one flag as help, completions and the man page show it.
type flagInfo struct {
	name, arg, usage, def string
	repeatable            bool
}

func flagList(fs *flag.FlagSet) []flagInfo {
	var out []flagInfo
	fs.VisitAll(func(f *flag.Flag) {
		arg, usage := flag.UnquoteUsage(f)
		switch arg {
		case "float", "int", "uint":
			arg = "N"
		}
		if isBool(f) {
			arg = ""
		}
		def := f.DefValue
		if def == "false" || def == "0" || def == "0s" {
			def = ""
		}
		_, rep := f.Value.(*listFlag)
		out = append(out, flagInfo{name: f.Name, arg: strings.ToUpper(arg), usage: usage, def: def, repeatable: rep})
	})
	return out
}

func isBool(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// dashes returns the flag as written: one dash for a letter, two for a
// word (Go's flag package accepts either for both).
func (f flagInfo) dashes() string {
	if len(f.name) == 1 {
		return "-" + f.name
	}
	return "--" + f.name
}

func (f flagInfo) synopsis() string {
	if f.arg == "" {
		return f.dashes()
	}
	return f.dashes() + " " + f.arg
}

func (f flagInfo) text() string {
	s := f.usage
	if f.def != "" {
		s += " (default: " + f.def + ")"
	}
	return s
}

// takesFile reports whether the flag's argument is a file name, so that
// completions offer files.
func (f flagInfo) takesFile() bool {
	return f.arg == "FILE"
}
