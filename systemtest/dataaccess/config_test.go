package dataaccess

import (
	"github.com/feedmesh/feedmesh/mesh"
	"github.com/feedmesh/feedmesh/pipeline/objstore"
	"github.com/feedmesh/feedmesh/testcluster"
)

// dataAccess gives every node of a cluster these data roots, allowed
// hosts and named stores.
func dataAccess(roots, hosts []string, stores ...objstore.NamedStore) testcluster.Option {
	return testcluster.WithConfig(func(_ int, c *mesh.Config) {
		c.DataRoots, c.AllowHosts, c.ObjectStores = roots, hosts, stores
	})
}
