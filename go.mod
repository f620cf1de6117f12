module github.com/sturdyproxy/sturdy

go 1.26.8

require (
	github.com/maypok86/otter/v2 v2.4.0 // indirect
	github.com/prometheus/client_golang v1.25.0 // indirect
	go.yaml.in/yaml/v3 v3.0.6 // indirect
	golang.org/x/net v0.62.0 // indirect
	golang.org/x/text v0.43.0 // indirect
)
