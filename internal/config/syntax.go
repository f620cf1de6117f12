package config

import (
	"bytes"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// syntaxError turns "yaml: line 3: did not find expected key" into a
// positioned Error on the line where the mistake is.
//
// yaml.v3 numbers a parser error by the line where the enclosing construct
// began (its "context"), 0-based, not by where the parser got stuck: a bad
// indent on line 7 inside a list that starts on line 5 comes out as "line
// 4". The library does not expose the position of the problem itself, so
// it is found here by parsing ever longer prefixes of the file: the first
// prefix that fails with the same message and the same context line ends
// on the line that holds the mistake. This runs only for a file that
// already failed, and configs are small.
func syntaxError(name string, data []byte, err error) Error {
	line, msg := splitYAMLError(err)
	if l := problemLine(data, line, msg); l > 0 {
		line = l
	}
	return Error{File: name, Line: line, Msg: "YAML syntax: " + msg}
}

// splitYAMLError splits yaml.v3's "yaml: line N: message" into N (0 when
// absent) and the message.
func splitYAMLError(err error) (int, string) {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if n, tail, ok := strings.Cut(rest, ": "); ok {
			if l, err := strconv.Atoi(n); err == nil {
				return l, tail
			}
		}
	}
	return 0, msg
}

// problemLine returns the 1-based line of the mistake that made data fail
// with (reported, msg), or 0 when it cannot tell.
func problemLine(data []byte, reported int, msg string) int {
	if anchor, ok := strings.CutPrefix(msg, "unknown anchor '"); ok {
		// Reported without a line: the first use of the alias is the one.
		anchor, _, _ = strings.Cut(anchor, "'")
		return firstLineWith(data, "*"+anchor)
	}
	if reported == 0 {
		return 0
	}
	lines := bytes.SplitAfter(data, []byte("\n"))
	// The construct the error is reported in starts at or before the
	// mistake, so no shorter prefix can hold it. reported may be 0-based.
	start := max(reported-1, 1)
	for n := start; n <= len(lines); n++ {
		prefix := bytes.Join(lines[:n], nil)
		var root yaml.Node
		err := yaml.Unmarshal(prefix, &root)
		if err == nil {
			continue
		}
		if l, m := splitYAMLError(err); l == reported && m == msg {
			return lastNonBlank(lines[:n])
		}
	}
	return 0
}

// lastNonBlank returns the 1-based number of the last line that holds more
// than white space: an error at the end of the input belongs to the last
// line that wrote something.
func lastNonBlank(lines [][]byte) int {
	for i := len(lines) - 1; i >= 0; i-- {
		if len(bytes.TrimSpace(lines[i])) > 0 {
			return i + 1
		}
	}
	return len(lines)
}

func firstLineWith(data []byte, s string) int {
	for i, l := range bytes.Split(data, []byte("\n")) {
		if bytes.Contains(l, []byte(s)) {
			return i + 1
		}
	}
	return 0
}
