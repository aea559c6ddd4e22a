module bindery.test/oracles/jsonpatch

go 1.24

require gopkg.in/evanphx/json-patch.v4 v4.12.0

require github.com/pkg/errors v0.9.1 // indirect
