package harness

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sturdyproxy/sturdy/internal/adapt/nginx"
	"github.com/sturdyproxy/sturdy/internal/adapt/nginx/nginxtest"
	"github.com/sturdyproxy/sturdy/internal/adapt/nginx/translate"
)

var update = flag.Bool("update", false, "rewrite testdata/summary.golden with this run's results")

// corpusFlag runs the harness on other configurations (one directory per
// configuration, laid out as ../testdata/corpus): an operator's own, or
// real ones that cannot be kept in the repository. The figures are
// logged and not compared with the golden summary.
var corpusFlag = flag.String("corpus", "", "run on the configurations in this directory instead of ../testdata/corpus, without comparing with the golden summary")

// sturdyBin is the sturdy binary TestMain builds ("" under -short or
// without nginx, when the behaviour test skips).
var sturdyBin string

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() || nginxtest.Binary() == "" {
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "sturdy-harness-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	sturdyBin = filepath.Join(dir, "sturdy")
	cmd := exec.Command("go", "build", "-o", sturdyBin, "./cmd/sturdy")
	cmd.Dir = "../../../.."
	if out, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building sturdy: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

const corpusDir = "../testdata/corpus"

// TestBehaviour runs every corpus configuration through nginx and through
// sturdy's translation and compares the answers request by request. The
// figures and every request's verdict are kept in testdata/summary.golden:
// a change either way fails, with -update recording it.
func TestBehaviour(t *testing.T) {
	dir := corpusDir
	if *corpusFlag != "" {
		dir = *corpusFlag
	}
	runCorpus(t, dir, "testdata/summary.golden", *corpusFlag == "")
}

// featuresDir holds one small configuration per nginx feature the import
// translates (return 444, server-level allow-lists, upgrades, static
// fall-throughs, auth_request, header variables, proxy_pass with
// variables), each with a requests file of the requests that show it.
const featuresDir = "../testdata/features"

// TestFeatures is TestBehaviour on the feature configurations, with its
// own golden file, testdata/features.golden.
func TestFeatures(t *testing.T) {
	runCorpus(t, featuresDir, "testdata/features.golden", true)
}

// runCorpus runs the configurations below dir and compares the summary
// with golden (when compare is set; -update rewrites it).
func runCorpus(t *testing.T, dir, golden string, compare bool) {
	if testing.Short() {
		t.Skip("starts nginx and sturdy for every corpus configuration; skipped under -short")
	}
	if nginxtest.Binary() == "" {
		t.Skip(nginxtest.SkipMessage)
	}
	dirs, err := filepath.Glob(filepath.Join(dir, "*"))
	if err != nil {
		t.Fatal(err)
	}
	rejects := readRejects(t, filepath.Join(dir, "NGINX-REJECTS"))
	rsa := rsaPair(t)
	var results []*configResult
	for _, d := range dirs {
		if st, err := os.Stat(d); err != nil || !st.IsDir() {
			continue
		}
		name := filepath.Base(d)
		if reason, ok := rejects[name]; ok {
			results = append(results, &configResult{name: name, skipped: "nginx rejects it on this machine: " + reason})
			continue
		}
		r := runConfig(t, d, rsa)
		t.Logf("%s: %s", name, r.figures())
		results = append(results, r)
	}
	s := summarize(results, dir)
	t.Log("\n" + s.totalsLine())
	if !compare {
		t.Log("\n" + s.text)
		return
	}
	if *update {
		if err := os.WriteFile(golden, []byte(s.text), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -run %s -update to record the figures)", err, t.Name())
	}
	if string(want) != s.text {
		t.Errorf("the results differ from %s: %s\n%s\nrun with -update to record them", golden, s.compareTo(string(want)), diffLines(string(want), s.text))
	}
}

// configResult is one configuration's run.
type configResult struct {
	name      string
	skipped   string // why it did not run
	imported  bool
	importErr string
	passTotal int // locations with proxy_pass
	passDone  int // ... translated
	reqs      []reqResult
}

func (c *configResult) same() int {
	n := 0
	for _, r := range c.reqs {
		if r.same {
			n++
		}
	}
	return n
}

func (c *configResult) figures() string {
	if c.skipped != "" {
		return "skipped: " + c.skipped
	}
	imp := "imported"
	if !c.imported {
		imp = "not imported"
	}
	return fmt.Sprintf("%s; proxy_pass locations translated %d/%d; requests answered the same %d/%d", imp, c.passDone, c.passTotal, c.same(), len(c.reqs))
}

// runConfig starts nginx and sturdy for one corpus configuration and sends
// them its requests.
func runConfig(t *testing.T, dir string, rsa [2]string) *configResult {
	name := filepath.Base(dir)
	res := &configResult{name: name}
	main := filepath.Join(dir, "main.conf")
	if _, err := os.Stat(main); err != nil {
		main = filepath.Join(dir, "nginx.conf")
	}
	cfg, err := nginx.ParseFile(main, nginx.Options{})
	if err != nil {
		t.Errorf("%s: %v", name, err)
		return res
	}
	work := t.TempDir()
	// nginx's workers run as another user when the tests run as root:
	// they must reach the files below work (a missing file is then 404,
	// as in production, not 403).
	for _, d := range []string{work, filepath.Dir(work)} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	ndir := filepath.Join(work, "nginx")
	if err := os.Mkdir(ndir, 0o755); err != nil {
		t.Fatal(err)
	}
	site := nginx.NewSite(cfg)
	absDir, _ := filepath.Abs(dir)
	// nginx runs with -p ndir: the translation resolves relative roots,
	// and nginx's default root, against the same prefix.
	tr, terr := translate.Translate(site, translate.Options{ConfigDir: absDir, Prefix: ndir})
	var blocks []translate.Block
	if terr == nil {
		blocks = tr.Blocks
	} else {
		var ne *translate.NothingError
		if errors.As(terr, &ne) {
			blocks = ne.Blocks
		}
		res.importErr = firstLine(terr.Error())
	}
	res.passTotal, res.passDone = passCounts(site, blocks)

	cert, key, err := nginxtest.WriteCert(work)
	if err != nil {
		t.Fatal(err)
	}
	be := newBackend()
	defer be.close()
	nports, sports := map[string]int{}, map[string]int{}
	port := func(m map[string]int, k string) int {
		if p, ok := m[k]; ok {
			return p
		}
		p, err := nginxtest.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		m[k] = p
		return p
	}
	backendAddr := func(addr string) string {
		a, err := be.listen(addr)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	text, err := nginxtest.Rewrite(cfg, nginxtest.Plan{Dir: ndir, Cert: cert, Key: key, RSACert: rsa[0], RSAKey: rsa[1], User: nginxtest.User(),
		Port: func(k string) int { return port(nports, k) }, Backend: backendAddr})
	if err != nil {
		t.Fatal(err)
	}
	reqs := requests(site)
	extra, err := readRequests(filepath.Join(dir, "requests"), site)
	if err != nil {
		t.Fatal(err)
	}
	reqs = append(reqs, extra...)
	for _, rq := range reqs {
		if err := placeStatic(ndir, rq); err != nil {
			t.Fatal(err)
		}
	}
	nfile := filepath.Join(ndir, "nginx.conf")
	if err := os.WriteFile(nfile, text, 0o644); err != nil {
		t.Fatal(err)
	}
	var waitN []string
	for _, k := range sortedKeys(nports) {
		waitN = append(waitN, fmt.Sprintf("127.0.0.1:%d", nports[k]))
	}
	ctx := context.Background()
	ng, err := nginxtest.Start(ctx, nginxtest.Binary(), ndir, nfile, waitN)
	if err != nil {
		t.Errorf("%s: nginx does not start with the rewritten config: %v", name, err)
		return res
	}
	defer ng.Stop()

	var st *sturdyProc
	if tr != nil {
		yfile := filepath.Join(work, "sturdy.yaml")
		waitS, err := rewriteSturdy(tr.YAML, yfile, ndir, cert, key, func(k string) int { return port(sports, k) }, backendAddr)
		if err != nil {
			t.Errorf("%s: cannot rewrite the translation: %v", name, err)
		} else if st, err = startSturdy(ctx, yfile, waitS); err != nil {
			res.importErr = "sturdy does not run the translation: " + firstLine(err.Error())
		} else {
			defer st.stop()
			res.imported = true
		}
	}
	chosen, pools, clean := chosenHeaders(cfg), upstreamPools(site), cleaner(be, nports, sports)
	for i, rq := range reqs {
		rr := reqResult{req: rq}
		rr.nginx = send(rq, nports[rq.key], fmt.Sprintf("%s-n%d", name, i), be)
		if p, ok := sports[rq.key]; ok && st != nil {
			rr.sturdy = send(rq, p, fmt.Sprintf("%s-s%d", name, i), be)
		} else {
			rr.sturdy = answer{err: "no sturdy listener for this address"}
		}
		rr.compare(chosen, pools, clean)
		if !rr.same {
			rr.needs = attribute(rr.kind, blockFor(blocks, rq.srv, nil), blockFor(blocks, rq.srv, rq.loc))
			if len(rr.needs) == 0 && st == nil {
				rr.needs = attribute("all", blocksPtr(blocks)...)
			}
		}
		res.reqs = append(res.reqs, rr)
	}
	return res
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

// passCounts counts the locations with a proxy_pass (their own, or in an
// if block) and those of them the import translated.
func passCounts(site *nginx.Site, blocks []translate.Block) (total, done int) {
	for _, srv := range site.Servers {
		for _, l := range srv.Locations {
			has := l.ProxyPass != nil
			for _, d := range l.Local("if") {
				has = has || d.Child("proxy_pass") != nil
			}
			if !has {
				continue
			}
			total++
			if b := blockFor(blocks, srv, l); b != nil && (b.Status == translate.Translated || b.Status == translate.TranslatedDiffers) {
				done++
			}
		}
	}
	return total, done
}

func blocksPtr(bs []translate.Block) []*translate.Block {
	out := make([]*translate.Block, len(bs))
	for i := range bs {
		out[i] = &bs[i]
	}
	return out
}

// blockFor finds the import's block for a server (loc nil) or location.
func blockFor(blocks []translate.Block, srv *nginx.Server, loc *nginx.Location) *translate.Block {
	if srv == nil {
		return nil
	}
	d := srv.Dir
	if loc != nil {
		d = loc.Dir
	}
	for i := range blocks {
		b := &blocks[i]
		if b.File == d.File && b.Line == d.Line && (loc == nil) == (b.Location == "") {
			return b
		}
	}
	return nil
}

// rsaPair writes one RSA certificate for every configuration's nginx
// (beside the ECDSA one), made once: RSA keys are slow to generate.
func rsaPair(t *testing.T) [2]string {
	t.Helper()
	dir := t.TempDir()
	for _, d := range []string{dir, filepath.Dir(dir)} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cert, key, err := nginxtest.WriteRSACert(dir)
	if err != nil {
		t.Fatal(err)
	}
	return [2]string{cert, key}
}

// readRejects reads NGINX-REJECTS: "name: reason" lines, # comments.
func readRejects(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, reason, _ := strings.Cut(line, ":")
		out[strings.TrimSpace(name)] = strings.TrimSpace(reason)
	}
	return out
}
