// Package scale holds the system tests of an in-process cluster of 100
// nodes (issue 41): it forms, runs a coordinated job with 64 consumers and
// an exactly-once DYNAMIC job through 10 random node kills to the end, and
// shuts down promptly. They take minutes on a 2-core machine, so they are
// behind the build tag scale:
//
//	go test -tags scale -p 1 -count=1 -timeout 20m ./systemtest/scale/
//
// feedmesh-bench scale measures the same cluster's costs and formation
// time.
package scale
