package client

import (
	"context"
	"fmt"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/transport"
)

// The cluster's control methods beside jobs: what `feedmesh members`,
// `status` and `jobs` show, and the key-value methods tests use. Members
// and Status describe the node that was dialed, so they ask it alone;
// the others fail over to another node like every job request.

// Members lists the members as the dialed node's gossip sees them.
func (c *Client) Members(ctx context.Context) ([]api.Member, error) {
	var ms []api.Member
	return ms, c.callDialed(ctx, api.MethodMembers, struct{}{}, &ms)
}

// Status returns the dialed node's view of the Raft group.
func (c *Client) Status(ctx context.Context) (api.Status, error) {
	var s api.Status
	return s, c.callDialed(ctx, api.MethodStatus, struct{}{}, &s)
}

// Jobs lists the cluster's jobs.
func (c *Client) Jobs(ctx context.Context) ([]api.JobInfo, error) {
	var out []api.JobInfo
	return out, c.call(ctx, api.MethodJobs, api.JobRequest{}, &out)
}

// Job returns the job named name as the cluster holds it (its state,
// consumers, options, when it was created); an unknown job is an error
// that wraps transport.ErrNotFound.
func (c *Client) Job(ctx context.Context, name string) (api.JobInfo, error) {
	var resp api.JobGetResponse
	if err := c.call(ctx, api.MethodJobGet, api.JobRequest{Job: name}, &resp); err != nil {
		return api.JobInfo{}, fmt.Errorf("job %q: %w", name, err)
	}
	return resp.Job, nil
}

// Put writes key=value through the cluster's leader and returns the log
// index it landed at.
func (c *Client) Put(ctx context.Context, key string, value []byte) (uint64, error) {
	var r api.PutResponse
	return r.Index, c.call(ctx, api.MethodPut, api.PutRequest{Key: key, Value: value}, &r)
}

// Get reads key: linearizable through the leader, or the answering node's
// own copy when stale.
func (c *Client) Get(ctx context.Context, key string, stale bool) ([]byte, bool, error) {
	var r api.GetResponse
	err := c.call(ctx, api.MethodGet, api.GetRequest{Key: key, Stale: stale}, &r)
	return r.Value, r.Found, err
}

// TokenCreate creates access token id for tenant ("": the default
// tenant), an administrator's if admin, and returns it: shown once, the
// cluster keeps its hash only. For administrators.
func (c *Client) TokenCreate(ctx context.Context, id, tenant string, admin bool) (string, error) {
	var r api.TokenCreateResponse
	err := c.call(ctx, api.MethodTokenCreate, api.TokenCreateRequest{ID: id, Tenant: tenant, Admin: admin}, &r)
	return r.Token, err
}

// TokenRevoke revokes access token id. For administrators.
func (c *Client) TokenRevoke(ctx context.Context, id string) error {
	return c.call(ctx, api.MethodTokenRevoke, api.TokenRevokeRequest{ID: id}, nil)
}

// callDialed asks the node Dial was given, with no failover.
func (c *Client) callDialed(ctx context.Context, method string, req, resp any) error {
	ctx, cancel := context.WithTimeout(transport.WithToken(ctx, c.opts.Token), c.opts.RequestTimeout)
	defer cancel()
	if err := transport.Call(ctx, c.tr, c.codec, c.addr, method, req, resp); err != nil {
		return fmt.Errorf("%s at %s: %w", method, c.addr, err)
	}
	return nil
}
