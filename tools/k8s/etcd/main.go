// Command etcd is etcd's own server, built here so that the Kubernetes tests
// of sturdy can start a real etcd without a download.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
