package static

import (
	"mime"
	"path"
	"strings"
)

// types is the Content-Type of the common web formats, so that they do not
// depend on the machine's /etc/mime.types (which Go's mime package reads,
// and which differs between distributions, or is missing in containers).
// Text types carry charset=utf-8. .js is application/javascript, as in
// nginx's mime.types, so that a site moved from nginx sends its scripts
// with the type it always did. Values are shared header slices: read-only.
var types = map[string][]string{}

func init() {
	const utf8 = "; charset=utf-8"
	for ext, t := range map[string]string{
		".html": "text/html" + utf8, ".htm": "text/html" + utf8,
		".css": "text/css" + utf8, ".js": "application/javascript" + utf8, ".mjs": "text/javascript" + utf8,
		".cjs": "text/javascript" + utf8, ".json": "application/json", ".map": "application/json",
		".webmanifest": "application/manifest+json", ".jsonld": "application/ld+json",
		".xml": "application/xml", ".rss": "application/rss+xml", ".atom": "application/atom+xml",
		".xhtml": "application/xhtml+xml", ".txt": "text/plain" + utf8, ".md": "text/markdown" + utf8,
		".csv": "text/csv" + utf8, ".ics": "text/calendar" + utf8, ".vtt": "text/vtt" + utf8,
		".yaml": "application/yaml", ".yml": "application/yaml", ".toml": "application/toml",
		".wasm": "application/wasm", ".pdf": "application/pdf", ".zip": "application/zip",
		".gz": "application/gzip", ".tar": "application/x-tar", ".br": "application/x-brotli",
		".zst": "application/zstd", ".7z": "application/x-7z-compressed",
		".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".gif": "image/gif",
		".webp": "image/webp", ".avif": "image/avif", ".svg": "image/svg+xml", ".ico": "image/x-icon",
		".bmp": "image/bmp", ".apng": "image/apng", ".tif": "image/tiff", ".tiff": "image/tiff",
		".jxl":  "image/jxl",
		".woff": "font/woff", ".woff2": "font/woff2", ".ttf": "font/ttf", ".otf": "font/otf",
		".eot": "application/vnd.ms-fontobject",
		".mp4": "video/mp4", ".webm": "video/webm", ".ogv": "video/ogg", ".mov": "video/quicktime",
		".m3u8": "application/vnd.apple.mpegurl", ".ts": "video/mp2t",
		".mp3": "audio/mpeg", ".ogg": "audio/ogg", ".oga": "audio/ogg", ".opus": "audio/ogg",
		".wav": "audio/wav", ".flac": "audio/flac", ".m4a": "audio/mp4", ".aac": "audio/aac",
	} {
		types[ext] = []string{t}
	}
}

var octetStream = []string{"application/octet-stream"}

// contentType returns the Content-Type for a file name: the table above,
// then Go's mime package, then application/octet-stream, as nginx's
// default_type. Never sniffed, so that a file's type does not depend on its
// first bytes.
func contentType(name string) []string {
	ext := strings.ToLower(path.Ext(name))
	if t, ok := types[ext]; ok {
		return t
	}
	if t := mime.TypeByExtension(ext); t != "" {
		return []string{t}
	}
	return octetStream
}
