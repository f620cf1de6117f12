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

// image is one image the Dockerfile makes: its final stage, the stage that
// builds its binary, what it runs and the config it ships.
type image struct {
	stage, build, bin, config string
	ports                     []string
}

// images are sturdy (the last stage: what a plain "docker build ." makes)
// and sturdy-gateway (--target sturdy-gateway), Kubernetes mode, whose
// client libraries the sturdy image never compiles.
var images = []image{
	{stage: "sturdy", build: "build", bin: "sturdy", config: "contrib/docker/sturdy.yaml", ports: []string{"8080", "9901"}},
	{stage: "sturdy-gateway", build: "build-gateway", bin: "sturdy-gateway", config: "contrib/docker/sturdy-gateway.yaml", ports: []string{"8080", "8443", "9901"}},
}

func stageNamed(t *testing.T, stages []instructions.Stage, name string) instructions.Stage {
	t.Helper()
	for _, s := range stages {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no stage %q in the Dockerfile", name)
	return instructions.Stage{}
}

// Each image is multi-stage: its binary built from the Go image in a
// stage of its own, run from scratch as a non-root user with its default
// config, a HEALTHCHECK through its own healthcheck command, the ports it
// listens on and SIGTERM to stop. The sturdy image is the default target.
func TestDockerfileShape(t *testing.T) {
	stages, _ := dockerfile(t)
	if last := stages[len(stages)-1].Name; last != "sturdy" {
		t.Errorf("the last stage (docker build's default target) is %q; want sturdy", last)
	}
	base := map[string]string{} // stage -> the image or stage it starts from
	for _, s := range stages {
		base[s.Name] = s.BaseName
	}
	for _, img := range images {
		t.Run(img.stage, func(t *testing.T) { testImage(t, stages, base, img) })
	}
}

func testImage(t *testing.T, stages []instructions.Stage, base map[string]string, img image) {
	build, final := stageNamed(t, stages, img.build), stageNamed(t, stages, img.stage)
	from := build.BaseName
	for base[from] != "" {
		from = base[from]
	}
	if !strings.HasPrefix(from, "golang:") {
		t.Errorf("stage %q builds from %q; want golang", build.Name, from)
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
				if c.From == img.build {
					fromBuild[src] = true
				} else if c.From != "" {
					t.Errorf("COPY --from=%s %s: not from the image's build stage %s", c.From, src, img.build)
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
	if slices.Sort(exposed); !slices.Equal(exposed, img.ports) {
		t.Errorf("EXPOSE %v; want %v", exposed, img.ports)
	}
	binPath := "/usr/bin/" + img.bin
	if len(health) < 3 || health[0] != "CMD" || health[1] != binPath || health[2] != "healthcheck" || !healthInterval {
		t.Errorf("HEALTHCHECK %v; want CMD %s healthcheck with an interval and a timeout", health, binPath)
	}
	if !slices.Equal(entry, []string{binPath}) || !slices.Equal(cmd, []string{"run", "-c", "/etc/sturdy/sturdy.yaml"}) {
		t.Errorf("ENTRYPOINT %v CMD %v", entry, cmd)
	}
	if !fromBuild["/out/"+img.bin] {
		t.Errorf("the binary is not copied from the %s stage", img.build)
	}
	if _, ok := copied[binPath+"|/out/"+img.bin]; !ok {
		t.Errorf("/out/%s is not copied to %s: %v", img.bin, binPath, copied)
	}
	if _, ok := copied["/etc/sturdy/sturdy.yaml|"+img.config]; !ok {
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

// Each build stage's go build line, with its ARGs expanded as docker
// would, builds a static binary here, and that binary passes its own
// check on the config its image ships (as the next RUN line does in the
// image) and reports the stamped version.
func TestDockerfileBuildCommandWorks(t *testing.T) {
	if testing.Short() {
		t.Skip("builds sturdy and sturdy-gateway; skipped with -short")
	}
	stages, metaArgs := dockerfile(t)
	for _, img := range images {
		t.Run(img.stage, func(t *testing.T) { testBuildStage(t, stages, metaArgs, img) })
	}
}

func testBuildStage(t *testing.T, stages []instructions.Stage, metaArgs []instructions.ArgCommand, img image) {
	env := map[string]string{}
	for _, a := range metaArgs {
		for _, kv := range a.Args {
			if kv.Value != nil {
				env[kv.Key] = *kv.Value
			}
		}
	}
	var goBuild, check string
	for _, c := range stageNamed(t, stages, img.build).Commands {
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
		t.Fatalf("no go build or check RUN line in the %s stage", img.build)
	}
	for _, want := range []string{"CGO_ENABLED=0", "-trimpath", "-X github.com/sturdyproxy/sturdy/internal/cli.version=", "-o /out/" + img.bin + " ./cmd/" + img.bin} {
		if !strings.Contains(goBuild, want) {
			t.Errorf("go build line lacks %q: %s", want, goBuild)
		}
	}
	if !strings.Contains(check, "/out/"+img.bin+" check -q -c "+img.config) {
		t.Errorf("the check line does not check %s with %s: %s", img.config, img.bin, check)
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
	bin := filepath.Join(out, img.bin)
	if b, err := exec.Command("file", bin).Output(); err == nil && !strings.Contains(string(b), "statically linked") {
		t.Errorf("not static: %s", b)
	}
	b, err := exec.Command(bin, "--version").Output()
	if err != nil || !strings.HasPrefix(string(b), img.bin+" "+env["VERSION"]) {
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
