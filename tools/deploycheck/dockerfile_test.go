package deploycheck

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/buildkit/frontend/dockerfile/linter"
	"github.com/moby/buildkit/frontend/dockerfile/parser"
)

// repo is the root of sturdy's repository, two levels up from here.
const repo = "../.."

// dockerfile parses the Dockerfile with BuildKit's parser and instruction
// reader, with every lint rule on (also the experimental ones), the checks
// "docker build --check" runs before a build.
func dockerfile(t *testing.T) (stages []instructions.Stage, args []instructions.ArgCommand) {
	t.Helper()
	f, err := os.Open(filepath.Join(repo, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	res, err := parser.Parse(f)
	if err != nil {
		t.Fatalf("Dockerfile: %v", err)
	}
	for _, w := range res.Warnings {
		t.Errorf("Dockerfile:%d: parser warning: %s", w.Location.Start.Line, w.Short)
	}
	lint := linter.New(&linter.Config{ExperimentalAll: true, Warn: func(rule, desc, url, msg string, loc []parser.Range) {
		line := 0
		if len(loc) > 0 {
			line = loc[0].Start.Line
		}
		t.Errorf("Dockerfile:%d: lint %s: %s", line, rule, msg)
	}})
	stages, args, err = instructions.Parse(res.AST, lint)
	if err != nil {
		t.Fatalf("Dockerfile: %v", err)
	}
	return stages, args
}

// The image is multi-stage: built with the Go image, run from scratch as
// a non-root user with the default config, a HEALTHCHECK through sturdy
// healthcheck, the ports it listens on and SIGTERM to stop.
func TestDockerfileShape(t *testing.T) {
	stages, _ := dockerfile(t)
	if len(stages) != 2 {
		t.Fatalf("%d stages; want build and run", len(stages))
	}
	build, final := stages[0], stages[1]
	if !strings.HasPrefix(build.BaseName, "golang:") || build.Name != "build" {
		t.Errorf("first stage %q from %q; want \"build\" from golang", build.Name, build.BaseName)
	}
	if final.BaseName != "scratch" && !strings.HasPrefix(final.BaseName, "gcr.io/distroless/static") {
		t.Errorf("final stage from %q; want scratch or distroless static", final.BaseName)
	}
	var (
		user, stop     string
		exposed        []string
		health         []string
		entry, cmd     []string
		copied         = map[string]string{} // destination -> source
		fromBuild      = map[string]bool{}
		healthInterval bool
	)
	for _, c := range final.Commands {
		switch c := c.(type) {
		case *instructions.UserCommand:
			user = c.User
		case *instructions.StopSignalCommand:
			stop = c.Signal
		case *instructions.ExposeCommand:
			exposed = append(exposed, c.Ports...)
		case *instructions.HealthCheckCommand:
			health = c.Health.Test
			healthInterval = c.Health.Interval > 0 && c.Health.Timeout > 0
		case *instructions.EntrypointCommand:
			entry = c.CmdLine
			if c.PrependShell {
				t.Error("ENTRYPOINT in shell form: scratch has no shell")
			}
		case *instructions.CmdCommand:
			cmd = c.CmdLine
			if c.PrependShell {
				t.Error("CMD in shell form: scratch has no shell")
			}
		case *instructions.CopyCommand:
			for _, src := range c.SourcePaths {
				copied[c.DestPath+"|"+src] = src
				if c.From == "build" {
					fromBuild[src] = true
				}
			}
		case *instructions.RunCommand:
			t.Errorf("RUN in the final stage: %v (scratch has no shell)", c.CmdLine)
		}
	}
	if user == "" || user == "root" || strings.HasPrefix(user, "0:") || user == "0" {
		t.Errorf("USER %q; want a non-root user", user)
	}
	if stop != "SIGTERM" {
		t.Errorf("STOPSIGNAL %q; want SIGTERM (sturdy drains on it)", stop)
	}
	for _, p := range []string{"8080", "9901"} {
		if !slices.Contains(exposed, p) {
			t.Errorf("EXPOSE lacks %s: %v", p, exposed)
		}
	}
	if len(health) < 3 || health[0] != "CMD" || health[1] != "/usr/bin/sturdy" || health[2] != "healthcheck" || !healthInterval {
		t.Errorf("HEALTHCHECK %v; want CMD /usr/bin/sturdy healthcheck with an interval and a timeout", health)
	}
	if !slices.Equal(entry, []string{"/usr/bin/sturdy"}) || !slices.Equal(cmd, []string{"run", "-c", "/etc/sturdy/sturdy.yaml"}) {
		t.Errorf("ENTRYPOINT %v CMD %v", entry, cmd)
	}
	if !fromBuild["/out/sturdy"] {
		t.Error("the binary is not copied from the build stage")
	}
	if _, ok := copied["/etc/sturdy/sturdy.yaml|contrib/docker/sturdy.yaml"]; !ok {
		t.Errorf("the default config is not copied to /etc/sturdy/sturdy.yaml: %v", copied)
	}
	for dst, src := range copied {
		if fromBuild[src] {
			continue
		}
		if _, err := os.Stat(filepath.Join(repo, src)); err != nil {
			t.Errorf("COPY %s: %v", dst, err)
		}
	}
}

// The build stage's go build line, with its ARGs expanded as docker would,
// builds a static binary here, and that binary passes its own check on the
// config the image ships (as the next RUN line does in the image).
func TestDockerfileBuildCommandWorks(t *testing.T) {
	if testing.Short() {
		t.Skip("builds sturdy; skipped with -short")
	}
	stages, metaArgs := dockerfile(t)
	env := map[string]string{}
	for _, a := range metaArgs {
		for _, kv := range a.Args {
			if kv.Value != nil {
				env[kv.Key] = *kv.Value
			}
		}
	}
	var goBuild, check string
	for _, c := range stages[0].Commands {
		switch c := c.(type) {
		case *instructions.ArgCommand:
			for _, kv := range c.Args {
				if kv.Value != nil {
					env[kv.Key] = *kv.Value
				}
			}
		case *instructions.RunCommand:
			line := strings.Join(c.CmdLine, " ")
			if strings.Contains(line, "go build") {
				goBuild = line
			}
			if strings.Contains(line, " check ") {
				check = line
			}
		}
	}
	if goBuild == "" || check == "" {
		t.Fatalf("no go build or check RUN line in the build stage")
	}
	for _, want := range []string{"CGO_ENABLED=0", "-trimpath", "-X github.com/sturdyproxy/sturdy/internal/cli.version=", "./cmd/sturdy"} {
		if !strings.Contains(goBuild, want) {
			t.Errorf("go build line lacks %q: %s", want, goBuild)
		}
	}
	// A RUN line in shell form goes to /bin/sh -c as written, with the
	// ARGs in its environment; so here. The image builds into /out; here,
	// into a temporary directory.
	out := t.TempDir()
	script := strings.ReplaceAll(goBuild, "/out/", out+"/") + " && " + strings.ReplaceAll(check, "/out/", out+"/")
	cmd := exec.Command("sh", "-c", script)
	cmd.Dir = repo
	cmd.Env = append(os.Environ(), "GOFLAGS=")
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s\n%v\n%s", script, err, b)
	}
	// CGO_ENABLED=0: a static binary that needs no libc in scratch.
	if b, err := exec.Command("file", filepath.Join(out, "sturdy")).Output(); err == nil && !strings.Contains(string(b), "statically linked") {
		t.Errorf("not static: %s", b)
	}
	b, err := exec.Command(filepath.Join(out, "sturdy"), "--version").Output()
	if err != nil || !strings.HasPrefix(string(b), "sturdy "+env["VERSION"]) {
		t.Errorf("--version: %v %q; want the stamped version %q", err, b, env["VERSION"])
	}
}

// The image builds with the Go version go.mod asks for.
func TestDockerfileGoVersionMatchesGoMod(t *testing.T) {
	_, metaArgs := dockerfile(t)
	var want string
	mod, err := os.ReadFile(filepath.Join(repo, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(mod), "\n") {
		if v, ok := strings.CutPrefix(l, "go "); ok {
			want = strings.TrimSpace(v)
		}
	}
	for _, a := range metaArgs {
		for _, kv := range a.Args {
			if kv.Key == "GO_VERSION" && (kv.Value == nil || *kv.Value != want) {
				t.Errorf("GO_VERSION %v; go.mod says go %s", kv.ValueString(), want)
			}
		}
	}
}
