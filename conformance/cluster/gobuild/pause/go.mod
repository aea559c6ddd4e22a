// The test node's pause program (its pods' sandbox process), built by
// conformance/cluster/build.sh and packed as an image by node.sh.
module bindery.dev/conformance/pause

go 1.25.0
