package drill

import (
	"bufio"
	"io"
	"strings"
	"time"
)

// nginxConf wraps a scenario's http {} contents in a main config that keeps
// everything inside dir: pid file, temp paths, error log. The error log is
// at warn so that "upstream server temporarily disabled" (a warning) shows
// ejections; log lines are counted at nginx's default level, error.
func nginxConf(dir, user, http string) string {
	var b strings.Builder
	if user != "" {
		b.WriteString("user " + user + ";\n")
	}
	b.WriteString(`worker_processes 1;
pid ` + dir + `/nginx.pid;
error_log ` + dir + `/error.log warn;
events { worker_connections 1024; }
http {
    access_log off;
    client_body_temp_path ` + dir + `/client_body;
    proxy_temp_path ` + dir + `/proxy_temp;
    fastcgi_temp_path ` + dir + `/fastcgi_temp;
    uwsgi_temp_path ` + dir + `/uwsgi_temp;
    scgi_temp_path ` + dir + `/scgi_temp;
`)
	b.WriteString(http)
	b.WriteString("}\n")
	return b.String()
}

// analyzeErrorLog reads nginx error log lines
// ("2026/01/02 15:04:05 [error] 123#123: *4 no live upstreams while ...")
// into an observation: lines at error level or worse, ejections ("upstream
// server temporarily disabled"), and the pool-empty time estimated as the
// number of distinct seconds with a "no live upstreams" line.
func analyzeErrorLog(r io.Reader) observation {
	var o observation
	empty := map[string]bool{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		level := ""
		if i := strings.IndexByte(line, '['); i >= 0 {
			if j := strings.IndexByte(line[i:], ']'); j > 0 {
				level = line[i+1 : i+j]
			}
		}
		switch level {
		case "error", "crit", "alert", "emerg":
			o.logLines++
			if len(o.lines) < keepLines {
				o.lines = append(o.lines, line)
			}
		}
		if strings.Contains(line, "upstream server temporarily disabled") {
			o.ejections++
		}
		if strings.Contains(line, "no live upstreams") && len(line) >= 19 {
			empty[line[:19]] = true
		}
	}
	o.poolEmpty = time.Duration(len(empty)) * time.Second
	o.estimated = len(empty) > 0
	return o
}
