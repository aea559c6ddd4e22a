// Command etcd is the upstream etcd server, built from its own Go module at the
// version pinned in go.mod. Nothing here changes its behaviour.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
